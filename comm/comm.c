/* comm.c — rank detection and the backend dispatch of comm.h; the one-rank backend. */
#include "comm/comm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "gpu/plugin.h"

const volatile sig_atomic_t *comm_stop_flag;

void comm_set_stop_flag(const volatile sig_atomic_t *flag) { comm_stop_flag = flag; }

unsigned char comm_run_key[32];

void comm_set_run_key(const unsigned char key[32]) {
    if (key) memcpy(comm_run_key, key, sizeof comm_run_key);
    else memset(comm_run_key, 0, sizeof comm_run_key);
}

/* A non-negative decimal int from variable `name`; -1 when unset, ERR_USAGE when bad. */
static int env_int(const char *name, int *out, tdm_err *e) {
    const char *v = getenv(name);
    *out = -1;
    if (!v) return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < 0 || x > 1 << 20)
        return err_set(e, ERR_USAGE, "environment variable %s = '%s' is not a rank or size", name, v);
    *out = (int)x;
    return 0;
}

int comm_detect(comm_info *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    out->world = 1;
    snprintf(out->source, sizeof out->source, "single");
    int rank, world, local, rc;
    /* mpirun (Open MPI) */
    if ((rc = env_int("OMPI_COMM_WORLD_SIZE", &world, e))) return rc;
    if (world >= 1) {
        if ((rc = env_int("OMPI_COMM_WORLD_RANK", &rank, e)) ||
            (rc = env_int("OMPI_COMM_WORLD_LOCAL_RANK", &local, e)))
            return rc;
        snprintf(out->source, sizeof out->source, "mpirun");
        goto check;
    }
    /* srun with a PMI plugin (srun --mpi=pmix): one task per rank of the job step */
    if ((rc = env_int("SLURM_STEP_NUM_TASKS", &world, e))) return rc;
    if (world > 1) {
        if ((rc = env_int("SLURM_PROCID", &rank, e)) || (rc = env_int("SLURM_LOCALID", &local, e)))
            return rc;
        snprintf(out->source, sizeof out->source, "slurm");
        goto check;
    }
    /* a Kubernetes Indexed Job: the pod's index, the configured number of pods */
    if ((rc = env_int("TANDEM_WORLD_SIZE", &world, e))) return rc;
    if (world > 1) {
        if ((rc = env_int("TANDEM_RANK", &rank, e))) return rc;
        if (rank < 0 && (rc = env_int("JOB_COMPLETION_INDEX", &rank, e))) return rc;
        if (rank < 0)
            return err_set(e, ERR_USAGE, "TANDEM_WORLD_SIZE = %d but neither TANDEM_RANK nor "
                           "JOB_COMPLETION_INDEX is set: an Indexed Job sets the latter for each "
                           "pod", world);
        local = 0;
        snprintf(out->source, sizeof out->source, "kubernetes");
        goto check;
    }
    if (world >= 0) { /* TANDEM_WORLD_SIZE = 0 or 1: an index past it is a misrendered Job,
                       * not a lone writer (which would run silently beside the others) */
        int idx = -1;
        const char *from = "TANDEM_RANK";
        if ((rc = env_int(from, &idx, e))) return rc;
        if (idx < 0 && (rc = env_int(from = "JOB_COMPLETION_INDEX", &idx, e))) return rc;
        if (world == 0)
            return err_set(e, ERR_USAGE, "TANDEM_WORLD_SIZE = 0: a run needs at least one rank (set it "
                           "to the Job's completions, or unset it for one rank)");
        if (idx >= world)
            return err_set(e, ERR_USAGE, "%s = %d but TANDEM_WORLD_SIZE = %d: the index must be below "
                           "the world size (set TANDEM_WORLD_SIZE to the Job's completions)", from, idx, world);
    }
    return 0;
check:
    if (world < 1 || rank < 0 || rank >= world)
        return err_set(e, ERR_USAGE, "rank %d of world size %d from the %s environment is "
                       "inconsistent", rank, world, out->source);
    out->rank = rank;
    out->world = world;
    out->local_rank = local < 0 ? 0 : local;
    return 0;
}

comm *comm_open(tdm_err *e) {
    comm *c = comm_open_deferred(e);
    if (c && comm_connect(c, e)) {
        free(c);
        return NULL;
    }
    return c;
}

int comm_connect(comm *c, tdm_err *e) {
    if (!c || !c->deferred) return 0;
    c->deferred = 0;
    if (comm_tcp_init(c, e)) {
        comm_tcp_close(c, 0);
        return e->code;
    }
    return 0;
}

comm *comm_open_deferred(tdm_err *e) {
    comm *c = calloc(1, sizeof *c);
    if (!c) {
        err_set(e, ERR_INTERNAL, "out of memory");
        return NULL;
    }
    if (comm_detect(&c->info, e)) goto fail;
    c->backend = "none";
    if (c->info.world == 1) return c;
    /* the transport: TANDEM_TRANSPORT=mpi|tcp, else MPI where a launcher that speaks it
     * started us (mpirun, srun --mpi=pmix) and tcp for Kubernetes pods */
    const char *want = getenv("TANDEM_TRANSPORT");
    if (want && strcmp(want, "mpi") && strcmp(want, "tcp")) {
        err_set(e, ERR_USAGE, "TANDEM_TRANSPORT = '%s': expected mpi or tcp", want);
        goto fail;
    }
    int use_tcp = want ? strcmp(want, "tcp") == 0 : strcmp(c->info.source, "kubernetes") == 0;
    if (use_tcp) {
        c->backend = "tcp";
        c->deferred = 1; /* the rendezvous: comm_connect */
        return c;
    }
    if (!comm_mpi_available()) {
        err_set(e, ERR_USAGE,
                "%d ranks (from the %s environment) but this tandem was built without MPI: "
                "install libopenmpi-dev and rebuild, or use the tcp transport "
                "(TANDEM_TRANSPORT=tcp with TANDEM_COORDINATOR=host:port; docs/distributed.md)",
                c->info.world, c->info.source);
        goto fail;
    }
    c->backend = "mpi";
    if (comm_mpi_init(c, e)) goto fail;
    return c;
fail:
    free(c);
    return NULL;
}

