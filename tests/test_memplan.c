/* test_memplan.c — the memory estimate a run prints and checks before it allocates
 * (runner/memplan.h), the sizes it reads (util/meminfo.h), and the CPU backend's
 * workspace estimate against what its create() really allocates.
 *
 *   parse        "64M", "1.5G", "12345" and what is not a size
 *   cpu          model_cpu_ops.workspace_bytes is what create() allocates (mallinfo2)
 *   decisions    checkpoint.snapshot = auto takes the host copy when it fits and streams
 *                when it does not; host refuses naming stream; a model that does not fit
 *                at all is refused naming the knob of its larger part first; on a GPU the
 *                device's free memory is what counts, and fp32 suggests bf16
 *   address_space under an address-space limit (RLIMIT_AS) the plan counts what the run
 *                maps besides its memory: OpenBLAS's buffers to come (2 per thread), a
 *                stack (RLIMIT_STACK) and an arena per thread; refused (naming ulimit -v
 *                and run.threads, or ulimit -s where the stacks dominate) past the limit,
 *                where the run hung in OpenBLAS or died in libgomp; nothing counted without
 *                a limit (not under ASan, whose shadow memory takes terabytes)
 */
#include <malloc.h>
#include <stdint.h>
#include <sys/resource.h>
#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void); /* libasan; gcc ships no header for it */
#endif

#include "model/blas_core.h"
#include "model/model.h"
#include "config/config.h"
#include "runner/memplan.h"
#include "tests/test.h"
#include "util/meminfo.h"

static void test_parse_size(void) {
    CHECK(mem_parse_size("12345") == 12345, "plain");
    CHECK(mem_parse_size("64M") == 64.0 * 1048576, "M");
    CHECK(mem_parse_size("64MiB") == 64.0 * 1048576, "MiB");
    CHECK(mem_parse_size("1.5G") == 1.5 * 1073741824, "G");
    CHECK(mem_parse_size("2t") == 2.0 * 1099511627776, "t");
    CHECK(mem_parse_size("") < 0 && mem_parse_size(NULL) < 0, "empty");
    CHECK(mem_parse_size("ten") < 0 && mem_parse_size("10Q") < 0 && mem_parse_size("-1") < 0 &&
              mem_parse_size("5G junk") < 0,
          "not sizes");
    /* strtod's other forms (before: 16 bytes, 1000 bytes, 24 GiB) */
    CHECK(mem_parse_size("0x10") < 0 && mem_parse_size("1e3") < 0 && mem_parse_size(" 24G") < 0 &&
              mem_parse_size("1.G") < 0 && mem_parse_size(".5G") < 0 && mem_parse_size("inf") < 0,
          "strtod's forms");
    /* 0 turned the memory check off without a word: refused at start */
    tdm_err me = {0};
    setenv("TANDEM_MEM_AVAILABLE", "0", 1);
    CHECK(mem_env_check(&me) == ERR_USAGE && strstr(me.msg, "above 0"), "0: %s", me.msg);
    setenv("TANDEM_MEM_AVAILABLE", "0.5K", 1);
    CHECK(mem_env_check(&me) == 0, "0.5K: %s", me.msg);
    setenv("TANDEM_MEM_AVAILABLE", "3G", 1);
    const char *src = NULL;
    CHECK(mem_available(&src) == 3.0 * 1073741824 && strcmp(src, "TANDEM_MEM_AVAILABLE") == 0,
          "override");
    unsetenv("TANDEM_MEM_AVAILABLE");
    double real = mem_available(&src);
    CHECK(real > 0 && src[0], "this machine's available memory is known (%g, %s)", real, src);
}

/* Bytes allocated on the heap now: glibc's count, or ASan's allocator's under ASan (which
 * replaces malloc, so glibc's count stays flat). */
static double heap_bytes(void) {
#if defined(__SANITIZE_ADDRESS__)
    return (double)__sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2();
    return (double)mi.uordblks + (double)mi.hblkhd;
#endif
}

