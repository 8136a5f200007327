/* comm_nccl.cu — gradients summed across GPU ranks with NCCL (builds with nvcc and NCCL;
 * TANDEM_HAVE_NCCL). The host transport of the run (MPI or tcp) stays in charge of the
 * small collectives and carries NCCL's unique id from rank 0 to the others.
 *
 * The sum is the same reduce-scatter by hand as comm_mpi.c, on the device: grouped
 * ncclSend/ncclRecv give rank j every rank's segment j, a kernel adds them in rank order
 * (s = rank 0's + rank 1's + ... in float, no FMA: the bits of the CPU transports), and
 * grouped send/recv hand the summed segments back to everyone. ncclAllReduce is not
 * used: its order of additions belongs to NCCL's algorithm and topology.
 *
 * The device work is ordered by synchronising: the model's stream is drained before
 * (cudaDeviceSynchronize) and the NCCL stream after, so the caller sees a finished sum.
 *
 * NCCL's blocking calls have no deadline of their own: a watchdog thread ends the
 * process (exit 1, said on stderr) when one of them outlasts TANDEM_COMM_TIMEOUT_S,
 * which is what happens when another rank failed or died (a scheduler restarts the job;
 * a rank stuck in NCCL forever would hold its GPUs instead). */
#include <cuda_runtime.h>
#include <nccl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include "comm/comm_impl.h"
}

struct comm_nccl {
    ncclComm_t comm;
    cudaStream_t stream;
    float *tmp;       /* R x (segment) floats: every rank's copy of this rank's segment */
    size_t tmp_elems;
    int device;
};

static int cuda_fail(cudaError_t rc, const char *what, int line, tdm_err *e) {
    return err_set(e, ERR_INTERNAL, "%s failed: %s (%s:%d)", what, cudaGetErrorString(rc), __FILE__, line);
}
static int nccl_fail(ncclResult_t rc, const char *what, int line, tdm_err *e) {
    return err_set(e, ERR_INTERNAL, "NCCL %s failed: %s (%s:%d)", what, ncclGetErrorString(rc), __FILE__, line);
}
#define CUDA_OK(call, what)                                                                \
    do {                                                                                   \
        cudaError_t rc_ = (call);                                                          \
        if (rc_ != cudaSuccess) return cuda_fail(rc_, what, __LINE__, e);                  \
    } while (0)
#define NCCL_OK(call, what)                                                                \
    do {                                                                                   \
        ncclResult_t rc_ = (call);                                                         \
        if (rc_ != ncclSuccess) return nccl_fail(rc_, what, __LINE__, e);                  \
    } while (0)

/* ------------------------------------------------------------------ the watchdog */
static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv = PTHREAD_COND_INITIALIZER;
static int wd_started, wd_armed, wd_rank;
static double wd_timeout_s = 600;
static struct timespec wd_deadline;
static const char *wd_what;
static double wd_extra_s; /* the armed call's extra wait (comm_allow_wait) */

static void *wd_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&wd_mu);
    for (;;) {
        if (!wd_armed) {
            pthread_cond_wait(&wd_cv, &wd_mu);
            continue;
        }
        if (pthread_cond_timedwait(&wd_cv, &wd_mu, &wd_deadline) == ETIMEDOUT && wd_armed) {
            fprintf(stderr, "tandem: rank %d: NCCL %s did not finish within %.0f s "
                    "(TANDEM_COMM_TIMEOUT_S, and %.0f s its store may hold a rank): another rank failed or "
                    "hangs; exiting\n", wd_rank, wd_what, wd_timeout_s, wd_extra_s);
            _exit(1);
        }
    }
    return NULL;
}

/* Arms the watchdog for one NCCL call: TANDEM_COMM_TIMEOUT_S, and `extra_s` more where a
 * peer may be held that long on purpose (comm_allow_wait: rank 0's store waits). */
