/* memplan.c — the memory estimate of a run; see memplan.h. */
#include "runner/memplan.h"

#include <omp.h>

#include "ledger/ckpt.h"
#include "model/blas_core.h"
#include "util/meminfo.h"

#define GIB 1073741824.0
/* Room kept free on a GPU beyond the estimate: cuBLAS's and the CUDA runtime's own
 * allocations after the check, and the allocator's rounding. */
#define GPU_RESERVE (768.0 * 1048576.0)
/* auto streams once the host copy would leave less than this share of memory free: the
 * page cache of a file store and the rest of the process need some. */
#define HOST_SHARE 0.85

/* The address space a run maps besides its memory (m->as_*), under an address-space limit.
 * Measured on Debian bookworm (glibc 2.36, OpenBLAS 0.3.21, libgomp), 2 CPUs, a 1-layer
 * model, a file store, ulimit -s 8192 or unlimited: VmPeak 522-553 MiB with run.threads = 1,
 * 781-889 MiB with 2, 1233-1299 MiB with 4 (322 MiB mapped when planning); this estimate
 * says 588-612, 910-940 and 1556-1597 MiB: an upper bound (not every thread makes an arena),
 * for an mmap that fails past the limit is no error here but a hang (OpenBLAS) or an abort
 * (libgomp).
 *   OpenBLAS: 2 buffers per thread (model/blas_core.h), of which the load mapped
 *     blas_core_threads() (a later run in the same process counts some twice);
 *   threads: run.threads - 1 OpenMP workers, the checkpoint writer, CKPT_IO_THREADS - 1
 *     upload or read threads, a stack each (ulimit -s; an S3 store's part transfers start
 *     more, and do their work in the calling thread where one cannot start);
 *   arenas: each such thread's malloc arena, 64 MiB reserved (glibc falls back to another
 *     arena where one cannot be made: no failure, but the room is gone for the rest). */
static void plan_address_space(run_memplan *m, const config *cfg) {
    m->as_limit = mem_as_limit();
    if (m->as_limit <= 0) return;
    int threads = cfg->run.threads > 0 ? cfg->run.threads : omp_get_max_threads();
    if (threads < 1) threads = 1;
    m->as_mapped = mem_vm_size();
    if (!m->on_gpu) {
        int have = blas_core_threads();
        /* OpenBLAS's pool holds two buffers per thread of its own, of which it has at
         * most BLAS_CORE_MAX_THREADS (more OpenMP threads share them) */
        int bt = threads < BLAS_CORE_MAX_THREADS ? threads : BLAS_CORE_MAX_THREADS;
        m->blas_more = 2 * bt > have ? 2 * bt - have : 0;
    }
    m->threads = threads - 1 + 1 + CKPT_IO_THREADS - 1;
    m->stack = mem_thread_stack();
    int amax = mem_arena_max();
    m->arenas = m->threads < amax ? m->threads : amax;
    double ck = m->streaming ? m->stream : m->snapshot;
    m->as_need = m->as_mapped + m->host_base + ck + m->blas_more * (double)BLAS_CORE_BUFFER_BYTES +
                 m->threads * m->stack + m->arenas * MEM_ARENA_BYTES;
}

/* The sentence that says what lowers each part of a plan that does not fit. */
static const char *REMEDY_WORKSPACE =
    "set train.micro_batch (rows per forward/backward pass: the activations shrink, the batch "
    "stays), or lower train.batch or tandem.val_batch (rows) or train.seq (tokens each)";
static const char *REMEDY_PARAMS = "lower model.layers or model.channels (or the vocabulary)";

/* "1.25 GiB", "37.4 MiB", "512 KiB": a size as people read it. */
typedef struct size_text {
    char s[32];
} size_text;
static size_text sz(double b) {
    size_text t;
    if (b >= GIB) snprintf(t.s, sizeof t.s, "%.2f GiB", b / GIB);
    else if (b >= 1048576.0) snprintf(t.s, sizeof t.s, "%.1f MiB", b / 1048576.0);
    else snprintf(t.s, sizeof t.s, "%.0f KiB", b / 1024.0);
    return t;
}

