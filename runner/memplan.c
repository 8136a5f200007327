/* memplan.c — the memory estimate of a run; see memplan.h. */
#include "runner/memplan.h"

#include "ledger/ckpt.h"
#include "util/meminfo.h"

#define GIB 1073741824.0
/* Room kept free on a GPU beyond the estimate: cuBLAS's and the CUDA runtime's own
 * allocations after the check, and the allocator's rounding. */
#define GPU_RESERVE (768.0 * 1048576.0)
/* auto streams once the host copy would leave less than this share of memory free: the
 * page cache of a file store and the rest of the process need some. */
#define HOST_SHARE 0.85

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
        return 0;
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
    return 0;
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
    if (m->on_gpu)
        snprintf(buf, cap, "memory: GPU ~%s (%s) of %s free; host ~%s (%s %s)%s; %s",
                 sz(m->twins + m->workspace).s, model, sz(m->dev_free).s,
                 sz(m->host_base + ck).s, ckname, sz(ck).s, avail, mode);
    else
        snprintf(buf, cap, "memory: ~%s (%s, %s %s)%s; %s", sz(m->host_base + ck).s, model, ckname,
                 sz(ck).s, avail, mode);
}