static void wd_arm(const char *what, double extra_s) {
    pthread_mutex_lock(&wd_mu);
    clock_gettime(CLOCK_REALTIME, &wd_deadline);
    double s = (double)wd_deadline.tv_sec + 1e-9 * (double)wd_deadline.tv_nsec + wd_timeout_s + extra_s;
    wd_deadline.tv_sec = (time_t)s;
    wd_deadline.tv_nsec = (long)((s - (double)(time_t)s) * 1e9);
    wd_what = what;
    wd_extra_s = extra_s;
    wd_armed = 1;
    pthread_cond_signal(&wd_cv);
    pthread_mutex_unlock(&wd_mu);
}

static void wd_disarm(void) {
    pthread_mutex_lock(&wd_mu);
    wd_armed = 0;
    pthread_cond_signal(&wd_cv);
    pthread_mutex_unlock(&wd_mu);
}

static int wd_start(int rank, tdm_err *e) {
    if (wd_started) return 0;
    const char *v = getenv("TANDEM_COMM_TIMEOUT_S");
    if (v) { /* strict, as comm_tcp.c: not "2m" (atof: 2 s), "abc" (passed over), "inf" or "0x10" */
        char *end = NULL;
        double x = strspn(v, "0123456789.eE+-") == strlen(v) ? strtod(v, &end) : 0;
        if (!end || end == v || *end || !(x > 0) || x > 1e7)
            return err_set(e, ERR_USAGE, "TANDEM_COMM_TIMEOUT_S = '%.60s' is not a number of seconds in "
                           "(0, 1e7]", v);
        wd_timeout_s = x;
    }
    wd_rank = rank;
    pthread_t t;
    if (pthread_create(&t, NULL, wd_main, NULL) != 0)
        return err_set(e, ERR_INTERNAL, "cannot start the NCCL watchdog thread");
    pthread_detach(t);
    wd_started = 1;
    return 0;
}

static size_t seg_lo(size_t n, int r, int R) {
    return (size_t)((unsigned __int128)n * (unsigned)r / (unsigned)R);
}

__global__ void sum_in_rank_order(const float *tmp, int R, size_t len, float *out) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < len;
         i += (size_t)gridDim.x * blockDim.x) {
        float s = tmp[i];
        for (int r = 1; r < R; r++) s = __fadd_rn(s, tmp[(size_t)r * len + i]);
        out[i] = s;
    }
}

/* The local steps (device, unique id) first, then an agreement over the host transport,
 * so that a rank whose GPU is missing does not leave the others in NCCL's init. */
