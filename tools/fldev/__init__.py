"""fastlaunch's development tools: the launch-path benchmark and the stand-ins tests and benchmarks share.

Not part of the runtime package: run with tools/ on sys.path (`PYTHONPATH=tools python -m fldev bench`)."""
