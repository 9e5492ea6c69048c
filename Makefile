# The front door: `make test` and `make bench` do their own set-up from a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
BUILD := build/release
ASAN := build/sanitize
# torch 2.15.0 from PyPI (a CUDA build; it runs on the CPU here); triton compiles kernels for a GPU
# target without a GPU; liger-kernel's and fla-core's kernels are the public projects the JIT fidelity
# tests call.
# --no-cache-dir: the wheels (several GB) are not kept a second time in pip's cache; a CI machine's
# disk is not always large.
PY_DEPS := meson meson-python ninja pytest numpy matplotlib torch==2.15.0 triton liger-kernel==0.8.5 fla-core==0.6.0 einops
SOURCES := $(shell git ls-files 'src/*' 'include/*' 'python/*' 'meson.build' 'meson.options' '*/meson.build' 2>/dev/null)

.PHONY: all test test-versions test-freethreaded check-install clang-strict release-check bench bench-quick ctest ctest-sanitize ctest-tsan fuzz fuzz-quick fuzz-python jit-sanitize reentry-sanitize pytest clean

all: $(VENV)/.installed

$(VENV)/.deps:
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --no-cache-dir --upgrade pip
	PIP_CONFIG_FILE=/dev/null $(VPY) -m pip install --quiet --no-cache-dir $(PY_DEPS)
	@# FlagGems without its pins (numpy 1.26.4 among them): the environment's other packages stay
	PIP_CONFIG_FILE=/dev/null $(VPY) -m pip install --quiet --no-cache-dir --no-deps flag-gems==5.0.2
	PIP_CONFIG_FILE=/dev/null $(VPY) -m pip install --quiet --no-cache-dir PyYAML SQLAlchemy
	touch $@

$(BUILD)/build.ninja: $(VENV)/.deps
	$(VENV)/bin/meson setup $(BUILD) -Dpython=disabled --reconfigure >/dev/null || $(VENV)/bin/meson setup $(BUILD) -Dpython=disabled

# The sanitizer build uses clang 19 (Debian's clang-19, installed when missing): ASan and UBSan with
# -fsanitize=function (a call through a pointer of the wrong function type) and
# -Wcast-function-type-strict (no cast between function types at all).
CLANG19 ?= clang-19
SAN_ARGS := -Dpython=disabled -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false \
	"-Dc_args=-fsanitize=function -fno-sanitize-recover=function -Wcast-function-type-strict"
build/.clang19:
	@mkdir -p build
	@command -v $(CLANG19) >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq clang-19 >/dev/null)
	@touch $@

$(ASAN)/build.ninja: $(VENV)/.deps build/.clang19
	CC=$(CLANG19) $(VENV)/bin/meson setup $(ASAN) $(SAN_ARGS) --reconfigure >/dev/null 2>&1 || \
	  (rm -rf $(ASAN) && CC=$(CLANG19) $(VENV)/bin/meson setup $(ASAN) $(SAN_ARGS))

# The extension's sources under the same clang and warnings (its sanitized run is fuzz-python's).
PYINC = $(shell $(VPY) -c "import sysconfig; print(sysconfig.get_paths()['include'])")
clang-strict: $(VENV)/.deps build/.clang19
	@for f in $$(git ls-files 'src/python/*.c'); do \
	  $(CLANG19) -std=c11 -Wall -Wextra -Werror -Wcast-function-type-strict -D_GNU_SOURCE -fsyntax-only \
	    -Iinclude -Isrc -Isrc/python -Isrc/tensor -I$(PYINC) $$f || exit 1; done
	@echo "clang 19, -Wcast-function-type-strict: src/python clean (the release files and the testing layer)"

# The package (extension included) installed into the virtual environment, rebuilt when a source
# changes: the testing build (bench loops, fault injection, Floor, grid_eval), which the Python suite
# and the benchmark use; a wheel is built without them.
$(VENV)/.installed: $(VENV)/.deps $(SOURCES) pyproject.toml
	$(VPY) -m pip install --quiet --no-build-isolation --no-deps -Csetup-args=-Dtesting=true .
	touch $@

ctest: $(BUILD)/build.ninja
	$(VENV)/bin/meson test -C $(BUILD) --print-errorlogs