static int prepare(comm *c, struct comm_nccl *n, ncclUniqueId *id, tdm_err *e) {
    int ndev = 0;
    CUDA_OK(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
    if (ndev < 1) return err_set(e, ERR_USAGE, "rank %d: no CUDA device for NCCL", c->info.rank);
    /* one GPU per rank of a node: the launcher's local rank picks it */
    n->device = c->info.local_rank % ndev;
    CUDA_OK(cudaSetDevice(n->device), "cudaSetDevice");
    CUDA_OK(cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (c->info.rank == 0) NCCL_OK(ncclGetUniqueId(id), "ncclGetUniqueId");
    return wd_start(c->info.rank, e);
}

extern "C" int comm_nccl_enable(comm *c, tdm_err *e) {
    if (c->nccl) return 0;
    struct comm_nccl *n = (struct comm_nccl *)calloc(1, sizeof *n);
    if (!n) return err_set(e, ERR_INTERNAL, "out of memory");
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    tdm_err le;
    memset(&le, 0, sizeof le);
    int local = prepare(c, n, &id, &le), bad = 0;
    int rc = comm_any(c, local != 0, &bad, e);
    if (!rc && local) *e = le, rc = local;
    if (!rc && bad) rc = err_set(e, ERR_INTERNAL, "another rank could not prepare its GPU for NCCL (its log says why)");
    if (!rc) rc = comm_bcast(c, &id, sizeof id, e);
    if (!rc) {
        wd_arm("initialisation (ncclCommInitRank)", c->extra_wait_s);
        ncclResult_t nr = ncclCommInitRank(&n->comm, c->info.world, id, c->info.rank);
        wd_disarm();
        if (nr != ncclSuccess) rc = nccl_fail(nr, "ncclCommInitRank", __LINE__, e);
    }
    if (rc) {
        if (n->stream) cudaStreamDestroy(n->stream);
        free(n);
        return rc;
    }
    c->nccl = n; /* only a working communicator counts as enabled */
    return 0;
}

static int all_reduce_steps(comm *c, struct comm_nccl *g, float *buf, size_t n, size_t my_lo,
                            size_t my_len, tdm_err *e);

extern "C" int comm_nccl_allreduce(comm *c, float *buf, size_t n, tdm_err *e) {
    struct comm_nccl *g = c->nccl;
    int R = c->info.world, me = c->info.rank;
    size_t my_lo = seg_lo(n, me, R), my_len = seg_lo(n, me + 1, R) - my_lo;
    if (g->tmp_elems < (size_t)R * my_len) {
        cudaFree(g->tmp);
        g->tmp = NULL;
        g->tmp_elems = 0;
        CUDA_OK(cudaMalloc((void **)&g->tmp, (size_t)R * my_len * sizeof(float) + 1), "cudaMalloc (all-reduce)");
        g->tmp_elems = (size_t)R * my_len;
    }
    CUDA_OK(cudaDeviceSynchronize(), "waiting for the gradient");
    wd_arm("all-reduce", c->extra_wait_s);
    int rc = all_reduce_steps(c, g, buf, n, my_lo, my_len, e);
    wd_disarm();
    return rc;
}

/* The three steps of comm_nccl_allreduce, enqueued and waited for. */
static int all_reduce_steps(comm *c, struct comm_nccl *g, float *buf, size_t n, size_t my_lo,
                            size_t my_len, tdm_err *e) {
    int R = c->info.world, me = c->info.rank;
    /* 1. rank j receives segment j of every rank */
    NCCL_OK(ncclGroupStart(), "group start");
    for (int j = 0; j < R; j++) {
        size_t lo = seg_lo(n, j, R), len = seg_lo(n, j + 1, R) - lo;
        if (j == me) {
            CUDA_OK(cudaMemcpyAsync(g->tmp + (size_t)me * my_len, buf + lo, len * sizeof(float),
                                    cudaMemcpyDeviceToDevice, g->stream), "copy of the own segment");
            continue;
        }
        NCCL_OK(ncclSend(buf + lo, len, ncclFloat, j, g->comm, g->stream), "send");
        NCCL_OK(ncclRecv(g->tmp + (size_t)j * my_len, my_len, ncclFloat, j, g->comm, g->stream), "recv");
    }
    NCCL_OK(ncclGroupEnd(), "group end");
    /* 2. the rank-order sum of this rank's segment, in place */
    if (my_len) {
        size_t blocks = (my_len + 255) / 256;
        sum_in_rank_order<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, g->stream>>>(
            g->tmp, R, my_len, buf + my_lo);
        CUDA_OK(cudaGetLastError(), "sum kernel");
    }
    /* 3. every rank gets every summed segment */
    NCCL_OK(ncclGroupStart(), "group start");
    for (int j = 0; j < R; j++) {
        if (j == me) continue;
        size_t lo = seg_lo(n, j, R), len = seg_lo(n, j + 1, R) - lo;
        NCCL_OK(ncclSend(buf + my_lo, my_len, ncclFloat, j, g->comm, g->stream), "send");
        NCCL_OK(ncclRecv(buf + lo, len, ncclFloat, j, g->comm, g->stream), "recv");
    }
    NCCL_OK(ncclGroupEnd(), "group end");
    CUDA_OK(cudaStreamSynchronize(g->stream), "waiting for the all-reduce");
    return 0;
}

extern "C" void comm_nccl_close(comm *c, int abort_it) {
    struct comm_nccl *g = c->nccl;
    if (!g) return;
    if (g->comm) {
        if (abort_it) ncclCommAbort(g->comm);
        else ncclCommDestroy(g->comm);
    }
    if (g->stream) cudaStreamDestroy(g->stream);
    cudaFree(g->tmp);
    free(g);
    c->nccl = NULL;
}
