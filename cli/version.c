/* version.c — `tandem --version`; see version.h. The git revision comes from the build
 * (the Makefile passes TANDEM_GIT_REV to this file only, and rebuilds it when HEAD or the
 * working tree's cleanliness changes). */
#include "cli/version.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

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

int cmd_version(int argc, char **argv) {
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--help")) {
            printf("usage: tandem --version [--json]   (also: tandem version)\n");
            return 0;
        } else {
            fprintf(stderr, "tandem version: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (json) {
        printf("{\"version\": ");
        json_str(stdout, TANDEM_VERSION);
        printf(", \"git\": ");
        json_str(stdout, TANDEM_GIT_REV);
        printf(", \"cpu\": {\"blas\": \"openblas\", \"threads\": %d}, \"mpi\": %s, \"cuda\": %s}\n",
               omp_get_max_threads(), HAVE_MPI ? "true" : "false", HAVE_CUDA ? "true" : "false");
        return 0;
    }
    printf("tandem %s (git %s)\n", TANDEM_VERSION, TANDEM_GIT_REV);
    printf("  cpu:  OpenBLAS + OpenMP, %d threads here\n", omp_get_max_threads());
    printf("  mpi:  %s\n", HAVE_MPI ? "yes (Open MPI ranks)" : "no (ranks over TCP only)");
    printf("  cuda: %s\n", HAVE_CUDA ? "yes (the plugin tandem-cuda.so, loaded for run.device=cuda; "
                                       "NCCL inside it)"
                                     : "no (built without nvcc)");
    return 0;
}
