/* open.c — store_open and store_open_existing: which backend a URL names.
 *
 * The scheme table is the one place that knows every backend; the backends know only the
 * interface and store.c's helpers (storage/store_impl.h), so the include graph runs one
 * way: open.c -> backends -> store.c. A new backend is a row here. */
#include <string.h>

#include "storage/store.h"
#include "storage/store_impl.h"

/* One row: the URL prefix, how to open it, and how to say that nothing is there. */
typedef struct store_scheme {
    const char *prefix;
    store *(*open)(const char *url, const char *rest, int must_exist, int *absent, tdm_err *e);
    const char *absent_what;
} store_scheme;

static store *open_s3(const char *url, const char *rest, int must_exist, int *absent, tdm_err *e) {
    (void)rest; /* the backend parses bucket and prefix from the URL itself */
    return s3_store_open(url, must_exist, absent, e);
}

static store *open_file(const char *url, const char *rest, int must_exist, int *absent,
                        tdm_err *e) {
    if (!*rest) {
        err_set(e, ERR_USAGE, "store URL %s has no path (use file:///abs/path or file://rel/path)",
                url);
        return NULL;
    }
    return file_store_open(url, rest, must_exist, absent, e);
}

static const store_scheme SCHEMES[] = {
    {"s3://", open_s3, "no object under that prefix"},
    {"file://", open_file, "no such directory, or an empty one"},
    {"", file_store_open, "no such directory, or an empty one"}, /* a bare directory path */
};

/* The row for `url` and, in *rest, what follows its prefix; NULL with ERR_USAGE when the
 * URL is empty or names a scheme no row has. */
static const store_scheme *scheme_of(const char *url, const char **rest, tdm_err *e) {
    if (!url || !*url) {
        err_set(e, ERR_USAGE, "empty store URL (use file:///path or a directory path)");
        return NULL;
    }
    for (size_t i = 0; i < sizeof SCHEMES / sizeof *SCHEMES; i++) {
        size_t n = strlen(SCHEMES[i].prefix);
        if (n == 0 && strstr(url, "://"))
            break; /* some other scheme, not a path */
        if (strncmp(url, SCHEMES[i].prefix, n) == 0) {
            *rest = url + n;
            return &SCHEMES[i];
        }
    }
    err_set(e, ERR_USAGE, "store URL %s: unsupported scheme (use file:// or s3://)", url);
    return NULL;
}

store *store_open(const char *url, tdm_err *e) {
    const char *rest;
    const store_scheme *sc = scheme_of(url, &rest, e);
    return sc ? sc->open(url, rest, 0, NULL, e) : NULL;
}

store *store_open_existing(const char *url, int flags, tdm_err *e) {
    const char *rest;
    int absent = 0;
    const store_scheme *sc = scheme_of(url, &rest, e);
    if (!sc) return NULL;
    store *s = sc->open(url, rest, 1, &absent, e);
    if (!s && absent)
        err_set(e, ERR_STORE,
                "no store at %s: nothing is there (%s); check the URL (a run's store is made "
                "by `tandem run CONFIG --store %s`)",
                url, sc->absent_what, url);
    if (s) s->read_only = (flags & STORE_OPEN_READ_ONLY) != 0;
    return s;
}
