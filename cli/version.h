/* version.h — `tandem --version` (also `tandem version`). */
#ifndef TANDEM_CLI_VERSION_H
#define TANDEM_CLI_VERSION_H

#define TANDEM_VERSION "0.1.0-dev"

/* Prints "tandem VERSION (git REV)" and what this build can run on (CPU with OpenBLAS
 * and OpenMP; MPI ranks; the CUDA backend plugin); --json as one object. */
int cmd_version(int argc, char **argv);

#endif