ctest-sanitize: $(ASAN)/build.ninja
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
	  $(VENV)/bin/meson test -C $(ASAN) --print-errorlogs

# The reference wheels (Triton-Ascend's, torch_npu's) come from PyPI like the test dependencies:
# their absence fails the tests here instead of skipping them.
pytest: $(VENV)/.installed
	cd tests/python && FASTLAUNCH_REQUIRE_REFERENCES=1 ../../$(VPY) -m pytest -q

# ThreadSanitizer over the C tests that run threads, the stress test among them.
TSAN := build/tsan
$(TSAN)/build.ninja: $(VENV)/.deps
	$(VENV)/bin/meson setup $(TSAN) -Dpython=disabled -Dbuildtype=debug -Db_sanitize=thread -Db_lundef=false --reconfigure >/dev/null || \
	  $(VENV)/bin/meson setup $(TSAN) -Dpython=disabled -Dbuildtype=debug -Db_sanitize=thread -Db_lundef=false

ctest-tsan: $(TSAN)/build.ninja
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $(VENV)/bin/meson test -C $(TSAN) --print-errorlogs host stress

# Fuzz targets (libFuzzer with ASan and UBSan; clang from Debian's packages, installed when missing).
# `make fuzz` runs each for FUZZ_SECONDS and keeps what it finds in fuzz/corpus; `make test` runs a
# short pass over a copy of that corpus.
CLANG ?= clang
FUZZ_SECONDS ?= 300
FUZZ_QUICK_SECONDS ?= 20
CORE_C := $(filter-out src/python/% src/tensor/%,$(shell git ls-files 'src/*.c' 2>/dev/null))
FUZZ_TARGETS := grid plan

build/fuzz/.clang:
	@mkdir -p build/fuzz
	@command -v $(CLANG) >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq clang libclang-rt-14-dev >/dev/null)
	@touch $@

build/fuzz/fuzz_%: fuzz/fuzz_%.c $(CORE_C) include/fastlaunch.h include/fastlaunch_testing.h build/fuzz/.clang
	$(CLANG) -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -Iinclude -Isrc $< $(CORE_C) -o $@ -lpthread -ldl -lm

fuzz: $(FUZZ_TARGETS:%=build/fuzz/fuzz_%) fuzz-python
	@for t in $(FUZZ_TARGETS); do \
	  build/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 fuzz/corpus/$$t 2>&1 | \
	    grep -E 'stat::number_of_executed_units|ERROR|SUMMARY' | sed "s/^/fuzz $$t: /"; \
	  test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done

