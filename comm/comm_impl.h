/* comm_impl.h — what comm.c needs of a transport (comm_mpi.c); not for other modules. */
#ifndef TANDEM_COMM_IMPL_H
#define TANDEM_COMM_IMPL_H

#include "comm/comm.h"

struct comm {
    comm_info info;
    const char *backend; /* "none" or "mpi" */
};

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

#endif
