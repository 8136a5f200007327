/* blas_core.h — the OpenBLAS kernel set this CPU should use (see blas_core.c). */
#ifndef TANDEM_MODEL_BLAS_CORE_H
#define TANDEM_MODEL_BLAS_CORE_H

#include <signal.h>
#include <stddef.h>

#include "util/err.h"

/* The OpenBLAS core type to force on this CPU, or NULL when OpenBLAS's own choice stands:
 * OPENBLAS_CORETYPE is already set, or OpenBLAS recognised the CPU (its choice is not the
 * Prescott fallback), or the CPU has neither AVX-512 nor AVX2 with FMA. */
const char *blas_core_better(void);

/* Called first thing in main(): when blas_core_better() names a core, sets
 * OPENBLAS_CORETYPE to it and re-executes this program with the same arguments (OpenBLAS
 * reads the variable once, when the library loads, before main). Returns only when there
 * is nothing to do or the re-exec failed (then the run goes on with OpenBLAS's choice).
 * The stop signals (util/stop_signals.h) are blocked across the exec, so that a stop signal sent
 * then waits (pending) for the new image's handler: a run's "exit 75 from the first
 * millisecond" holds through the re-exec. */
void blas_core_reexec(char **argv);

/* In the new image, once the stop handlers are installed (or at once for a command that
 * does not catch them): unblocks the signals blas_core_reexec blocked, and only those. */
void blas_core_reexec_unblock(void);

/* The core OpenBLAS runs with in this process ("SkylakeX", "Prescott", ...). */
const char *blas_core_name(void);

/* Whether this CPU runs OpenBLAS's kernels `core`: 1 yes; 0 no, with what it lacks in
 * `lacks` ("AVX-512"); -1 when the name is not one this build can judge (a core of
 * another architecture, or a name OpenBLAS 0.3 does not give). */
int blas_core_runs_here(const char *core, char *lacks, size_t n);

/* What blas_core_pin may do where OpenBLAS runs other kernels than a run's. */
enum {
    BLAS_PIN_RUN,  /* a run: start again with them, refused where that cannot be */
    BLAS_PIN_MPI,  /* an MPI rank (MPI_Init came first): refused */
    BLAS_PIN_EVAL, /* tandem eval: start again with them where possible, else the kernels in use */
    BLAS_PIN_NOTE  /* an evaluation among others (compare, results): the kernels in use */
};

/* Run pinned kernels: `want` is a run's run.blas_kernels ("auto": nothing to do). When
 * OpenBLAS runs other kernels in this process, executes this program again (argv as
 * main() had it) with OPENBLAS_CORETYPE=want, the stop signals held as by
 * blas_core_reexec — unless *stop_flag (the run's stop flag, read once they are held)
 * says a stop came first (ERR_INTERNAL: the caller's requeue); returns only when it did
 * not exec. Once per command: a second run pinned to other kernels in the same process
 * is refused. ERR_USAGE naming run.blas_kernels where this CPU lacks what they need (a
 * run), where OpenBLAS did not take them after the exec, or for an MPI rank; kernels
 * this build cannot judge (another architecture) and evaluations that cannot exec go on
 * with the kernels in use, said once on stderr. */
int blas_core_pin(const char *want, int mode, volatile sig_atomic_t *stop_flag, tdm_err *e);

/* The address space OpenBLAS takes (Debian bookworm's 0.3.21, OpenMP build, measured under
 * strace): one buffer of BLAS_CORE_BUFFER_BYTES (its x86-64 BUFFER_SIZE, 32 << 22, mmap'ed
 * whole and never given back before exit) per thread of its pool, allocated when the
 * library loads, before main(), for blas_core_load_buffers(envp) threads; then, after
 * openblas_set_num_threads(T), T thread buffers plus one for each thread that calls sgemm
 * at the same time (attention calls it inside OpenMP regions: T of them), 2T in all. Where
 * an mmap of one fails OpenBLAS retries it forever, ignoring SIGTERM: runner/memplan.c
 * counts them against an address-space limit, blas_core_preinit the ones of the load. */
#define BLAS_CORE_BUFFER_BYTES (128ULL << 20)
#define BLAS_CORE_MAX_THREADS 64 /* the build's MAX_THREADS (openblas_get_config()) */

/* The threads OpenBLAS works with now (openblas_get_num_threads): before a model sets them,
 * the buffers its load mapped; after, fewer than its pool holds (2 per thread). */
int blas_core_threads(void);

/* How many buffers OpenBLAS maps when it loads in a process started with `envp`: the
 * machine's configured CPUs (get_nprocs_conf, as its constructor counts them; not the
 * affinity mask), fewer when OMP_NUM_THREADS says fewer, at most BLAS_CORE_MAX_THREADS. */
int blas_core_load_buffers(char **envp);

/* For tandem's .preinit_array (cli/main.c): runs before any shared library's constructor,
 * OpenBLAS's included. Under an address-space limit (RLIMIT_AS) too low for the buffers
 * OpenBLAS maps when it loads, whose mmap it would retry forever (every command, even
 * `tandem version`, hung before main), writes what the limit is, what is needed and what
 * to do on stderr and exits 2. Returns at once without a limit. Uses system calls and
 * string functions only: libc's and the libraries' constructors have not run. */
void blas_core_preinit(int argc, char **argv, char **envp);

#endif