# The Python API under an ASan+UBSan build of the extension (a seeded generator, fuzz/fuzz_python.py).
PYASAN := build/pyasan
PY_FUZZ_CALLS ?= 1000000
PY_FUZZ_QUICK_CALLS ?= 100000
$(PYASAN)/stage/.built: $(VENV)/.deps $(SOURCES)
	$(VENV)/bin/meson setup $(PYASAN) -Dpython=enabled -Dtests=false -Dtesting=true -Dbuildtype=debug \
	  -Db_sanitize=address,undefined -Db_lundef=false --reconfigure >/dev/null 2>&1 || \
	  $(VENV)/bin/meson setup $(PYASAN) -Dpython=enabled -Dtests=false -Dtesting=true -Dbuildtype=debug \
	  -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
	$(VENV)/bin/meson compile -C $(PYASAN) >/dev/null
	rm -rf $(PYASAN)/stage && mkdir -p $(PYASAN)/stage/fastlaunch
	cp python/fastlaunch/*.py python/fastlaunch/*.txt $(PYASAN)/stage/fastlaunch/ && cp $(PYASAN)/src/python/_C*.so $(PYASAN)/stage/fastlaunch/
	cp -r src/tensor $(PYASAN)/stage/fastlaunch/_tensor_src
	touch $@

PY_ASAN_RUN = PYTHONPATH=$(PYASAN)/stage:tools PYTHONMALLOC=malloc FASTLAUNCH_TENSOR_DOOR=0 \
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $(VPY)

fuzz-python: $(PYASAN)/stage/.built
	@echo -n "fuzz python: " && $(PY_ASAN_RUN) fuzz/fuzz_python.py $(PY_FUZZ_CALLS) 1

fuzz-quick: $(FUZZ_TARGETS:%=build/fuzz/fuzz_%) $(PYASAN)/stage/.built
	@for t in $(FUZZ_TARGETS); do \
	  rm -rf build/fuzz/corpus-$$t && mkdir -p build/fuzz/corpus-$$t && \
	  build/fuzz/fuzz_$$t -max_total_time=$(FUZZ_QUICK_SECONDS) -print_final_stats=1 build/fuzz/corpus-$$t fuzz/corpus/$$t \
	    > build/fuzz/$$t.log 2>&1 || { tail -40 build/fuzz/$$t.log; exit 1; }; \
	  grep -E 'stat::number_of_executed_units' build/fuzz/$$t.log | sed "s/^/fuzz $$t: /"; \
	done
	@echo -n "fuzz python: " && $(PY_ASAN_RUN) fuzz/fuzz_python.py $(PY_FUZZ_QUICK_CALLS) 2

# The JIT and Autotuner dispatchers under the same ASan+UBSan build (no tensor door there: the
# dispatchers' other path), 3,000 random calls against Triton's own JIT on the stand-in driver; then descriptors,
# scratch and kept compiled kernels (their hostile hooks included) against Triton alone.
jit-sanitize: $(PYASAN)/stage/.built
	@PYTHONPATH=$(PYASAN)/stage:tools PYTHONMALLOC=malloc FASTLAUNCH_TENSOR_DOOR=0 \
	  LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(VPY) -m fldev.jit_fidelity 3000 5 > build/jit-sanitize.json 2> build/jit-sanitize.log || \
	  { tail -40 build/jit-sanitize.log; cat build/jit-sanitize.json; exit 1; }
	@echo "jit under ASan+UBSan: $$(grep -E '"(identical|mismatches)"' build/jit-sanitize.json | tr -d ' \n')"
	@$(PY_ASAN_RUN) -m fldev.tma_fidelity 2000 3 > build/tma-sanitize.json 2> build/tma-sanitize.log || \
	  { tail -40 build/tma-sanitize.log; cut -c1-2000 build/tma-sanitize.json; exit 1; }
	@$(PY_ASAN_RUN) -m fldev.scratch_fidelity 400 3 > build/scratch-sanitize.json 2> build/scratch-sanitize.log || \
	  { tail -40 build/scratch-sanitize.log; cut -c1-2000 build/scratch-sanitize.json; exit 1; }
	@echo "descriptors and scratch under ASan+UBSan: $$(cut -c1-60 build/tma-sanitize.json) $$(cut -c1-40 build/scratch-sanitize.json)"
	@$(PY_ASAN_RUN) -m fldev.compiled_fidelity > build/compiled-sanitize.json 2> build/compiled-sanitize.log || \
	  { tail -40 build/compiled-sanitize.log; cut -c1-2000 build/compiled-sanitize.json; exit 1; }
	@echo "compiled kernels under ASan+UBSan (hooks that disable or drop the launch mid-call included): $$(cut -c1-40 build/compiled-sanitize.json)"
	@$(PY_ASAN_RUN) -m fldev.inductor_tma 100 3 > build/inductor-tma-sanitize.json 2> build/inductor-tma-sanitize.log || \
	  { tail -40 build/inductor-tma-sanitize.log; cut -c1-3000 build/inductor-tma-sanitize.json; exit 1; }
	@echo "Inductor's TMA templates under ASan+UBSan: $$(grep -E '"(calls|mismatches)"' build/inductor-tma-sanitize.json | head -2 | tr -d ' \n')"

# The dispatcher against callbacks that call back in, under the same build: one check per defect of
# issue 38 (fldev.reentry_checks) and of issue 55 (fldev.sequence_checks), the reentrancy harness
# (fldev.reentry: every callback point and action, against Triton alone), the combined one
# (fldev.reentry_pairs: every launch form at every point it passes, two actions per call) and 4
# launcher threads beside one toggling enable()/disable().
REENTRY_RUNS ?= 2000
REENTRY_THREAD_SECONDS ?= 10
reentry-sanitize: $(PYASAN)/stage/.built
	@$(PY_ASAN_RUN) -m fldev.reentry_checks > build/reentry-checks.log 2>&1 || { tail -60 build/reentry-checks.log; exit 1; }
	@echo "reentry checks under ASan+UBSan: $$(grep -c '"ok": true' build/reentry-checks.log) passed"
	@$(PY_ASAN_RUN) -m fldev.sequence_checks > build/sequence-checks.log 2>&1 || { tail -60 build/sequence-checks.log; exit 1; }
	@echo "launch sequence checks under ASan+UBSan: $$(grep -c '"ok": true' build/sequence-checks.log) passed"
	@$(PY_ASAN_RUN) -m fldev.reentry $(REENTRY_RUNS) 38 > build/reentry.json 2> build/reentry.log || \
	  { tail -60 build/reentry.log; cat build/reentry.json; exit 1; }
	@echo "reentrancy harness under ASan+UBSan: $$(cut -c1-160 build/reentry.json)"
	@$(PY_ASAN_RUN) -m fldev.reentry_pairs > build/reentry-pairs.json 2> build/reentry-pairs.log || \
	  { tail -60 build/reentry-pairs.log; cut -c1-4000 build/reentry-pairs.json; exit 1; }
	@echo "combined harness under ASan+UBSan (forms x points x action pairs): $$(cut -c1-120 build/reentry-pairs.json)"
	@$(PY_ASAN_RUN) -m fldev.reentry --threads $(REENTRY_THREAD_SECONDS) > build/reentry-threads.json 2> build/reentry-threads.log || \
	  { tail -60 build/reentry-threads.log; cat build/reentry-threads.json; exit 1; }
	@echo "threads under ASan+UBSan: $$(cat build/reentry-threads.json)"
	@$(PY_ASAN_RUN) -m pytest -q -p no:cacheprovider --noconftest tests/python/test_watch.py > build/reentry-watch.log 2>&1 || \
	  { tail -40 build/reentry-watch.log; exit 1; }
	@echo "watched dicts under ASan+UBSan: $$(tail -1 build/reentry-watch.log)"

test: ctest ctest-sanitize clang-strict release-check ctest-tsan fuzz-quick jit-sanitize reentry-sanitize pytest

# The Python suite on Python 3.10 to 3.13, each with its oldest and newest torch (3.13 with 2.13 to
# 2.15; `VERSIONS_ARGS=--all` for every pair), each torch with the Triton it requires: venvs built once
# with uv and cached under ~/.cache/fastlaunch/versions (several GB, CUDA builds of torch), never part
# of `make test`. Writes docs/versions.md (the tensor door and instructions per launch per row); fails
# if any pair does.
VERSIONS_ARGS ?= --keep-going --markdown docs/versions.md
# The suite on free-threaded CPython 3.13.5 (built once, cached outside the repository) with the GIL
# off throughout, torch 2.12.0 and Triton 3.7.0: tools/test-freethreaded. Writes its row in
# docs/versions.md (the pairs' rows kept). Not part of `make test`.
test-freethreaded:
	tools/test-freethreaded --markdown docs/versions.md

test-versions:
	$(PYTHON) tools/test-versions $(VERSIONS_ARGS)

# fastlaunch as a user installs it: sdist and wheel (python -m build, twine check, auditwheel repair),
# then pip install of a fresh clone and of the wheel into a venv with torch 2.15.0 (cached under
# ~/.cache/fastlaunch/install-check), each followed by a launch with tensors. Writes docs/install.md.
check-install:
	$(PYTHON) tools/check-install --markdown docs/install.md

# The extension as a wheel builds it carries no test or benchmark code (tools/check-release).
release-check: $(VENV)/.deps
	$(VPY) tools/check-release

# The main job: the C benchmark of a planned launch against deriving the layout per call, then
# every launch path from Python side by side, on the host backend and on the null backend.
bench: $(VENV)/.installed $(BUILD)/build.ninja
	$(VENV)/bin/meson compile -C $(BUILD) >/dev/null
	$(BUILD)/bench/bench_launch
	FASTLAUNCH_TENSOR_DOOR_WAIT=1 PYTHONPATH=tools $(VPY) -m fldev bench --backend host --backend null --backend cuda-stub --backend npu-stub --backend hip-stub

bench-quick: $(VENV)/.installed $(BUILD)/build.ninja
	FASTLAUNCH_TENSOR_DOOR_WAIT=1 PYTHONPATH=tools $(VPY) -m fldev bench --quick

clean:
	rm -rf build $(VENV)
