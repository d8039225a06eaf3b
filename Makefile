# Entry points for people and CI. `make demo` runs the main job, `make test` every test.
# `make demo KEEP=1` leaves its loopback servers running for commands by hand, until Ctrl-C.
PYTHON ?= python3
VENV   := .venv
BUILD  := build
JOBS   ?= $(shell nproc)
DEMO_ARCHS ?= 9.0
# The CUDA toolkit `make deps` installs from PyPI where the machine has none.
PYPI_CUDA ?= 13.0
# PyTorch's own venv for the torch tests (tools/requirements-torch.txt says why it is apart), and
# a folder of wheels pip may install it from (pip --find-links; empty: PyPI alone).
TORCH_VENV   := $(BUILD)/venv-torch
TORCH_WHEELS ?=
KEEP ?=

.PHONY: deps deps-demo build helper extension test test-cpp test-torch test-python demo bench-probe clean

# Everything the tests use; deps-demo only what the demo uses (no GoogleTest, clang, fuzzers or torch venv).
deps:
	@tools/install-deps.sh test $(VENV) $(PYTHON) $(PYPI_CUDA) $(TORCH_VENV) $(TORCH_WHEELS)

deps-demo:
	@tools/install-deps.sh demo $(VENV) $(PYTHON) $(PYPI_CUDA)

# The install helper alone, as a user would build it (README, "The resolver").
helper: deps-demo
	@echo "[build] culina-resolver -> $(BUILD)/resolver"
	@cmake -S resolver -B $(BUILD)/resolver -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD)/resolver -j $(JOBS)

build: deps
	@echo "[build] resolver and C++ tests -> $(BUILD)/tests"
	@cmake -S tests -B $(BUILD)/tests -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD)/tests -j $(JOBS)

test-cpp: build
	@echo "[test] C++ (ctest)"
	@ctest --test-dir $(BUILD)/tests --output-on-failure -j $(JOBS)

# ccache (tools/install-deps.sh installs it for the tests) for the many builds of the same sources
# the tests make: one cache under $(BUILD); paths under the temporary folder, where pytest and pip
# build, hashed relative to each build's folder; the folder itself left out of the hash, which
# ccache 4.7 puts in for nvcc's -gencode=arch=compute_90a,code=sm_90a as if it asked for debug
# information (no build here does: the build drops -g).
CCACHE_ENV := CCACHE_DIR=$(abspath $(BUILD))/ccache CCACHE_BASEDIR=$(or $(TMPDIR),/tmp) CCACHE_NOHASHDIR=1

# culina._C in package/culina for the tests; CUDA for one architecture keeps CI fast.
extension: deps
	@echo "[build] culina extension in place (CUDA for sm_90 only)"
	@$(CCACHE_ENV) CULINA_CUDA_ARCHS=9.0 $(VENV)/bin/python setup.py -q build_ext --inplace

# The PyTorch tests (autograd, cu_seqlens, torch.compile) in PyTorch's venv; in .venv they skip.
TORCH_TESTS := tests/payload/test_torch.py tests/payload/test_torch_gates.py tests/payload/test_gpu_autograd.py tests/payload/test_gpu_gates.py tests/payload/test_gpu_float32.py tests/payload/test_distributed.py
test-torch: build extension
	@echo "[test] PyTorch (pytest in $(TORCH_VENV))"
	@$(CCACHE_ENV) CULINA_BUILD_DIR=$(abspath $(BUILD)) $(TORCH_VENV)/bin/python -m pytest $(TORCH_TESTS) -q

test-python: build extension
	@echo "[test] Python (pytest)"
	@$(CCACHE_ENV) CULINA_BUILD_DIR=$(abspath $(BUILD)) $(VENV)/bin/python -m pytest tests -q

# ctest first, the whole pytest suite last: the output ends with pytest's summary line.
test: test-cpp test-torch test-python

# The main job: release assets served on loopback, a real `pip install culina` in a fresh venv.
demo: helper
	@echo "[demo] what the resolver sees on this host"
	@$(BUILD)/resolver/culina-resolver probe
	@$(VENV)/bin/python tools/demo.py --archs $(DEMO_ARCHS) --resolver $(BUILD)/resolver/culina-resolver \
		$(if $(filter-out 0,$(KEEP)),--keep)

bench-probe: build
	@$(VENV)/bin/python benchmarks/probe_bench.py --resolver $(BUILD)/tests/resolver/culina-resolver

# Release assets into dist/release: a fat wheel per interpreter in PYTHONS and CUDA version in CUDA
# (this machine's toolkit where its version matches, else NVIDIA's PyPI packages) or toolkit root in
# CUDA_HOMES (defaults: the venv's Python, the nvcc found), the manifest and the sdist with it inside;
# then culina-resolver's sdist and platform wheel (with that helper) into dist/culina-resolver.
PYTHONS    ?= $(VENV)/bin/python
CUDA       ?=
CUDA_HOMES ?=
.PHONY: release
release: deps
	@$(VENV)/bin/python tools/release/build_release.py --out dist/release --python $(PYTHONS) \
		$(if $(strip $(CUDA)),--cuda $(CUDA)) $(if $(strip $(CUDA_HOMES)),--cuda-home $(CUDA_HOMES))
	@$(VENV)/bin/python tools/release/build_resolver.py --out dist/culina-resolver --prebuilt dist/release/helper

clean:
	rm -rf $(BUILD)
