# The front door: `make test` and `make bench` do their own set-up from a fresh clone.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
BUILD := build/release
ASAN := build/sanitize
# torch is pinned to the CPU build that pip finds on this kind of machine; triton compiles kernels
# for a GPU target without a GPU.
PY_DEPS := meson meson-python ninja pytest numpy matplotlib torch==2.13.0 triton
SOURCES := $(shell git ls-files 'src/*' 'include/*' 'python/*' 'meson.build' 'meson.options' '*/meson.build' 2>/dev/null)

.PHONY: all test test-versions bench bench-quick ctest ctest-sanitize pytest clean

all: $(VENV)/.installed

$(VENV)/.deps:
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet $(PY_DEPS)
	touch $@

$(BUILD)/build.ninja: $(VENV)/.deps
	$(VENV)/bin/meson setup $(BUILD) -Dpython=disabled --reconfigure >/dev/null || $(VENV)/bin/meson setup $(BUILD) -Dpython=disabled

$(ASAN)/build.ninja: $(VENV)/.deps
	$(VENV)/bin/meson setup $(ASAN) -Dpython=disabled -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false --reconfigure >/dev/null || \
	  $(VENV)/bin/meson setup $(ASAN) -Dpython=disabled -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false

# The package (extension included) installed into the virtual environment, rebuilt when a source changes.
$(VENV)/.installed: $(VENV)/.deps $(SOURCES) pyproject.toml
	$(VPY) -m pip install --quiet --no-build-isolation --no-deps .
	touch $@

ctest: $(BUILD)/build.ninja
	$(VENV)/bin/meson test -C $(BUILD) --print-errorlogs

ctest-sanitize: $(ASAN)/build.ninja
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
	  $(VENV)/bin/meson test -C $(ASAN) --print-errorlogs

pytest: $(VENV)/.installed
	cd tests/python && ../../$(VPY) -m pytest -q

test: ctest ctest-sanitize pytest

# The Python suite on every supported torch (2.9 to 2.15, each with the Triton it requires) on
# Python 3.11 and 3.12: venvs built once with uv and cached under ~/.cache/fastlaunch/versions
# (several GB, CUDA builds of torch), never part of `make test`. Prints a table; fails if any pair does.
test-versions:
	$(PYTHON) tools/test-versions $(VERSIONS_ARGS)

# The main job: the C benchmark of a planned launch against deriving the layout per call, then
# every launch path from Python side by side, on the host backend and on the null backend.
bench: $(VENV)/.installed $(BUILD)/build.ninja
	$(VENV)/bin/meson compile -C $(BUILD) >/dev/null
	$(BUILD)/bench/bench_launch
	PYTHONPATH=tools $(VPY) -m fldev bench --backend host --backend null --backend cuda-stub

bench-quick: $(VENV)/.installed $(BUILD)/build.ninja
	PYTHONPATH=tools $(VPY) -m fldev bench --quick

clean:
	rm -rf build $(VENV)
