# Quick start: `make demo` and `make test`. Each installs what is missing, configures, builds and runs.
PRESET ?= release
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: all deps build demo test unit-tests cli-tests python-tests sanitize clean format

all: build

deps:
	@scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt CMakePresets.json
	cmake --preset $(PRESET)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Compiles the demo kernels ahead of time (sm_90a when no GPU is present), runs again from the cache,
# and on an H100/H200 also launches them and checks the results.
demo: build
	$(BUILD_DIR)/kiln_demo

unit-tests: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900

cli-tests: build
	KILN_BUILD_DIR=$(abspath $(BUILD_DIR)) python3 -m pytest -q tests/cli tests/scripts

# The Python package as a user gets it: a fresh virtual environment, `pip install .` (scikit-build-core builds
# the module, libkiln and the command), then pytest against the installed package. No GPU or PyTorch needed.
PYVENV := build/pyvenv
python-tests: deps
	rm -rf $(PYVENV) && python3 -m venv $(PYVENV)
	$(PYVENV)/bin/python -m pip install -q numpy pytest
	$(PYVENV)/bin/python -m pip install -q .
	$(PYVENV)/bin/python -m pytest -q tests/python

test: unit-tests cli-tests python-tests

# The host code under the sanitizers, each in its own preset and build folder: every unit test with
# AddressSanitizer and UBSan (any report fails the run), and the programs that test threads (cache, JIT table and
# runtime, NVRTC, configuration, launch setup, subprocesses) with ThreadSanitizer, less the races inside libnvrtc it
# cannot see the synchronisation of (tests/tsan_suppressions.txt). CI runs it after `make test`.
TSAN_TESTS := cache_eviction_test cache_multiprocess_test cache_redis_test compiler_nvrtc_test config_settings_test \
              cuda_fake_driver_test cuda_launch_setup_test jit_kernel_table_test jit_runtime_test jit_tiers_test \
              util_subprocess_test
sanitize: deps
	cmake --preset asan
	cmake --build build/asan -j $(JOBS)
	cd build/asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 900
	cmake --preset tsan
	cmake --build build/tsan -j $(JOBS) --target $(TSAN_TESTS) kiln_test_helper
	for t in $(TSAN_TESTS); do TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan_suppressions.txt" \
	  build/tsan/tests/$$t || exit 1; done

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.cuh' '*.h')

clean:
	rm -rf build
