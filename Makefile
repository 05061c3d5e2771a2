# sbpc: `make demo` and `make test` set everything up themselves on Debian 12:
# missing packages (installed with apt-get as root, else the exact command is
# printed), configure, build, then run.
SHELL := /bin/bash
BUILD ?= build
PACKAGES := cmake ninja-build g++ make libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools \
            nlohmann-json3-dev libgtest-dev libopenblas-dev libopenmpi-dev openmpi-bin \
            python3 python3-numpy python3-venv python3-torch
LIT := /usr/bin/python3 /usr/lib/llvm-19/build/utils/lit/lit.py
CMAKE_FLAGS := -G Ninja -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir -DCMAKE_BUILD_TYPE=Release \
               -DSBPC_WERROR=ON

.PHONY: all deps build test test-gpu test-training-matrix check-sanitizers demo docs bench-search bench-pipeline bench-cpu bench-gpu gpu-bundle clean

all: build

deps:
	@missing=""; \
	for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "sbpc: installing$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	  else \
	    echo "sbpc: missing packages; run:"; \
	    echo "  sudo apt-get install --no-install-recommends$$missing"; \
	    exit 1; \
	  fi; \
	fi

build: deps
	@[ -f $(BUILD)/build.ninja ] || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	@cmake --build $(BUILD)

# Every test (lit: IR, tools, end to end; GoogleTest units through lit), then
# one summary line.
test: build
	@start=$$(date +%s); \
	$(LIT) -sv $(BUILD)/test $(BUILD)/test/unit 2>&1 | tee $(BUILD)/test.log; \
	status=$${PIPESTATUS[0]}; \
	echo "tests took $$(( $$(date +%s) - start )) s"; \
	test/lit-summary.sh $(BUILD)/test.log $$status

# The GPU tests (REQUIRES: gpu under test/: the CUDA target against the
# CPU target and the reference, compute-sanitizer) and the CUDA target's
# build tests. make test builds the CUDA target and skips these
# where there is no GPU; this fails there instead.
test-gpu: build
	@nvidia-smi -L 2>/dev/null | grep -q GPU || \
	  { echo "make test-gpu: no GPU here (nvidia-smi -L lists none)"; exit 1; }
	@$(LIT) -sv $(BUILD)/test --filter 'e2e/(gpu|cuda)-' 2>&1 | tee $(BUILD)/test-gpu.log; \
	  test/lit-summary.sh $(BUILD)/test-gpu.log $${PIPESTATUS[0]}

# Every test again under AddressSanitizer and UBSan, in its own build
# directory (a few minutes more). LLVM's allocators poison their slabs from
# inline code that libMLIR.so, built without ASan, does not unpoison:
# allow_user_poisoning=0 ignores that poisoning and keeps every real check.
check-sanitizers: deps
	@[ -f $(BUILD)-asan/build.ninja ] || cmake -S . -B $(BUILD)-asan $(CMAKE_FLAGS) \
	  -DCMAKE_BUILD_TYPE=Debug -DSBPC_CUDA=OFF \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -O1"
	@cmake --build $(BUILD)-asan
	@ASAN_OPTIONS=allow_user_poisoning=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(LIT) -sv $(BUILD)-asan/test $(BUILD)-asan/test/unit 2>&1 | tee $(BUILD)-asan/test.log; \
	  test/lit-summary.sh $(BUILD)-asan/test.log $${PIPESTATUS[0]}

# The layout-search benchmark (bench/search/README.md): about five minutes;
# matplotlib for its plot comes from PyPI into a venv under the build
# directory, pinned, and only the benchmark uses it.
BENCH_VENV := $(BUILD)/bench-venv
bench-search: build
	@[ -x $(BENCH_VENV)/bin/python ] || { python3 -m venv $(BENCH_VENV) && \
	  $(BENCH_VENV)/bin/pip install -q matplotlib==3.9.2; }
	@$(BENCH_VENV)/bin/python bench/search/run.py --sbpc $(BUILD)/bin/sbpc --out bench/search

# The pipeline-schedule benchmark (bench/README.md): a small GPT's training
# step run on the CPU on one rank and on pp=2 under each schedule; about
# three minutes.
bench-pipeline: build
	@/usr/bin/python3 bench/pipeline/run.py --sbpc $(BUILD)/bin/sbpc --out bench/pipeline

# The CPU benchmark (bench/README.md): GPT-2 small's forward and training
# step on one core, sbpc's CPU target against PyTorch eager on the CPU.
bench-cpu: build
	@/usr/bin/python3 bench/cpu/run.py --sbpc $(BUILD)/bin/sbpc --out bench/cpu

# The GPU benchmark (bench/README.md): GPT-2 small and medium, forward and
# training step, against PyTorch eager and torch.compile where PyTorch has
# CUDA, and their GEMM layers against cuBLAS; f32 and bf16. Needs a GPU.
bench-gpu: build
	@/usr/bin/python3 bench/gpu/run.py --sbpc $(BUILD)/bin/sbpc --out bench/gpu

# The GPU bundle (docs/cuda.md): gpu-equal.test's cases and the GPU
# benchmark's programs compiled here, with this machine's Open MPI, for a
# GPU machine without sbpc's build dependencies:
#   tar xJf gpu-bundle.tar.xz && gpu-bundle/run.sh OUTPUT_DIR
gpu-bundle: build
	@/usr/bin/python3 test/gpu/bundle.py --sbpc $(BUILD)/bin/sbpc --out $(BUILD)/gpu-bundle \
	  --carry-mpi --tar $(BUILD)/gpu-bundle.tar.xz

demo: build
	@/usr/bin/python3 examples/demo.py --sbpc $(BUILD)/bin/sbpc --workdir $(BUILD)/demo

# Refresh the dialect and pass references in docs/ from ODS.
# Training's full matrix (make test runs a covering subset): MLP and GPT,
# dp / tp / dp-tp / auto, each ZeRO stage x micro-batches 1, 4 x
# recomputation none, full; 128 cases of 10 steps, about 20 minutes on 2 cores.
test-training-matrix: build
	PATH=$(CURDIR)/$(BUILD)/bin:$$PATH /usr/bin/python3 test/e2e/train_suite.py --workdir $(BUILD)/matrix/mlp \
	  --model mlp --matrix --cases dp@x=2 tp@x=2 dp-tp@dp=2,tp=2 auto@dp=2,tp=2
	PATH=$(CURDIR)/$(BUILD)/bin:$$PATH /usr/bin/python3 test/e2e/train_suite.py --workdir $(BUILD)/matrix/gpt \
	  --model gpt --batch 8 --eps 1e-5 --matrix --cases dp@x=2 tp@x=2 dp-tp@dp=2,tp=2 auto@dp=2,tp=2

docs: build
	@cp $(BUILD)/dialects/Graph/IR/GraphDialect.md docs/dialects/graph.md
	@cp $(BUILD)/dialects/Sbp/IR/SbpDialect.md docs/dialects/sbp.md
	@cp $(BUILD)/dialects/Exec/IR/ExecDialect.md docs/dialects/exec.md
	@cp $(BUILD)/passes/Sbp/Passes.md docs/passes.md
	@cp $(BUILD)/passes/Exec/Passes.md docs/exec-passes.md
	@cp $(BUILD)/passes/Graph/Passes.md docs/graph-passes.md
	@echo "docs/dialects/ updated"

clean:
	rm -rf $(BUILD) $(BUILD)-asan