/* 0, or ERR_USAGE when what the run maps (plan_address_space) exceeds the address-space
 * limit: the parts named, and what lowers the largest of them. */
static int plan_check_address_space(run_memplan *m, const config *cfg, tdm_err *e) {
    plan_address_space(m, cfg);
    if (m->as_limit <= 0 || m->as_need <= m->as_limit) return 0;
    double blas = m->blas_more * (double)BLAS_CORE_BUFFER_BYTES, stacks = m->threads * m->stack;
    double arenas = m->arenas * MEM_ARENA_BYTES;
    int threads = m->threads - CKPT_IO_THREADS + 1;
    char blas_part[160] = "";
    if (m->blas_more)
        snprintf(blas_part, sizeof blas_part, "%d more OpenBLAS buffers of 128 MiB (two per thread: "
                 "run.threads = %d), ", m->blas_more, threads);
    const char *remedy = stacks > blas && stacks > arenas
                             ? "lower the stack size (ulimit -s 8192: every thread's stack is that "
                               "large), or raise the limit (ulimit -v unlimited)"
                         : threads > 1 ? "raise the limit (ulimit -v unlimited), or lower run.threads"
                                       : "raise the limit (ulimit -v unlimited)";
    return err_set(e, ERR_USAGE, "the address-space limit (ulimit -v) is %s and this run would map "
                   "about %s: %s mapped already (libraries, OpenBLAS's first buffers), %s%d thread "
                   "stacks of %s (ulimit -s), %d malloc arenas of 64 MiB reserved, and %s of model "
                   "and checkpoint memory; past the limit OpenBLAS waits forever for a buffer and "
                   "threads cannot start: %s",
                   sz(m->as_limit).s, sz(m->as_need).s, sz(m->as_mapped).s, blas_part, m->threads,
                   sz(m->stack).s, m->arenas, sz(m->as_need - m->as_mapped - blas - stacks - arenas).s,
                   remedy);
}

