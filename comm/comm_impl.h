/* comm_impl.h — what comm.c needs of its transports (comm_mpi.c, comm_tcp.c); not for
 * other modules. */
#ifndef TANDEM_COMM_IMPL_H
#define TANDEM_COMM_IMPL_H

#include "comm/comm.h"

struct comm {
    comm_info info;
    const char *backend; /* "none", "mpi" or "tcp" */
    void *impl;          /* the transport's own state */
    struct comm_nccl *nccl; /* GPU ranks: the device all-reduce (comm_nccl.cu) */
    int deferred;           /* tcp: the rendezvous is comm_connect's */
    double extra_wait_s;    /* comm_allow_wait's: the longer wait for a peer (tcp and the NCCL watchdog) */
};

/* comm_set_stop_flag's flag, or NULL. */
extern const volatile sig_atomic_t *comm_stop_flag;

/* comm_set_run_key's key; all zeros: none. */
extern unsigned char comm_run_key[32];

/* Whether this build has the MPI transport. */
int comm_mpi_available(void);
/* MPI_Init, and a check that MPI's rank and size agree with `c->info`. */
int comm_mpi_init(comm *c, tdm_err *e);
int comm_mpi_allreduce(comm *c, void *buf, size_t n, int is_double, tdm_err *e);
int comm_mpi_bcast(comm *c, void *buf, size_t bytes, tdm_err *e);
int comm_mpi_any(comm *c, int local, int *any, tdm_err *e);
int comm_mpi_barrier(comm *c, tdm_err *e);
void comm_mpi_abort(comm *c, int code);
void comm_mpi_finalize(comm *c);

/* The TCP star through rank 0 (TANDEM_COORDINATOR=host:port). */
int comm_tcp_init(comm *c, tdm_err *e);
int comm_tcp_allreduce(comm *c, void *buf, size_t n, int is_double, tdm_err *e);
int comm_tcp_bcast(comm *c, void *buf, size_t bytes, tdm_err *e);
int comm_tcp_any(comm *c, int local, int *any, tdm_err *e);
int comm_tcp_barrier(comm *c, tdm_err *e);
void comm_tcp_allow_wait(comm *c, double extra_s);
/* graceful: a barrier first (the normal end); else just drop the connections (abort). */
void comm_tcp_close(comm *c, int graceful);

/* comm_nccl.cu (builds with NCCL): see comm_enable_device in comm.h. */
int comm_nccl_enable(comm *c, tdm_err *e);
int comm_nccl_allreduce(comm *c, float *buf, size_t n, tdm_err *e);
void comm_nccl_close(comm *c, int abort_it);

#endif
