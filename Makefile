# tandem — build, test, demo and benchmarks.
#
#   make            the tandem binary (./tandem) on libtandem.a of the layers
#   make demo       installs what is missing, builds, runs the demo on the CPU
#   make test       installs what is missing, runs every test in two builds:
#                   rel (-O2) and asan (-O1, AddressSanitizer + UndefinedBehaviorSanitizer)
#   make bench-cpu  CPU backend vs PyTorch, same model, batch and threads
#   make bench-ckpt commit stall/throughput vs memcpy/dd; episode cost vs vanilla
#   make bench-s3   a ~1 GiB state to/from a loopback S3 server beside aws s3 cp
#   make fuzz       libFuzzer on every store record decoder (FUZZ_SECONDS each, default 60)
#
# Builds live in build/<variant>/ with the source tree mirrored below it.

.DEFAULT_GOAL := all
BUILD   := build
PKGS    := yaml-0.1 libcrypto msgpack libcurl
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
LDLIBS := $(PKG_LIBS) -fopenmp -lm

LAYERS   := util data model steps storage runner
LIB_SRC  := $(filter-out runner/main.c,$(foreach d,$(LAYERS),$(wildcard $(d)/*.c)))
TEST_SRC := $(wildcard tests/test_*.c)
BENCH_SRC := $(wildcard bench/*.c)
VARIANTS := rel asan

define variant_rules
$(BUILD)/$(1)/%.o: %.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(BASE_CFLAGS) $$(CFLAGS_$(1)) -c $$< -o $$@

$(BUILD)/$(1)/libtandem.a: $$(patsubst %.c,$(BUILD)/$(1)/%.o,$$(LIB_SRC))
	@rm -f $$@
	ar rcs $$@ $$^

$(BUILD)/$(1)/tandem: $(BUILD)/$(1)/runner/main.o $(BUILD)/$(1)/libtandem.a
	$$(CC) $$(LDFLAGS_$(1)) -o $$@ $$^ $$(LDLIBS)

$(BUILD)/$(1)/tests/%: $(BUILD)/$(1)/tests/%.o $(BUILD)/$(1)/libtandem.a
	$$(CC) $$(LDFLAGS_$(1)) -o $$@ $$^ $$(LDLIBS)

$(BUILD)/$(1)/bench/%: $(BUILD)/$(1)/bench/%.o $(BUILD)/$(1)/libtandem.a
	$$(CC) $$(LDFLAGS_$(1)) -o $$@ $$^ $$(LDLIBS)

$(1)-tests: $(BUILD)/$(1)/tandem $$(patsubst tests/%.c,$(BUILD)/$(1)/tests/%,$$(TEST_SRC))
endef
$(foreach v,$(VARIANTS),$(eval $(call variant_rules,$(v))))

.PRECIOUS: $(BUILD)/%.o
.SECONDARY:

all: tandem

tandem: $(BUILD)/rel/tandem
	cp $< $@

deps:
	@bash scripts/deps.sh build

deps-test:
	@bash scripts/deps.sh test

# The test command of the README: installs, builds both variants, runs everything.
test: deps-test
	@$(MAKE) --no-print-directory test-run

test-run: tandem rel-tests asan-tests
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

bench-s3: deps-test
	@$(MAKE) --no-print-directory $(BUILD)/rel/bench/bench_s3
	@bash bench/s3.sh

fuzz:
	@bash scripts/deps.sh fuzz
	@bash tests/fuzz/run.sh

clean:
	rm -rf $(BUILD) tandem

.PHONY: all deps deps-test test test-run demo bench-cpu bench-ckpt bench-s3 fuzz clean $(addsuffix -tests,$(VARIANTS))

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