int memplan_make(run_memplan *m, const config *cfg, const model_layout *lay, const model_ops *ops,
                 int rows, int seq, int n_domains, int ranks, double chunk_bytes,
                 double dev_free, double dev_total, tdm_err *e) {
    /* micro-batches (train.micro_batch): the workspace holds one pass's rows, and one more
     * buffer the pass's gradient (steps/steps.c) */
    int micro = cfg->train.micro_batch > 0 && cfg->train.micro_batch < rows;
    *m = (run_memplan){.params = lay->numel, .rows = micro ? cfg->train.micro_batch : rows,
                       .seq = seq, .buffers = MEMPLAN_TWIN_BUFFERS + micro};
    rows = m->rows;
    m->on_gpu = cfg->run.device == CONFIG_DEVICE_CUDA;
    double P4 = (double)lay->numel * sizeof(float);
    m->twins = m->buffers * P4;
    m->workspace = ops->workspace_bytes
                       ? ops->workspace_bytes(lay, rows, seq, n_domains, cfg->run.threads)
                       : 0;
    m->host_base = m->on_gpu ? 0 : m->twins + m->workspace;
    if (!m->on_gpu && ranks > 1) m->host_base += P4; /* the all-reduce's staging gradient */
    m->snapshot = 3 * P4;
    /* a chunk is never larger than a tensor */
    m->stream = CKPT_IO_THREADS * (chunk_bytes < P4 ? chunk_bytes : P4);
    m->host_avail = mem_available(&m->host_source);
    m->dev_free = dev_free;
    m->dev_total = dev_total;
    char what[256];
    snprintf(what, sizeof what, "%zu parameters (%d buffers: %s) and a workspace for %d x %d "
             "tokens (%s)", lay->numel, m->buffers, sz(m->twins).s, rows, seq, sz(m->workspace).s);
    const char *first = m->workspace > m->twins ? REMEDY_WORKSPACE : REMEDY_PARAMS;
    const char *second = m->workspace > m->twins ? REMEDY_PARAMS : REMEDY_WORKSPACE;
    if (m->on_gpu && dev_total > 0 && m->twins + m->workspace + GPU_RESERVE > dev_free)
        return err_set(e, ERR_USAGE, "the model does not fit on this GPU: %s need about %s, "
                       "and %s of its %s are free (%s kept for CUDA's own use): %s, or %s%s",
                       what, sz(m->twins + m->workspace).s, sz(dev_free).s, sz(dev_total).s,
                       sz(GPU_RESERVE).s, first, second,
                       cfg->run.precision == CONFIG_PRECISION_FP32
                           ? "; run.precision = bf16 halves the activations" : "");
    double avail = m->host_avail;
    int snap = cfg->checkpoint.snapshot;
    if (avail <= 0) { /* unknown: as asked, host when not said */
        m->streaming = snap == CONFIG_SNAPSHOT_STREAM;
        return plan_check_address_space(m, cfg, e);
    }
    if (m->host_base + m->stream > avail)
        return err_set(e, ERR_USAGE, "the model does not fit in this machine's memory: %s need "
                       "about %s, and %s are available (%s): %s, or %s", what,
                       sz(m->host_base + m->stream).s, sz(avail).s, m->host_source, first, second);
    if (snap == CONFIG_SNAPSHOT_HOST && m->host_base + m->snapshot > avail)
        return err_set(e, ERR_USAGE, "checkpoint.snapshot = host: the host copy of the state "
                       "(%s) and %s (%s on the host) need more than the %s available (%s): set "
                       "checkpoint.snapshot = stream (or auto), which commits chunk by chunk "
                       "without the copy", sz(m->snapshot).s, what, sz(m->host_base).s,
                       sz(avail).s, m->host_source);
    m->streaming = snap == CONFIG_SNAPSHOT_STREAM ||
                   (snap == CONFIG_SNAPSHOT_AUTO && m->host_base + m->snapshot > HOST_SHARE * avail);
    return plan_check_address_space(m, cfg, e);
}

void memplan_describe(const run_memplan *m, char *buf, size_t cap) {
    char model[160], avail[120] = "";
    snprintf(model, sizeof model, "%zu parameters x %d buffers %s, workspace %s", m->params,
             m->buffers, sz(m->twins).s, sz(m->workspace).s);
    double ck = m->streaming ? m->stream : m->snapshot;
    const char *ckname = m->streaming ? "checkpoint chunks" : "checkpoint copy";
    if (m->host_avail > 0)
        snprintf(avail, sizeof avail, " of %s available (%s)", sz(m->host_avail).s, m->host_source);
    const char *mode = m->streaming ? "commits stream chunk by chunk from the model's memory "
                                      "(no host copy; the loop waits for each commit)"
                                    : "commits copy the state to host memory and write it in "
                                      "the background";
    size_t len;
    if (m->on_gpu)
        len = (size_t)snprintf(buf, cap, "memory: GPU ~%s (%s) of %s free; host ~%s (%s %s)%s; %s",
                 sz(m->twins + m->workspace).s, model, sz(m->dev_free).s,
                 sz(m->host_base + ck).s, ckname, sz(ck).s, avail, mode);
    else
        len = (size_t)snprintf(buf, cap, "memory: ~%s (%s, %s %s)%s; %s", sz(m->host_base + ck).s,
                               model, ckname, sz(ck).s, avail, mode);
    if (m->as_limit > 0 && len < cap)
        snprintf(buf + len, cap - len, "; address space ~%s of the %s limit (ulimit -v: OpenBLAS's "
                 "buffers, %d thread stacks of %s, malloc arenas)", sz(m->as_need).s,
                 sz(m->as_limit).s, m->threads, sz(m->stack).s);
}