static void test_cpu_estimate_is_what_create_allocates(void) {
    static const model_config shapes[] = {
        {.vocab = 256, .ctx = 64, .layers = 2, .heads = 4, .channels = 64},
        {.vocab = 300, .ctx = 128, .layers = 3, .heads = 2, .channels = 96},
    };
    static const int batch[][2] = {{12, 64}, {7, 100}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        model_layout lay;
        CHECK(model_layout_init(&lay, &shapes[k], NULL) == 0, "layout");
        double want = model_cpu_ops.workspace_bytes(&lay, batch[k][0], batch[k][1], 4, 2);
        double before = heap_bytes();
        tdm_err e = {0};
        model_ctx *ctx = model_cpu_ops.create(&lay, batch[k][0], batch[k][1], 4, 2, &e);
        CHECK(ctx, "create: %s", e.msg);
        double got = heap_bytes() - before;
        model_cpu_ops.destroy(ctx);
        model_layout_free(&lay);
        /* create also holds a copy of the tensor table and its offsets: a few KiB */
        printf("  shape %zu: estimate %.0f bytes, create allocated %.0f\n", k, want, got);
        CHECK(got >= want && got <= want * 1.01 + 65536, "shape %zu: estimate %.0f, allocated %.0f",
              k, want, got);
    }
}

/* A backend whose workspace is whatever the test says. */
static double g_ws;
static double fake_ws(const model_layout *lay, int B, int T, int M, int threads) {
    (void)lay, (void)B, (void)T, (void)M, (void)threads;
    return g_ws;
}
static const model_ops fake_ops = {.name = "fake", .workspace_bytes = fake_ws};

static void set_avail(double bytes) {
    char v[64];
    snprintf(v, sizeof v, "%.0f", bytes);
    setenv("TANDEM_MEM_AVAILABLE", v, 1);
}

