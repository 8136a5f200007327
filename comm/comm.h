/* comm.h — collectives across the ranks of a data-parallel run.
 *
 * Every rank of a run executes the same episode schedule on the same global batch; each
 * computes the forward and backward of its share of the batch rows, and the collectives
 * here combine the shares. Backends: "none" (one rank: every collective is the identity),
 * "mpi" (Open MPI, CPU buffers; builds where pkg-config finds ompi-c) and "tcp" (a star
 * through rank 0 at TANDEM_COORDINATOR=host:port; every build). TANDEM_TRANSPORT=mpi|tcp
 * chooses; by default MPI under mpirun and srun, tcp for Kubernetes pods.
 *
 * Determinism: comm_allreduce_* sums the ranks' contributions in rank order (0, 1, ..,
 * R-1) for every element, whatever the transport does underneath, so every rank gets
 * the same bits, and a rerun with the same world size gets the same bits again.
 *
 * Rank and world size come from the launcher's environment (comm_detect): mpirun
 * (OMPI_COMM_WORLD_*), a PMI launch such as `srun --mpi=pmix` (PMIX_RANK with
 * SLURM_STEP_NUM_TASKS), or a Kubernetes Indexed Job (TANDEM_RANK or JOB_COMPLETION_INDEX
 * with TANDEM_WORLD_SIZE). No launcher variables: one rank.
 */
#ifndef TANDEM_COMM_H
#define TANDEM_COMM_H

#include <signal.h>
#include <stddef.h>

#include "util/err.h"

typedef struct comm comm;

typedef struct comm_info {
    int rank, world, local_rank;
    char source[48]; /* "single", "mpirun", "slurm+pmi", "kubernetes", ... */
} comm_info;

/* Reads rank, world size and local rank from the environment. ERR_USAGE naming the
 * variables when they are inconsistent (rank outside [0, world), non-numbers). */
int comm_detect(comm_info *out, tdm_err *e);

/* The flag a stop signal sets (the runner's: comm/ does not know the runner). While the
 * ranks wait for each other at the start (comm_open over tcp), a nonzero value ends the
 * wait at once, as an error that says so; collectives are never cut short by it. NULL:
 * none. Over MPI, MPI_Init's own wait is the launcher's. */
void comm_set_stop_flag(const volatile sig_atomic_t *flag);

/* What tells this run from another one that was given the same TANDEM_COORDINATOR
 * (a digest the caller makes of its store): sent in the tcp hello, and rank 0 turns away
 * a rank whose key differs (the rank fails, exit 2, naming the port) and goes on waiting
 * for its own. NULL (a rank whose set-up failed): none, accepted by any rank 0. */
void comm_set_run_key(const unsigned char key[32]);

/* Opens the collective layer for the detected ranks: "none" for one rank, else the
 * transport (connecting all ranks; tcp waits up to TANDEM_COMM_TIMEOUT_S for them).
 * ERR_USAGE when several ranks are detected but the transport is missing or
 * misconfigured (says what to install or set). Returns NULL with e set on failure. */
comm *comm_open(tdm_err *e);

/* comm_open in two: MPI_Init (mpi) at once, the tcp rendezvous in comm_connect, so that
 * a rank can set up between them (and its hello carry its run key). A rank killed before
 * MPI_Init has left Open MPI 4.1's mpirun hanging, so that is not deferred. After a failed
 * comm_connect, only comm_close(c) (no barrier, frees c). */
comm *comm_open_deferred(tdm_err *e);
int comm_connect(comm *c, tdm_err *e);

int comm_rank(const comm *c);
int comm_world(const comm *c);
int comm_local_rank(const comm *c);
const char *comm_backend(const comm *c);
const char *comm_source(const comm *c);

/* buf[i] = sum over ranks of buf[i] on that rank, added in rank order; every rank gets
 * the same result. */
int comm_allreduce_f32(comm *c, float *buf, size_t n, tdm_err *e);
int comm_allreduce_f64(comm *c, double *buf, size_t n, tdm_err *e);

/* Copies `bytes` bytes of rank 0's buf to every other rank's buf. */
int comm_bcast(comm *c, void *buf, size_t bytes, tdm_err *e);

/* *any = 1 on every rank when `local` is nonzero on at least one rank: how ranks agree
 * to stop at the same safe point when a signal reached only some of them. */
int comm_any(comm *c, int local, int *any, tdm_err *e);

int comm_barrier(comm *c, tdm_err *e);

/* Lets every later collective wait `extra_s` seconds longer for a peer than
 * TANDEM_COMM_TIMEOUT_S (tcp, and the NCCL watchdog; MPI's collectives have no time
 * limit): a rank may be held
 * that long by its store on purpose — rank 0 waits out a late S3 DELETE before a write of
 * that key and before its run ends (store_settle_window_s: 60 s + 2 x TANDEM_S3_TIMEOUT),
 * which with a long TANDEM_S3_TIMEOUT outlasted the others' 600 s and failed a finished
 * run. The latest call counts (0: the plain timeout). */
void comm_allow_wait(comm *c, double extra_s);

/* GPU ranks: moves the gradient all-reduce onto NCCL (device buffers, the same rank-order
 * sum on the device), selects this rank's GPU (its local rank modulo the devices) and
 * sends NCCL's unique id over the host transport. Collective; call before the CUDA
 * workspace is created. ERR_USAGE in a build without NCCL. One rank: nothing to do. */
int comm_enable_device(comm *c, tdm_err *e);

/* Whether comm_enable_device succeeded (device buffers go to comm_allreduce_device_f32). */
int comm_has_device(const comm *c);

/* comm_allreduce_f32 on a device buffer; returns when the sum is complete. */
int comm_allreduce_device_f32(comm *c, float *dev, size_t n, tdm_err *e);

/* Ends the whole job at once with exit status `code` (a rank that failed while the
 * others wait in a collective); returns only for one rank. */
void comm_abort(comm *c, int code);

/* Collective: every rank calls it at the end; a barrier, then the transport is shut.
 * Non-zero when the barrier failed: another rank went away instead of finishing. */
int comm_close(comm *c);

#endif
