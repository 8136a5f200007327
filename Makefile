# tandem — build, test, demo and benchmarks.
#
#   make            the tandem binary (./tandem) on libtandem.a of the layers
#   make demo       installs what is missing, builds, runs the demo on the CPU
#   make test       installs what is missing, runs every test in two builds:
#                   rel (-O2) and asan (-O1, AddressSanitizer + UndefinedBehaviorSanitizer)
#   make bench-cpu  CPU backend vs PyTorch, same model, batch and threads
#   make bench-ckpt commit stall/throughput vs memcpy/dd; episode cost vs vanilla
#   make bench-s3   a ~1 GiB state to/from a loopback S3 server beside aws s3 cp
#   make bench-tokenizer  tokenizer MB/s (1 and all threads) vs js-tiktoken and HF tokenizers.js
#   make bench-dmo  TANDEM α* vs Uniform, Natural and UniMax on real text in three data regimes,
#                   3 DMO x 3 final seeds (SIZE=cpu|gpu|smoke, REGIMES="abundant paper heavy")
#   make bench-dmo-synth  the same protocol on a generated corpus, in minutes
#   make fuzz       libFuzzer on every store record decoder, the Parquet reader, the
#                   config loader, the file readers and the S3 client's reads of an
#                   endpoint's answer (FUZZ_SECONDS each, default 60)
#   make test-gpu   the CUDA backend against the CPU reference on a GPU (says SKIPPED without one)
#   make bench-gpu  CUDA backend vs PyTorch (bf16, SDPA) on a GPU: tokens/s, MFU, episode cost
#
# Builds live in build/<variant>/ with the source tree mirrored below it.

.DEFAULT_GOAL := all
BUILD   := build
PKGS    := yaml-0.1 libcrypto msgpack libcurl zlib libzstd jansson
# OpenBLAS built for OpenMP, so BLAS and our OpenMP loops share one thread pool instead
# of two pools spinning against each other (Debian's default is the pthread build).
BLAS_PC := /usr/lib/x86_64-linux-gnu/openblas-openmp/pkgconfig/openblas.pc
BLAS_LIBDIR := $(shell pkg-config --variable=libdir $(BLAS_PC) 2>/dev/null)
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) $(BLAS_PC) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) $(BLAS_PC) 2>/dev/null) -Wl,-rpath,$(BLAS_LIBDIR)

CC ?= gcc
BASE_CFLAGS := -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -I. -g -fopenmp -MMD -MP \
               $(PKG_CFLAGS)
CFLAGS_rel  := -O2
CFLAGS_asan := -O1 -fsanitize=address,undefined -fno-omit-frame-pointer \
               -fno-sanitize-recover=undefined
LDFLAGS_rel  :=
LDFLAGS_asan := -fsanitize=address,undefined
LDLIBS := $(PKG_LIBS) -lsnappy -fopenmp -lm

# Open MPI (the data-parallel transport, comm/comm_mpi.c) where pkg-config finds it, in the
# rel build only (ASan and Open MPI's allocations don't mix); MPI= (empty) builds without.
ifeq ($(origin MPI),undefined)
MPI := $(shell pkg-config --exists ompi-c 2>/dev/null && echo ompi-c)
endif
ifneq ($(strip $(MPI)),)
CFLAGS_rel += -DTANDEM_HAVE_MPI $(shell pkg-config --cflags $(MPI))
MPI_LIBS := $(shell pkg-config --libs $(MPI))
LIBS_rel := $(MPI_LIBS)
endif