static void test_decisions(void) {
    model_config mc = {.vocab = 256, .ctx = 64, .layers = 2, .heads = 4, .channels = 128};
    model_layout lay;
    CHECK(model_layout_init(&lay, &mc, NULL) == 0, "layout");
    double P4 = (double)lay.numel * 4, twins = 6 * P4, snap = 3 * P4, chunk = 65536;
    double stream = 4 * chunk;
    config cfg;
    config_defaults(&cfg);
    run_memplan m;
    tdm_err e = {0};
    g_ws = 0.5 * twins; /* the parameters dominate */
    double base = twins + g_ws;

    set_avail(1e12);
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, 0, 0, &e) == 0, "%s", e.msg);
    CHECK(!m.streaming && m.host_base == base && m.snapshot == snap && m.stream == stream,
          "plenty: streaming %d base %g", m.streaming, m.host_base);
    char line[1024];
    memplan_describe(&m, line, sizeof line);
    CHECK(strstr(line, "checkpoint copy") && strstr(line, "in the background"), "%s", line);

    /* the copy fits, but would leave less than the share auto keeps free: stream */
    set_avail(base + snap);
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, 0, 0, &e) == 0, "%s", e.msg);
    CHECK(m.streaming, "auto should stream at %g available", base + snap);
    memplan_describe(&m, line, sizeof line);
    CHECK(strstr(line, "stream chunk by chunk") && strstr(line, "TANDEM_MEM_AVAILABLE"), "%s", line);

    /* host asked for, and the copy does not fit: refused, naming stream */
    cfg.checkpoint.snapshot = CONFIG_SNAPSHOT_HOST;
    set_avail(base + snap - 1);
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, 0, 0, &e) == ERR_USAGE,
          "host copy that does not fit was accepted");
    CHECK(strstr(e.msg, "checkpoint.snapshot = stream"), "%s", e.msg);
    /* ... and where it fits, host it is, however tight */
    set_avail(base + snap);
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, 0, 0, &e) == 0 && !m.streaming,
          "host that fits");

    /* nothing fits: refused, the larger part's knob first */
    cfg.checkpoint.snapshot = CONFIG_SNAPSHOT_AUTO;
    set_avail(base + stream - 1);
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, 0, 0, &e) == ERR_USAGE, "fit");
    CHECK(strstr(e.msg, "does not fit in this machine's memory"), "%s", e.msg);
    char *layers = strstr(e.msg, "model.layers"), *batch = strstr(e.msg, "train.batch");
    CHECK(layers && batch && layers < batch, "parameters dominate, so model.* first: %s", e.msg);
    set_avail(base + stream); /* streaming makes it fit exactly */
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, 0, 0, &e) == 0 && m.streaming,
          "streaming fits");
    g_ws = 3 * twins; /* now the activations dominate */
    set_avail(twins + g_ws);
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, 0, 0, &e) == ERR_USAGE, "fit");
    layers = strstr(e.msg, "model.layers"), batch = strstr(e.msg, "train.batch");
    CHECK(layers && batch && batch < layers, "workspace dominates, so train.batch first: %s", e.msg);

    CHECK(strstr(e.msg, "train.micro_batch") && strstr(e.msg, "train.micro_batch") < batch,
          "the workspace's first knob is train.micro_batch: %s", e.msg);
    /* micro-batches: the workspace is one pass's rows, and a seventh buffer holds a pass's
     * gradient */
    cfg.train.micro_batch = 3;
    set_avail(1e12);
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, 0, 0, &e) == 0, "%s", e.msg);
    CHECK(m.rows == 3 && m.buffers == 7 && m.twins == 7 * P4, "micro: rows %d buffers %d", m.rows,
          m.buffers);
    cfg.train.micro_batch = 8; /* as large as the batch: one pass */
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, 0, 0, &e) == 0 && m.rows == 8 &&
              m.buffers == 6,
          "micro = rows: %d %d", m.rows, m.buffers);
    cfg.train.micro_batch = 0;
    /* a CPU run of several ranks stages the gradient on the host */
    set_avail(1e12);
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 2, chunk, 0, 0, &e) == 0, "%s", e.msg);
    CHECK(m.host_base == twins + g_ws + P4, "2 ranks: base %g", m.host_base);

    /* on a GPU: the device's free memory decides; the host holds only the checkpoint */
    cfg.run.device = CONFIG_DEVICE_CUDA;
    double need = twins + g_ws;
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, need, 80e9, &e) == ERR_USAGE,
          "a model that fills the GPU to the byte leaves CUDA nothing");
    CHECK(strstr(e.msg, "does not fit on this GPU") && strstr(e.msg, "run.precision = bf16") &&
              strstr(e.msg, "train.batch"),
          "%s", e.msg);
    cfg.run.precision = CONFIG_PRECISION_BF16;
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, need, 80e9, &e) == ERR_USAGE &&
              !strstr(e.msg, "run.precision"),
          "bf16 already: %s", e.msg);
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, chunk, need + 1e9, 80e9, &e) == 0,
          "%s", e.msg);
    CHECK(m.host_base == 0 && !m.streaming, "GPU run: host base %g", m.host_base);
    memplan_describe(&m, line, sizeof line);
    CHECK(strstr(line, "GPU ~") && strstr(line, "free"), "%s", line);
    unsetenv("TANDEM_MEM_AVAILABLE");
    model_layout_free(&lay);
}

