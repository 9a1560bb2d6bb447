# Quick start: `make demo` and `make test`. Each installs what is missing, configures, builds and runs.
PRESET ?= release
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: all deps build demo test unit-tests cli-tests python-tests clean format

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

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.cuh' '*.h')

clean:
	rm -rf build
