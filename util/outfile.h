/* outfile.h — a file a command writes for the user (--plot, --svg, --out, manifest --out):
 * whole or not at all.
 *
 * It is written beside its path as PATH.tmp.PID.N (the name fileio_sweep_dead_temporaries
 * knows) and renamed over PATH only once every byte was written and the file closed without
 * error. A full disk, a failed write or a signal leaves the file that was there before (if
 * any) as it was, never a cut one under the final name; a symbolic link at PATH is
 * replaced, not written through (as export does). */
#ifndef TANDEM_UTIL_OUTFILE_H
#define TANDEM_UTIL_OUTFILE_H

#include <stdio.h>

#include "util/err.h"

typedef struct outfile {
    FILE *f;          /* write here */
    char *tmp, *path; /* owned copies */
    const char *what; /* the option that named the path, for messages ("--plot") */
} outfile;

/* Opens the temporary beside `path`. ERR_USAGE naming `what` and the path (no directory
 * there, no permission) with e set; `o` is then closed already. */
int outfile_open(outfile *o, const char *what, const char *path, tdm_err *e);

/* Ends the file: when `rc` is 0, closes it and renames it onto its path with `mode` (0:
 * 0666 less the umask, as fopen would create it); a close or rename that fails is ERR_USAGE
 * naming what and path. When `rc` is not 0 (the caller failed first), or on any failure
 * here, the temporary is removed and the path left alone. Returns rc, or the failure. */
int outfile_close(outfile *o, int rc, unsigned mode, tdm_err *e);

/* While a temporary is being written: a SIGTERM, SIGINT or SIGHUP (where the process has
 * left them at their default, which ends it) removes `tmp` before the process ends by it
 * as it would have. NULL: none pending. One at a time; `tmp` must stay valid until
 * cleared. outfile_open/close call it; tfevents' whole files too. */
void outfile_guard(const char *tmp);

#endif