static void test_address_space(void) {
#if defined(__SANITIZE_ADDRESS__)
    TEST_SKIP("under ASan: its shadow memory is mapped past any limit");
#else
    model_config mc = {.vocab = 256, .ctx = 64, .layers = 2, .heads = 4, .channels = 128};
    model_layout lay;
    CHECK(model_layout_init(&lay, &mc, NULL) == 0, "layout");
    config cfg;
    config_defaults(&cfg);
    cfg.run.threads = 3;
    run_memplan m;
    tdm_err e = {0};
    g_ws = 1e6;
    set_avail(1e12);
    struct rlimit as0, st0;
    CHECK(getrlimit(RLIMIT_AS, &as0) == 0 && getrlimit(RLIMIT_STACK, &st0) == 0, "getrlimit");
    /* no limit: nothing counted, nothing said */
    struct rlimit as = as0;
    as.rlim_cur = RLIM_INFINITY;
    if (as.rlim_max == RLIM_INFINITY && setrlimit(RLIMIT_AS, &as) == 0) {
        CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, 65536, 0, 0, &e) == 0, "%s", e.msg);
        char line[1024];
        memplan_describe(&m, line, sizeof line);
        CHECK(m.as_limit == 0 && m.as_need == 0 && !strstr(line, "address space"), "%s", line);
    }
    double vm = mem_vm_size();
    CHECK(vm > 0, "VmSize is read");
    /* a generous limit: counted and said */
    as.rlim_cur = (rlim_t)(vm + 64.0 * 1073741824);
    if (as0.rlim_max != RLIM_INFINITY && as.rlim_cur > as0.rlim_max) as.rlim_cur = as0.rlim_max;
    CHECK(setrlimit(RLIMIT_AS, &as) == 0, "setrlimit AS");
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, 65536, 0, 0, &e) == 0, "%s", e.msg);
    int have = blas_core_threads();
    CHECK(m.as_limit == (double)as.rlim_cur && m.as_mapped > 0, "limit %g mapped %g", m.as_limit, m.as_mapped);
    CHECK(m.blas_more == (6 > have ? 6 - have : 0), "3 threads: 6 buffers, %d mapped: %d more", have,
          m.blas_more);
    CHECK(m.threads == 2 + 1 + 3 && m.stack >= 16384 && m.arenas >= 1 && m.arenas <= m.threads,
          "threads %d stack %g arenas %d", m.threads, m.stack, m.arenas);
    double ck = m.streaming ? m.stream : m.snapshot;
    CHECK(m.as_need == m.as_mapped + m.host_base + ck + m.blas_more * 134217728.0 +
                           m.threads * m.stack + m.arenas * 67108864.0,
          "need %g", m.as_need);
    char line[1024];
    memplan_describe(&m, line, sizeof line);
    CHECK(strstr(line, "address space ~") && strstr(line, "ulimit -v"), "%s", line);
    /* just below the need (all of it above what is mapped now: the test goes on) */
    double need = m.as_need;
    as.rlim_cur = (rlim_t)(need - 1048576);
    CHECK(setrlimit(RLIMIT_AS, &as) == 0, "setrlimit AS");
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, 65536, 0, 0, &e) == ERR_USAGE,
          "a run past ulimit -v by 1 MiB was planned");
    CHECK(strstr(e.msg, "address-space limit (ulimit -v)") && strstr(e.msg, "run.threads") &&
              strstr(e.msg, "ulimit -v unlimited") && strstr(e.msg, "thread stacks"),
          "%s", e.msg);
    as.rlim_cur = (rlim_t)(need + 1048576);
    CHECK(setrlimit(RLIMIT_AS, &as) == 0, "setrlimit AS");
    CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, 65536, 0, 0, &e) == 0, "%s", e.msg);
    /* stacks of 1 GiB (ulimit -s 1048576) under a limit 2 GiB above the rest: ulimit -s named
     * first (libgomp's "Thread creation failed" before) */
    struct rlimit st = st0;
    st.rlim_cur = 1073741824;
    if (st0.rlim_max == RLIM_INFINITY || st0.rlim_max >= st.rlim_cur) {
        CHECK(setrlimit(RLIMIT_STACK, &st) == 0, "setrlimit STACK");
        as.rlim_cur = (rlim_t)(need + 2.0 * 1073741824);
        if (as0.rlim_max == RLIM_INFINITY || as.rlim_cur <= as0.rlim_max) {
            CHECK(setrlimit(RLIMIT_AS, &as) == 0, "setrlimit AS");
            CHECK(memplan_make(&m, &cfg, &lay, &fake_ops, 8, 64, 4, 1, 65536, 0, 0, &e) == ERR_USAGE,
                  "1 GiB stacks planned");
            CHECK(strstr(e.msg, "lower the stack size (ulimit -s") && strstr(e.msg, "stacks of 1.00 GiB"),
                  "%s", e.msg);
        }
        setrlimit(RLIMIT_STACK, &st0);
    }
    setrlimit(RLIMIT_AS, &as0);
    unsetenv("TANDEM_MEM_AVAILABLE");
    model_layout_free(&lay);
#endif
}

int main(void) {
    RUN(test_parse_size);
    RUN(test_cpu_estimate_is_what_create_allocates);
    RUN(test_decisions);
    RUN(test_address_space);
    return test_summary("test_memplan");
}
