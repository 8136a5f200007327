/* textsrc.h — which files a `tandem prep` domain reads: paths, directories, globs and
 * excludes, expanded by tandem itself (a glob after NAME= is not expanded by the shell).
 *
 * An include is one of:
 *   - a regular file (followed if it is a symlink);
 *   - a directory, walked recursively: regular files only; symlinks and special files met
 *     inside are reported (TEXTSRC_SPECIAL) and never followed, unreadable directories
 *     reported (TEXTSRC_UNREADABLE) and left out, and hidden files and directories (a name
 *     starting with '.': .git, .env, .venv) reported (TEXTSRC_HIDDEN) and left out, as a
 *     glob leaves them (a repository's .git/config may hold a token);
 *   - a glob (it holds one of * ? [): its leading components without those characters
 *     name the directory walked as above (the current directory when there are none), and
 *     a file is taken when its whole path, as built from that directory, matches the
 *     glob (the output directory, if it lies below, is passed over rather than refused,
 *     so `--domain 'py=**' --out data` works). Matching is per path component with fnmatch(3) rules: * ? and [...] never
 *     match '/' nor a leading '.'; a component "**" matches zero or more whole components
 *     that do not start with '.' (as bash's globstar). A glob that matches no file is an
 *     error (a typo would otherwise drop a whole source silently).
 * An exclude is a glob with the same component rules that matches a file when it
 * matches any run of consecutive components of its path: "*.pyc" any file so named,
 * "tests" anything below a directory named tests, "pkg/tests" anything below such a
 * pair of directories ("**" works as above); one starting with '/' must match the whole
 * (absolute) path. Excluded files are reported (TEXTSRC_EXCLUDED) and not listed.
 */
#ifndef TANDEM_DATA_TEXTSRC_H
#define TANDEM_DATA_TEXTSRC_H

#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

/* Why a file, document or directory was left out; the summary counts each. */
enum {
    TEXTSRC_BINARY,     /* a NUL byte, or invalid UTF-8 in the first TEXTSRC_SNIFF_BYTES */
    TEXTSRC_BAD_JSON,   /* a .jsonl line or .json file that is not JSON */
    TEXTSRC_NO_FIELD,   /* a JSON record without the string text field (or not an object) */
    TEXTSRC_BAD_UTF8,   /* invalid UTF-8 later in a text file, or in a JSON text field */
    TEXTSRC_UNREADABLE, /* a file or directory that cannot be opened or read */
    TEXTSRC_CORRUPT,    /* a gzip or zstd stream that does not decompress */
    TEXTSRC_EMPTY,      /* an empty file or an empty text field */
    TEXTSRC_EXCLUDED,   /* a file matched by an exclude */
    TEXTSRC_SPECIAL,    /* a symlink or special file met inside a directory */
    TEXTSRC_NULL,       /* a null in a Parquet file's text column (skipped) */
    TEXTSRC_TOO_LONG,   /* a .jsonl line past DOCREAD_RECORD_MAX, a .json file past
                         * DOCREAD_JSON_MAX (left out: held whole, they could exhaust memory) */
    TEXTSRC_HIDDEN,     /* a name starting with '.' met inside a directory walked (.git, .env) */
    TEXTSRC_UNSUPPORTED, /* a sound file in a form prep does not read: a Parquet codec, encoding or
                          * nested column, a zstd frame's window past DOCREAD_ZSTD_WINDOW_LOG */
    TEXTSRC_N_REASONS
};

/* A short name per reason for summaries ("binary", "bad JSON", ...). */
const char *textsrc_reason_name(int reason);

/* Receives each thing left out: path, line (0: the whole file) and a phrase. */
typedef struct textsrc_issues {
    void *ctx;
    void (*fn)(void *ctx, int reason, const char *path, uint64_t line, const char *what);
} textsrc_issues;

typedef struct textsrc_file {
    char *path;
    uint64_t size;
    dev_t dev;
    ino_t ino;
} textsrc_file;

typedef struct textsrc_list {
    textsrc_file *files; /* owned, in the order found (sort them for a canonical order) */
    size_t n, cap;
} textsrc_list;

/* Adds the files of one include to l, leaving out those an exclude matches. out_canon
 * (a canonical absolute path, or NULL) is refused as lying inside a walked directory
 * given as such; a glob's walk passes over it.
 * Errors (ERR_USAGE) name the domain: a missing path, one that is neither file nor
 * directory nor glob, a glob matching nothing, --out inside the input;
 * ERR_INTERNAL: out of memory. */
int textsrc_add(textsrc_list *l, const char *domain, const char *include,
                const char *const *excludes, int n_excludes, const char *out_canon,
                const textsrc_issues *is, tdm_err *e);

void textsrc_list_free(textsrc_list *l);

/* Whether s holds a glob character (* ? [). */
int textsrc_is_glob(const char *s);
/* The include rule: the whole of path matches glob. */
int textsrc_match(const char *glob, const char *path);
/* The exclude rule: glob matches a run of consecutive components of path. */
int textsrc_excluded(const char *glob, const char *path);

/* Canonical absolute form of a path that need not exist (realpath of its longest
 * existing prefix, then the rest with ".", ".." and repeated slashes resolved); NULL
 * when it cannot be resolved or out of memory. The caller frees it. */
char *textsrc_canon(const char *path);

#endif
