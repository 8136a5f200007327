/* comm_mpi.c — the MPI transport of comm.h (Open MPI; host buffers).
 *
 * The all-reduce is a reduce-scatter by hand (MPI_Alltoallv: rank j receives segment j of
 * every rank's buffer, adds the R copies in rank order) followed by MPI_Allgatherv of
 * the summed segments: MPI_Allreduce leaves the order of the additions to the library,
 * this fixes it. Large buffers go in pieces so that MPI's int counts never overflow.
 * Built only where TANDEM_HAVE_MPI is defined (the rel build with ompi-c present). */
#include "comm/comm_impl.h"

#ifdef TANDEM_HAVE_MPI
#include <mpi.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int comm_mpi_available(void) { return 1; }

/* MPI's message for `code`, into e with the operation's name. */
static int mpi_fail(int code, const char *what, tdm_err *e) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", code);
    return err_set(e, ERR_INTERNAL, "MPI %s failed: %s", what, msg);
}

int comm_mpi_init(comm *c, tdm_err *e) {
    int provided = 0, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "init", e);
    /* errors come back as codes, so a failed collective is reported, not just fatal */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != c->info.rank || size != c->info.world) {
        fprintf(stderr, "tandem: MPI says rank %d of %d but the %s environment says %d of %d\n",
                rank, size, c->info.source, c->info.rank, c->info.world);
        MPI_Abort(MPI_COMM_WORLD, ERR_USAGE); /* the others may already wait for us */
    }
    return 0;
}

/* Segment r of n elements over R ranks: [n r / R, n (r+1) / R). */
static size_t seg_lo(size_t n, int r, int R) { return (size_t)((unsigned __int128)n * (unsigned)r / (unsigned)R); }

int comm_mpi_allreduce(comm *c, void *buf, size_t n, int is_double, tdm_err *e) {
    int R = c->info.world, me = c->info.rank;
    size_t es = is_double ? sizeof(double) : sizeof(float);
    /* pieces of at most 2^27 elements: every byte count below stays under INT_MAX */
    const size_t piece = (size_t)1 << 27;
    size_t seg_max = (n < piece ? n : piece) / (size_t)R + 1; /* a few losses: a few bytes */
    char *tmp = malloc(seg_max * (size_t)R * es);
    int *scount = malloc(4 * (size_t)R * sizeof *scount);
    if (!tmp || !scount) {
        free(tmp);
        free(scount);
        return err_set(e, ERR_INTERNAL, "out of memory for the all-reduce");
    }
    int *sdisp = scount + R, *rcount = sdisp + R, *rdisp = rcount + R;
    int rc = 0;
    for (size_t off = 0; off < n && !rc; off += piece) {
        size_t len = n - off < piece ? n - off : piece;
        char *p = (char *)buf + off * es;
        size_t my_lo = seg_lo(len, me, R), my_len = seg_lo(len, me + 1, R) - my_lo;
        for (int j = 0; j < R; j++) {
            size_t lo = seg_lo(len, j, R), hi = seg_lo(len, j + 1, R);
            scount[j] = (int)((hi - lo) * es);
            sdisp[j] = (int)(lo * es);
            rcount[j] = (int)(my_len * es);
            rdisp[j] = (int)((size_t)j * my_len * es);
        }
        int mrc = MPI_Alltoallv(p, scount, sdisp, MPI_BYTE, tmp, rcount, rdisp, MPI_BYTE, MPI_COMM_WORLD);
        if (mrc != MPI_SUCCESS) {
            rc = mpi_fail(mrc, "all-to-all (all-reduce)", e);
            break;
        }
        /* rank 0's value, then + rank 1's, ... : the fixed order */
        if (is_double) {
            double *t = (double *)tmp, *o = (double *)p + my_lo;
            for (size_t i = 0; i < my_len; i++) {
                double s = t[i];
                for (int j = 1; j < R; j++) s += t[(size_t)j * my_len + i];
                o[i] = s;
            }
        } else {
            float *t = (float *)tmp, *o = (float *)p + my_lo;
            for (size_t i = 0; i < my_len; i++) {
                float s = t[i];
                for (int j = 1; j < R; j++) s += t[(size_t)j * my_len + i];
                o[i] = s;
            }
        }
        for (int j = 0; j < R; j++) {
            size_t lo = seg_lo(len, j, R), hi = seg_lo(len, j + 1, R);
            rcount[j] = (int)((hi - lo) * es);
            rdisp[j] = (int)(lo * es);
        }
        mrc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p, rcount, rdisp, MPI_BYTE,
                             MPI_COMM_WORLD);
        if (mrc != MPI_SUCCESS) rc = mpi_fail(mrc, "all-gather (all-reduce)", e);
    }
    free(tmp);
    free(scount);
    return rc;
}

int comm_mpi_bcast(comm *c, void *buf, size_t bytes, tdm_err *e) {
    (void)c;
    const size_t piece = (size_t)1 << 30;
    for (size_t off = 0; off < bytes; off += piece) {
        size_t len = bytes - off < piece ? bytes - off : piece;
        int rc = MPI_Bcast((char *)buf + off, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "broadcast", e);
    }
    return 0;
}

int comm_mpi_any(comm *c, int local, int *any, tdm_err *e) {
    (void)c;
    int in = local != 0, out = 0;
    int rc = MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "stop-flag agreement", e);
    *any = out;
    return 0;
}

int comm_mpi_barrier(comm *c, tdm_err *e) {
    (void)c;
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "barrier", e);
}

void comm_mpi_abort(comm *c, int code) {
    (void)c;
    MPI_Abort(MPI_COMM_WORLD, code);
}

void comm_mpi_finalize(comm *c) {
    (void)c;
    MPI_Finalize();
}

#else /* no MPI in this build: comm.c never calls these with world > 1 */

int comm_mpi_available(void) { return 0; }
int comm_mpi_init(comm *c, tdm_err *e) {
    (void)c;
    return err_set(e, ERR_USAGE, "this build has no MPI");
}
int comm_mpi_allreduce(comm *c, void *buf, size_t n, int is_double, tdm_err *e) {
    (void)c, (void)buf, (void)n, (void)is_double;
    return err_set(e, ERR_INTERNAL, "no MPI in this build");
}
int comm_mpi_bcast(comm *c, void *buf, size_t bytes, tdm_err *e) {
    (void)c, (void)buf, (void)bytes;
    return err_set(e, ERR_INTERNAL, "no MPI in this build");
}
int comm_mpi_any(comm *c, int local, int *any, tdm_err *e) {
    (void)c, (void)local, (void)any;
    return err_set(e, ERR_INTERNAL, "no MPI in this build");
}
int comm_mpi_barrier(comm *c, tdm_err *e) {
    (void)c;
    return err_set(e, ERR_INTERNAL, "no MPI in this build");
}
void comm_mpi_abort(comm *c, int code) { (void)c, (void)code; }
void comm_mpi_finalize(comm *c) { (void)c; }

#endif