int comm_rank(const comm *c) { return c ? c->info.rank : 0; }
int comm_world(const comm *c) { return c ? c->info.world : 1; }
int comm_local_rank(const comm *c) { return c ? c->info.local_rank : 0; }
const char *comm_backend(const comm *c) { return c ? c->backend : "none"; }
const char *comm_source(const comm *c) { return c ? c->info.source : "single"; }

static int multi(const comm *c) { return c && c->info.world > 1; }
static int is_tcp(const comm *c) { return c->backend[0] == 't'; }

int comm_allreduce_f32(comm *c, float *buf, size_t n, tdm_err *e) {
    if (!multi(c)) return 0;
    return is_tcp(c) ? comm_tcp_allreduce(c, buf, n, 0, e) : comm_mpi_allreduce(c, buf, n, 0, e);
}

int comm_allreduce_f64(comm *c, double *buf, size_t n, tdm_err *e) {
    if (!multi(c)) return 0;
    return is_tcp(c) ? comm_tcp_allreduce(c, buf, n, 1, e) : comm_mpi_allreduce(c, buf, n, 1, e);
}

int comm_bcast(comm *c, void *buf, size_t bytes, tdm_err *e) {
    if (!multi(c)) return 0;
    return is_tcp(c) ? comm_tcp_bcast(c, buf, bytes, e) : comm_mpi_bcast(c, buf, bytes, e);
}

int comm_any(comm *c, int local, int *any, tdm_err *e) {
    if (multi(c)) return is_tcp(c) ? comm_tcp_any(c, local, any, e) : comm_mpi_any(c, local, any, e);
    *any = local != 0;
    return 0;
}

void comm_allow_wait(comm *c, double extra_s) {
    if (!c) return;
    c->extra_wait_s = extra_s > 0 ? extra_s : 0;
    if (is_tcp(c) && c->impl) comm_tcp_allow_wait(c, c->extra_wait_s);
}

int comm_barrier(comm *c, tdm_err *e) {
    if (!multi(c)) return 0;
    return is_tcp(c) ? comm_tcp_barrier(c, e) : comm_mpi_barrier(c, e);
}

int comm_enable_device(comm *c, tdm_err *e) {
    /* TANDEM_NCCL_ONE_RANK=1 sends even one rank's gradients through NCCL: the check on
     * a one-GPU machine that the device path changes no bit (tests/gpu_nccl.sh) */
    const char *one = getenv("TANDEM_NCCL_ONE_RANK");
    if (!c || (!multi(c) && !(one && strcmp(one, "1") == 0))) return 0;
    const gpu_plugin *gpu = gpu_plugin_load(e);
    if (!gpu) return e->code;
    if (!gpu->nccl_enable)
        return err_set(e, ERR_USAGE, "run.device = cuda with %d ranks needs NCCL, and this tandem "
                       "was built without it (nccl.h was not found beside nvcc; docs/distributed.md)",
                       c->info.world);
    return gpu->nccl_enable(c, e);
}

int comm_has_device(const comm *c) { return c && c->nccl != NULL; }

int comm_allreduce_device_f32(comm *c, float *dev, size_t n, tdm_err *e) {
    if (!multi(c) && !c->nccl) return 0;
    if (c->nccl) {
        tdm_err le = {0};
        const gpu_plugin *gpu = gpu_plugin_load(&le); /* loaded: c->nccl came from it */
        if (gpu && gpu->nccl_allreduce) return gpu->nccl_allreduce(c, dev, n, e);
    }
    (void)dev, (void)n;
    return err_set(e, ERR_INTERNAL, "device all-reduce without comm_enable_device");
}

void comm_abort(comm *c, int code) {
    if (!multi(c)) return;
    /* the host transport first: NCCL's own abort may wait for the other ranks, and the
     * process's exit frees NCCL anyway */
    if (is_tcp(c)) comm_tcp_close(c, 0); /* the others see the connection drop and end */
    else comm_mpi_abort(c, code);
}

int comm_close(comm *c) {
    if (!c) return 0;
    int rc = 0;
    /* comm_abort dropped the connections, or they were never made (comm_connect) */
    int aborted = multi(c) && is_tcp(c) && !c->impl;
    if (multi(c) && !aborted) {
        /* nobody leaves while another still needs it; NCCL is torn down only after all
         * ranks got here (its destroy is collective in effect) */
        tdm_err ignore;
        rc = is_tcp(c) ? comm_tcp_barrier(c, &ignore) : comm_mpi_barrier(c, &ignore);
    }
    if (!rc && c->nccl) {
        tdm_err le = {0};
        const gpu_plugin *gpu = gpu_plugin_load(&le);
        if (gpu && gpu->nccl_close) gpu->nccl_close(c, 0);
    }
    if (multi(c) && is_tcp(c)) comm_tcp_close(c, 0);
    else if (multi(c)) comm_mpi_finalize(c);
    free(c);
    return aborted ? 0 : rc;
}
