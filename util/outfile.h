/* outfile.h — a file a command writes for the user (--plot, --svg, --out, manifest --out):
 * whole or not at all.
 *
 * A regular file (new, or one already there, also behind a symbolic link) is written
 * beside its target as NAME.tmp.PID.N (the name fileio_sweep_dead_temporaries knows; a
 * name too long for that, .tandem-out.tmp.PID.N) and renamed over it only once every byte
 * was written and the file closed without error: a full disk, a failed write or a signal
 * leaves the file that was there (if any) as it was, never a cut one. A link stays a link
 * (the file it names is replaced) and a file replaced keeps its permission bits. What is
 * not a regular file — /dev/null, /dev/stdout, a FIFO, a process substitution — is written
 * directly, as fopen would: it cannot be replaced whole. A FIFO is opened only once a
 * process reads it (two seconds given): one without a reader is refused, never waited on. */
#ifndef TANDEM_UTIL_OUTFILE_H
#define TANDEM_UTIL_OUTFILE_H

#include <stdio.h>

#include "util/err.h"

typedef struct outfile {
    FILE *f;          /* write here */
    char *tmp, *path; /* owned: the temporary (NULL: written directly) and the target */
    char *given;      /* owned: the path as given, for messages */
    const char *what; /* the option that named the path, for messages ("--plot") */
    unsigned mode;    /* the replaced file's permission bits; 0: a new file */
    int fd;           /* the temporary's descriptor (f's), while tmp is set */
} outfile;

/* Opens the temporary beside `path` (or `path` itself, see above), first removing dead
 * temporaries of the same name that killed writers left (a minute old). ERR_USAGE naming
 * `what` and the path (a URL or user info: outfile_check_local; no directory there, no
 * permission, a FIFO nobody reads) with e set; `o` is then closed already. */
int outfile_open(outfile *o, const char *what, const char *path, tdm_err *e);

/* Ends the file: when `rc` is 0, closes it and renames it onto its path with `mode` (0:
 * the replaced file's bits, or 0666 less the umask for a new one); a close or rename that
 * fails is ERR_USAGE naming what and path. When `rc` is not 0 (the caller failed first),
 * or on any failure here, the temporary is removed and the path left alone. Returns rc,
 * or the failure. Safe on an outfile whose open failed. */
int outfile_close(outfile *o, int rc, unsigned mode, tdm_err *e);

/* Whether `path` names a file or folder on this machine: 1, or 0 with `why` (n bytes) saying
 * what to do instead, never repeating the path. Refused:
 *   - user info in any spelling ("s3://KEY:SECRET@b/x", "s3:/K:S@b", "K:S@b/x": a ':' before
 *     an '@' in the first segment, util/urltext.h) and an '@' in a URL's authority
 *     ("s3://KEY@b/x"): a path becomes a folder's name, a message, a pinned config;
 *     credentials come from the credential chain (docs/running.md);
 *   - a URL: a first segment "scheme:" followed by '/' or '\' (s3://, gs://, https://,
 *     s3:/b, file:///x). Taken as a path, "s3://b/tb" was the local folder ./s3:/b/tb and
 *     the user believed the files were in the bucket. file:// is refused too rather than
 *     stripped: one spelling of a local path (a folder really called "s3:" is ./s3:/...).
 * `output`: the path is written (why says to write locally and copy the result), else read
 * (why says to copy it onto this machine first). */
int outfile_path_local(const char *path, int output, char *why, size_t n);

/* `path` as a message may show it (out, cap bytes, always terminated): user info, in any
 * spelling outfile_path_local refuses, replaced by "***" (s3://KEY@bucket/tb is shown with *** for KEY). */
void outfile_mask_path(const char *path, char *out, size_t cap);

/* 0, or ERR_USAGE (e set) "WHAT PATH: why" with the path masked when `path`, an output
 * path named by option `what`, is not local (outfile_path_local). outfile_open and
 * outfile_check_target apply it; a command writing a folder itself (export --out) calls it
 * before doing anything else. */
int outfile_check_local(const char *what, const char *path, tdm_err *e);

/* Store roots that outputs must not be written into where a store keeps its own objects:
 * each store opened on a local directory is recorded (outfile_protect, by the file store),
 * and `owned` (set once by main: ledger_key_owned) says which paths below a root are the
 * store's. outfile_open and tfevents_open refuse such a target (ERR_USAGE naming the option,
 * the path and the store), also when a symbolic link leads there; without `owned` set,
 * nothing is refused. */
void outfile_protect(const char *root);
void outfile_set_owned(int (*owned)(const char *rel));
/* 0, or ERR_USAGE (e set) when `path` (a file to write, or with is_dir a folder to write
 * files into) is not local (outfile_check_local: checked whether or not `owned` is set) or
 * is or leads to a store's own object or folder. */
int outfile_check_target(const char *what, const char *path, int is_dir, tdm_err *e);

/* While a temporary is being written: a SIGTERM, SIGINT or SIGHUP (where the process has
 * left them at their default, which ends it) removes `tmp` before the process ends by it
 * as it would have. NULL: none pending. One at a time; `tmp` must stay valid until
 * cleared. outfile_open/close call it; tfevents' whole files too. */
void outfile_guard(const char *tmp);

/* The same for writers of other temporaries (shards, an export's files), several at once
 * and from several threads (the name is copied): the slot to drop once the temporary is
 * renamed or removed, or -1 when all are taken (the temporary is then swept later, as a
 * dead one). Guard a name before creating it (O_EXCL, this process's own name), drop it
 * if the creation fails: no stop signal can then come between the two. */
int outfile_guard_add(const char *tmp);
void outfile_guard_drop(int slot);
/* Lets the guards install their handler (main does, once): without it nothing is
 * installed, so that a program linking the library keeps its own signal dispositions (a
 * test that writes shards, then forks a run, must not hand the child a handler that dies
 * of SIGTERM before the run installs its own). */
void outfile_guards_enable(void);

/* Whether everything written to `f` reached its file: flushes, then 0, or the errno of
 * the failure: for a stream of outfile_fd_stream (outfile's files, stdout once
 * outfile_keep_stdout ran) that of its first failed write, also when that write failed
 * inside an earlier fprintf; for another stream the flush's (EIO when its errno is gone). */
int outfile_stream_error(FILE *f);

/* A stream writing to `fd` that keeps the errno of its first failed write for
 * outfile_stream_error (stdio keeps only a flag). owned: fclose closes fd. NULL when out
 * of memory. */
FILE *outfile_fd_stream(int fd, int owned);
/* Makes stdout such a stream on descriptor 1, buffered as before (by line at a terminal).
 * main calls it once, before anything is printed. */
void outfile_keep_stdout(void);

#endif
