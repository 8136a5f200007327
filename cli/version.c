/* version.c — `tandem --version`; see version.h. The git revision comes from the build
 * (the Makefile passes TANDEM_GIT_REV to this file only, and rebuilds it when HEAD or the
 * working tree's cleanliness changes). */
#include "cli/version.h"

#include <omp.h>
#include <stdio.h>

#include "cli/opts.h"
#include "model/blas_core.h"
#include "util/json.h"

#ifndef TANDEM_GIT_REV
#define TANDEM_GIT_REV "unknown"
#endif
#ifdef TANDEM_HAVE_MPI
#define HAVE_MPI 1
#else
#define HAVE_MPI 0
#endif
#ifdef TANDEM_HAVE_CUDA
#define HAVE_CUDA 1
#else
#define HAVE_CUDA 0
#endif
/* the CUDA plugin of this build was linked with NCCL (the Makefile found it) */
#if defined(TANDEM_HAVE_CUDA) && defined(TANDEM_PLUGIN_NCCL)
#define HAVE_NCCL 1
#else
#define HAVE_NCCL 0
#endif

static const cli_opt OPTS[] = {
    {"--json", CLI_SWITCH, NULL, "the same as one JSON object", NULL, 0, 0, NULL, NULL},
    CLI_FORMAT_TABLE_JSON,
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"version", "", 0, 0, NULL,
                              "The version, git revision and what this build can run on (CPU threads, MPI,\n"
                              "CUDA, NCCL). Also: tandem --version [--json].",
                              OPTS, NULL};

static int run_version(const cli_args *a) {
    int json = cli_json(a);
    if (json) {
        printf("{\"version\": ");
        json_str(stdout, TANDEM_VERSION);
        printf(", \"git\": ");
        json_str(stdout, TANDEM_GIT_REV);
        printf(", \"cpu\": {\"blas\": \"openblas\", \"blas_core\": ");
        json_str(stdout, blas_core_name());
        printf(", \"threads\": %d}, \"mpi\": %s, \"cuda\": %s, \"nccl\": %s}\n",
               omp_get_max_threads(), HAVE_MPI ? "true" : "false", HAVE_CUDA ? "true" : "false",
               HAVE_NCCL ? "true" : "false");
        return 0;
    }
    printf("tandem %s (git %s)\n", TANDEM_VERSION, TANDEM_GIT_REV);
    printf("  cpu:  OpenBLAS (%s kernels) + OpenMP, %d threads here\n", blas_core_name(),
           omp_get_max_threads());
    printf("  mpi:  %s\n", HAVE_MPI ? "yes (Open MPI ranks)" : "no (ranks over TCP only)");
    printf("  cuda: %s\n", HAVE_CUDA ? "yes (the plugin tandem-cuda.so, loaded for run.device=cuda)"
                                     : "no (built without nvcc)");
    printf("  nccl: %s\n", HAVE_NCCL ? "yes (inside the CUDA plugin: GPU ranks all-reduce over NCCL)"
                            : HAVE_CUDA ? "no (the plugin was built without NCCL: GPU ranks use MPI or TCP)"
                                        : "no (no CUDA plugin)");
    return 0;
}

/* argv[0] is "version" or, from `tandem --version`, "--version": the parser skips it */
int cmd_version(int argc, char **argv) { return cli_run(&SPEC, run_version, argc, argv); }
