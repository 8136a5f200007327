/* memplan.h — the memory a run needs, estimated before anything is allocated.
 *
 * A run prints the estimate when it starts and checks it against what the machine has:
 * the GPU's free memory (cudaMemGetInfo) for the backend's buffers on run.device = cuda,
 * and the host's available memory (util/meminfo.h: MemAvailable, the cgroup's limit) for
 * the rest. What does not fit ends the run before it allocates, with ERR_USAGE naming the
 * settings that lower each part. It also decides checkpoint.snapshot = auto: the host copy
 * of the state when it fits, else streaming (ledger/ckpt.h, ckpt_open_stream). */
#ifndef TANDEM_RUNNER_MEMPLAN_H
#define TANDEM_RUNNER_MEMPLAN_H

#include <stdio.h>

#include "model/model.h"
#include "config/config.h"
#include "util/err.h"

/* Parameter-sized buffers of the twins on the backend: u, AdamW m and v, w, u', grad
 * (steps/steps.c step_nets_create). */
#define MEMPLAN_TWIN_BUFFERS 6

typedef struct run_memplan {
    size_t params;     /* parameters of one network */
    int rows, seq;     /* the workspace's batch: rows x seq tokens (a micro-batch's rows) */
    int buffers;       /* parameter-sized buffers on the backend: 6, 7 with micro-batches */
    int on_gpu;        /* the backend's buffers live on the GPU */
    double twins;      /* the `buffers` parameter-sized buffers, bytes */
    double workspace;  /* the backend's activations and scratch (model_ops.workspace_bytes) */
    double host_base;  /* host bytes besides the checkpoint's: on the CPU twins + workspace,
                        * and the all-reduce's staging gradient of a multi-rank CPU run */
    double snapshot;   /* the host copy of u, m, v that a background commit writes from */
    double stream;     /* streaming instead: one chunk per I/O thread (CKPT_IO_THREADS) */
    double host_avail; /* util/meminfo.h; 0 when unknown */
    const char *host_source;
    double dev_free, dev_total; /* the GPU's, when on_gpu */
    int streaming;     /* the commit mode the plan chose */
    /* under an address-space limit (ulimit -v): what the run maps besides its memory, each
     * mapping counted whether touched or not; as_limit 0 when there is none */
    double as_limit;   /* RLIMIT_AS */
    double as_mapped;  /* mapped when planning: libraries, OpenBLAS's load-time buffers */
    int blas_more;     /* OpenBLAS buffers still to come (model/blas_core.h: 2 per thread) */
    int threads;       /* threads the run starts: OpenMP's workers, the checkpoint writer, its I/O */
    double stack;      /* each one's stack (ulimit -s) */
    int arenas;        /* malloc arenas they may make */
    double as_need;    /* all of it with the host's part */
} run_memplan;

/* Builds the plan for a network of `lay` trained by `ops` with a workspace of rows x seq
 * tokens over n_domains losses on `ranks` ranks, checkpointing in chunks of chunk_bytes
 * as cfg->checkpoint.snapshot says. dev_free/dev_total: the GPU's (0 on the CPU). Returns
 * ERR_USAGE (nothing allocated) when the backend's buffers exceed the GPU's free memory or
 * the host's part exceeds the memory available, naming what to lower; also when
 * checkpoint.snapshot = host and the copy does not fit. Under an address-space limit
 * (RLIMIT_AS) the plan also counts what the run maps besides its memory — OpenBLAS's
 * buffers to come, its threads' stacks, their malloc arenas — on top of what is mapped
 * already (a part of it reserved, never touched, so not in MemAvailable's terms), and
 * refuses with ERR_USAGE naming the limit, the need and run.threads or ulimit -s: past it
 * OpenBLAS retried an mmap forever (ignoring SIGTERM) and thread creation failed. */
int memplan_make(run_memplan *m, const config *cfg, const model_layout *lay, const model_ops *ops,
                 int rows, int seq, int n_domains, int ranks, double chunk_bytes,
                 double dev_free, double dev_total, tdm_err *e);

/* One line: "memory: GPU ~X GiB (...) of Y GiB free; host ~Z GiB (...) of W GiB available
 * (SOURCE); checkpoints MODE". */
void memplan_describe(const run_memplan *m, char *buf, size_t cap);

#endif