LAYERS   := util data model steps storage ledger comm config report deploy runner cli
# gpu/loader.c (plain C) finds the CUDA backend at run time; the backend itself (gpu/*.cu)
# is the plugin tandem-cuda.so, built in the GPU section below
LIB_SRC  := $(filter-out cli/main.c,$(foreach d,$(LAYERS),$(wildcard $(d)/*.c))) gpu/loader.c
# tests/test_gpu.c is not in the default suite: `make test-gpu` builds and runs it (GPU section)
TEST_SRC := $(filter-out tests/test_gpu.c,$(wildcard tests/test_*.c))
BENCH_SRC := $(wildcard bench/*.c)
VARIANTS := rel asan

define variant_rules
$(BUILD)/$(1)/%.o: %.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(BASE_CFLAGS) $$(CFLAGS_$(1)) -c $$< -o $$@

$(BUILD)/$(1)/gen/presets.o: $(BUILD)/gen/presets.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(BASE_CFLAGS) $$(CFLAGS_$(1)) -c $$< -o $$@

$(BUILD)/$(1)/libtandem.a: $$(patsubst %.c,$(BUILD)/$(1)/%.o,$$(LIB_SRC)) $(BUILD)/$(1)/gen/presets.o
	@rm -f $$@
	ar rcs $$@ $$^

$(BUILD)/$(1)/tandem: $(BUILD)/$(1)/cli/main.o $(BUILD)/$(1)/libtandem.a
	$$(CC) $$(LDFLAGS_$(1)) -o $$@ $$^ $$(LDLIBS) $$(LIBS_$(1))

$(BUILD)/$(1)/tests/%: $(BUILD)/$(1)/tests/%.o $(BUILD)/$(1)/libtandem.a
	$$(CC) $$(LDFLAGS_$(1)) -o $$@ $$^ $$(LDLIBS) $$(LIBS_$(1))

$(BUILD)/$(1)/bench/%: $(BUILD)/$(1)/bench/%.o $(BUILD)/$(1)/libtandem.a
	$$(CC) $$(LDFLAGS_$(1)) -o $$@ $$^ $$(LDLIBS) $$(LIBS_$(1))

$(1)-tests: $(BUILD)/$(1)/tandem $$(patsubst tests/%.c,$(BUILD)/$(1)/tests/%,$$(TEST_SRC))
endef
$(foreach v,$(VARIANTS),$(eval $(call variant_rules,$(v))))

.PRECIOUS: $(BUILD)/%.o
.SECONDARY:

all: tandem


deps:
	@bash scripts/deps.sh build

deps-test:
	@bash scripts/deps.sh test

# The test command of the README: installs, builds both variants (one compiler per core),
# runs everything (tests/run.sh: two tests at a time, TEST_JOBS).
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: deps-test
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) test-run

test-run: tandem rel-tests asan-tests $(BUILD)/sim/test_gpu $(BUILD)/sim/test_gpu_hf $(BUILD)/sim/test_gpu_sim_io
	@bash tests/run.sh $(VARIANTS)

demo: deps
	@$(MAKE) --no-print-directory tandem
	@bash scripts/demo.sh

bench-cpu: deps-test
	@$(MAKE) --no-print-directory $(BUILD)/rel/bench/bench_cpu
	@bash bench/cpu.sh

bench-ckpt: deps
	@$(MAKE) --no-print-directory $(BUILD)/rel/bench/bench_ckpt
	@$(BUILD)/rel/bench/bench_ckpt

bench-tokenizer: build/rel/bench/bench_tokenizer
	@bash bench/tokenizer.sh

bench-s3: deps-test
	@$(MAKE) --no-print-directory $(BUILD)/rel/bench/bench_s3
	@bash bench/s3.sh

bench-dmo: deps-test
	@$(MAKE) --no-print-directory tandem
	@bash bench/dmo.sh

bench-dmo-synth: deps-test
	@$(MAKE) --no-print-directory tandem
	@bash bench/dmo_synth.sh

# The chaos harness at ten times the bounded size that `make test` runs (tests/test_chaos.c;
# the table of a run is in docs/reliability.md). CHAOS_SCALE and CHAOS_SEED override.
chaos: deps-test
	@$(MAKE) --no-print-directory tandem $(BUILD)/rel/tests/test_chaos
	@CHAOS_SCALE=$${CHAOS_SCALE:-10} TANDEM_BIN=$(BUILD)/rel/tandem TANDEM_ROOT=$(CURDIR) \
		$(BUILD)/rel/tests/test_chaos

fuzz: $(BUILD)/gen/presets.c
	@bash scripts/deps.sh fuzz
	@bash tests/fuzz/run.sh

# ---------------------------------------------------------------- GPU (CUDA) section
# With nvcc (on PATH or in /usr/local/cuda), the rel build compiles gpu/*.cu (machine code
# for sm_$(CUDA_ARCH) plus PTX, so newer GPUs run it too) into the plugin
# $(BUILD)/rel/tandem-cuda.so, linked against cudart, cuBLAS, cuBLASLt and NCCL, and
# defines TANDEM_HAVE_CUDA for the C code. ./tandem itself links none of the CUDA
# libraries: it loads the plugin when a run asks for run.device=cuda (gpu/plugin.h says
# why), so it starts in milliseconds and runs on CPU nodes without them. test_gpu and
# bench_gpu link the plugin directly. Nothing here needs a GPU to build. The asan build
# never has CUDA (AddressSanitizer and the CUDA runtime don't mix). NVCC= (empty) builds
# without.
ifeq ($(origin NVCC),undefined)
NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
endif
CUDA_ARCH ?= 90
ifneq ($(strip $(NVCC)),)
HAVE_CUDA   := 1
# where the toolkit really is (nvcc on PATH may be a wrapper script elsewhere): nvcc's TOP
CUDA_HOME   := $(realpath $(shell $(NVCC) --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | \
                 sed -n 's/^\#\$$ TOP=//p' | head -n 1))
ifeq ($(CUDA_HOME),)
CUDA_HOME   := $(patsubst %/bin/nvcc,%,$(NVCC))
endif
CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/targets/x86_64-linux/lib) \
                           $(CUDA_HOME)/lib64)
NVCCFLAGS := -std=c++17 -O3 -lineinfo -I. -DTANDEM_HAVE_CUDA -Xcompiler -fPIC \
             -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) \
             -gencode arch=compute_$(CUDA_ARCH),code=compute_$(CUDA_ARCH) \
             -Xcompiler -Wall,-Wextra,-Werror --Werror all-warnings -MMD -MP
# cuDNN (gpu/cudnn_att.cu, model.attention): only its headers at build time, for types;
# the library is dlopen'ed at run time, so the plugin never needs it to load
ifneq ($(wildcard $(CUDA_HOME)/include/cudnn_graph.h /usr/include/cudnn_graph.h),)
NVCCFLAGS += -DTANDEM_HAVE_CUDNN_H
endif
CUDA_LIBS := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublasLt -lcublas -lcudart -lstdc++
GPU_SRC   := $(wildcard gpu/*.cu)
GPU_OBJ   := $(patsubst %.cu,$(BUILD)/rel/%.o,$(GPU_SRC))
CUDA_PLUGIN := $(BUILD)/rel/tandem-cuda.so

$(BUILD)/rel/gpu/%.o: gpu/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

CFLAGS_rel += -DTANDEM_HAVE_CUDA
# the plugin calls back into tandem (err_set, model_layout_*, comm_bcast, ...): export them
$(BUILD)/rel/tandem: LDFLAGS_rel += -rdynamic

# NCCL (GPU ranks' gradient all-reduce, comm/comm_nccl.cu) where nccl.h sits beside nvcc's
# headers (CUDA 13 ships it) and libnccl.so is found; NCCL= (empty) builds without.
ifeq ($(origin NCCL),undefined)
NCCL := $(firstword $(dir $(wildcard $(CUDA_HOME)/lib/libnccl.so $(CUDA_HOME)/lib64/libnccl.so \
           $(CUDA_HOME)/targets/x86_64-linux/lib/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so)))
ifeq ($(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h),)
NCCL :=
endif
endif
ifneq ($(strip $(NCCL)),)
NCCL_OBJ := $(BUILD)/rel/comm/comm_nccl.o
$(NCCL_OBJ): comm/comm_nccl.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -DTANDEM_HAVE_NCCL -c $< -o $@
$(BUILD)/rel/gpu/plugin.o: NVCCFLAGS += -DTANDEM_HAVE_NCCL
$(BUILD)/rel/cli/version.o: BASE_CFLAGS += -DTANDEM_PLUGIN_NCCL
CUDA_LIBS += -L$(NCCL) -Wl,-rpath,$(NCCL) -lnccl
endif

$(CUDA_PLUGIN): $(GPU_OBJ) $(NCCL_OBJ)
	$(CXX) -shared -Wl,-soname,tandem-cuda.so -o $@ $^ $(CUDA_LIBS)

# the programs that carry the backend themselves: the plugin as a library they link
# (found beside them through $$ORIGIN), so there is one copy of it in the process
GPU_PROG_LIBS := $(CUDA_PLUGIN) -Wl,-rpath,'$$ORIGIN/..' $(CUDA_LIBS)
$(BUILD)/rel/bench/bench_gpu: $(CUDA_PLUGIN)
$(BUILD)/rel/bench/bench_gpu: LDLIBS += $(GPU_PROG_LIBS)
$(BUILD)/rel/gpu-tests/test_gpu: $(CUDA_PLUGIN)
$(BUILD)/rel/gpu-tests/test_gpu: LDLIBS += $(GPU_PROG_LIBS)
# the Llama / Qwen2 kernels against CPU references (tests/test_gpu_hf.cu): the kernels'
# object and the CUDA runtime only, no libtandem
$(BUILD)/rel/tests/test_gpu_hf.o: tests/test_gpu_hf.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
$(BUILD)/rel/gpu-tests/test_gpu_hf: $(BUILD)/rel/tests/test_gpu_hf.o $(BUILD)/rel/gpu/kernels_hf.o $(BUILD)/rel/gpu/kernels_attention.o
	@mkdir -p $(dir $@)
	$(CXX) -o $@ $^ -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcudart
else
HAVE_CUDA :=
CUDA_PLUGIN :=
endif

# ./tandem, and beside it the CUDA backend it loads on demand where nvcc exists
# (copied and renamed into place: a running ./tandem keeps its old file, no "Text file busy")
tandem: $(BUILD)/rel/tandem $(CUDA_PLUGIN)
	cp $< $@.tmp && mv -f $@.tmp $@
	$(if $(CUDA_PLUGIN),cp $(CUDA_PLUGIN) tandem-cuda.so.tmp && mv -f tandem-cuda.so.tmp tandem-cuda.so)

# The presets (configs/presets/*.yaml) embedded as data: config/presets.h
$(BUILD)/gen/presets.c: $(wildcard configs/presets/*.yaml) scripts/embed_presets.sh
	@mkdir -p $(dir $@)
	@bash scripts/embed_presets.sh $@

# `tandem --version` names the git revision: cli/version.o is rebuilt when it changes
# (a stamp rewritten only when HEAD or the tree's cleanliness differs from the last build)
GIT_REV := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo +dirty)
GIT_STAMP := $(BUILD)/git-stamp
$(shell mkdir -p $(BUILD) && (echo '$(GIT_REV)' | cmp -s - $(GIT_STAMP) || echo '$(GIT_REV)' > $(GIT_STAMP)))
$(foreach v,$(VARIANTS),$(BUILD)/$(v)/cli/version.o): $(GIT_STAMP)
$(foreach v,$(VARIANTS),$(BUILD)/$(v)/cli/version.o): BASE_CFLAGS += -DTANDEM_GIT_REV='"$(GIT_REV)"'

# Objects whose code depends on TANDEM_HAVE_CUDA or TANDEM_HAVE_MPI are rebuilt when
# either changes (nvcc or Open MPI installed or removed since the last build).
CUDA_STAMP := $(BUILD)/rel/cuda-stamp
$(shell mkdir -p $(BUILD)/rel && (echo 'plugin=1 cuda=$(HAVE_CUDA) arch=$(CUDA_ARCH) mpi=$(MPI) nccl=$(NCCL)' | cmp -s - $(CUDA_STAMP) \
          || echo 'plugin=1 cuda=$(HAVE_CUDA) arch=$(CUDA_ARCH) mpi=$(MPI) nccl=$(NCCL)' > $(CUDA_STAMP)))
$(BUILD)/rel/model/model.o $(BUILD)/rel/tests/test_gpu.o $(BUILD)/rel/bench/bench_gpu.o \
    $(BUILD)/rel/runner/run.o $(BUILD)/rel/comm/comm_mpi.o $(BUILD)/rel/comm/comm.o \
    $(BUILD)/rel/gpu/loader.o $(BUILD)/rel/cli/version.o $(GPU_OBJ) $(NCCL_OBJ): $(CUDA_STAMP)

# The GPU simulator (gpu/sim/): gpu/*.cu built as host C++ against simulated CUDA,
# WMMA and cuBLASLt headers, under ASan and UBSan, linked with the asan build: the
# backend's own code runs on any machine. `make test-gpu-sim` runs tests/test_gpu.c on it
# with the threads of each block scheduled forward, in reverse and at random.
SIM_DIR      := $(BUILD)/sim
SIM_CXXFLAGS := -std=c++20 -DTANDEM_GPU_SIM -DTANDEM_HAVE_CUDA -Igpu/sim/include -I. -g -O1 \
                -Wall -Wextra -Werror -Wno-unknown-pragmas \
                -fsanitize=address,undefined -fno-omit-frame-pointer \
                -fno-sanitize-recover=undefined -MMD -MP
SIM_RT  := $(SIM_DIR)/gpu/sim/sim.o $(SIM_DIR)/gpu/sim/sim_io.o
SIM_OBJ := $(patsubst %.cu,$(SIM_DIR)/%.o,$(wildcard gpu/*.cu)) $(SIM_RT)

$(SIM_DIR)/gpu/%.o: gpu/%.cu
	@mkdir -p $(dir $@)
	$(CXX) $(SIM_CXXFLAGS) -x c++ -c $< -o $@

$(SIM_DIR)/gpu/sim/%.o: gpu/sim/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(SIM_CXXFLAGS) -c $< -o $@

$(SIM_DIR)/tests/test_gpu.o: tests/test_gpu.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS_asan) -DTANDEM_HAVE_CUDA -DTANDEM_GPU_SIM -c $< -o $@

$(SIM_DIR)/test_gpu: $(SIM_DIR)/tests/test_gpu.o $(SIM_OBJ) $(BUILD)/asan/libtandem.a
	$(CC) $(LDFLAGS_asan) -o $@ $^ $(LDLIBS) -lstdc++

# tests/test_gpu_hf.cu (kernels_hf.cu against CPU references) is C++ and needs only its
# kernels and the simulator
$(SIM_DIR)/tests/test_gpu_hf.o: tests/test_gpu_hf.cu
	@mkdir -p $(dir $@)
	$(CXX) $(SIM_CXXFLAGS) -x c++ -c $< -o $@

$(SIM_DIR)/test_gpu_hf: $(SIM_DIR)/tests/test_gpu_hf.o $(SIM_DIR)/gpu/kernels_hf.o $(SIM_DIR)/gpu/kernels_attention.o \
    $(SIM_RT)
	$(CXX) -fsanitize=address,undefined -o $@ $^

# tests/test_gpu_sim_io.cpp: the simulator's own rules for page-locked memory and waits
$(SIM_DIR)/tests/test_gpu_sim_io.o: tests/test_gpu_sim_io.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(SIM_CXXFLAGS) -c $< -o $@

$(SIM_DIR)/test_gpu_sim_io: $(SIM_DIR)/tests/test_gpu_sim_io.o $(SIM_RT)
	$(CXX) -fsanitize=address,undefined -o $@ $^

$(SIM_DIR)/bench/bench_gpu.o: bench/bench_gpu.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS_asan) -DTANDEM_HAVE_CUDA -c $< -o $@

$(SIM_DIR)/bench_gpu: $(SIM_DIR)/bench/bench_gpu.o $(SIM_OBJ) $(BUILD)/asan/libtandem.a
	$(CC) $(LDFLAGS_asan) -o $@ $^ $(LDLIBS) -lstdc++

test-gpu-sim:
	@$(MAKE) --no-print-directory $(SIM_DIR)/test_gpu $(SIM_DIR)/test_gpu_hf $(SIM_DIR)/test_gpu_sim_io $(SIM_DIR)/bench_gpu
	@bash tests/gpu_sim.sh


# test_gpu lives outside build/rel/tests/ so that tests/run.sh (make test) never runs it.
$(BUILD)/rel/gpu-tests/test_gpu: $(BUILD)/rel/tests/test_gpu.o $(BUILD)/rel/libtandem.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_rel) -o $@ $^ $(LDLIBS) $(LIBS_rel)

# A skip is never a pass: without nvcc or without a GPU this prints SKIPPED and exits 0,
# and test_gpu's summary counts its checks as skipped, never as passed. No deps step: GPU
# machines are often offline (docs/gpu.md says how to run binaries built elsewhere).
test-gpu:
	@$(MAKE) --no-print-directory tandem $(BUILD)/rel/gpu-tests/test_gpu \
	    $(if $(HAVE_CUDA),$(BUILD)/rel/gpu-tests/test_gpu_hf)
	@bash tests/gpu_run.sh
	@$(if $(HAVE_CUDA),$(BUILD)/rel/gpu-tests/test_gpu_hf)
	@bash tests/gpu_nccl.sh

bench-gpu:
	@$(MAKE) --no-print-directory tandem $(BUILD)/rel/bench/bench_gpu
	@bash bench/gpu.sh

.PHONY: test-gpu bench-gpu test-gpu-sim

clean:
	rm -rf $(BUILD) tandem tandem-cuda.so

.PHONY: all deps deps-test test test-run demo bench-cpu bench-ckpt bench-s3 bench-tokenizer bench-dmo bench-dmo-synth chaos fuzz clean $(addsuffix -tests,$(VARIANTS))

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
