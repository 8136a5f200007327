/* open.c — store_open and store_open_existing: which backend a URL names.
 *
 * The scheme table is the one place that knows every backend; the backends know only the
 * interface and store.c's helpers (storage/store_impl.h), so the include graph runs one
 * way: open.c -> backends -> store.c. A new backend is a row here. */
#include <string.h>

#include "storage/store.h"
#include "storage/store_impl.h"
#include "storage/url.h"

/* One row per kind of URL (storage/url.h says which text names which): how to open it,
 * and how to say that nothing is there. */
typedef struct store_scheme {
    store *(*open)(const store_url_parts *u, const char *url, int must_exist, int *absent, tdm_err *e);
    const char *absent_what;
} store_scheme;

static store *open_s3(const store_url_parts *u, const char *url, int must_exist, int *absent,
                      tdm_err *e) {
    (void)url; /* the backend reads bucket and prefix from the canonical s3:// URL */
    return s3_store_open(u->canon, must_exist, absent, e);
}

static store *open_file(const store_url_parts *u, const char *url, int must_exist, int *absent,
                        tdm_err *e) {
    return file_store_open(url, u->path, must_exist, absent, e);
}

static const store_scheme SCHEMES[] = {
    [STORE_URL_FILE] = {open_file, "no such directory, or an empty one"},
    [STORE_URL_S3] = {open_s3, "no object under that prefix"},
};

store *store_open(const char *url, tdm_err *e) {
    store_url_parts u;
    if (store_url_parse(url, &u, e)) return NULL;
    return SCHEMES[u.kind].open(&u, url, 0, NULL, e);
}

store *store_open_existing(const char *url, int flags, tdm_err *e) {
    int absent;
    return store_open_present(url, flags, &absent, e);
}

store *store_open_present(const char *url, int flags, int *absent, tdm_err *e) {
    store_url_parts u;
    *absent = 0;
    if (store_url_parse(url, &u, e)) return NULL;
    const store_scheme *sc = &SCHEMES[u.kind];
    store *s = sc->open(&u, url, 1, absent, e);
    if (!s && *absent)
        err_set(e, ERR_STORE,
                "no store at %s: nothing is there (%s); check the URL (a run's store is made "
                "by `tandem run CONFIG --store %s`)",
                url, sc->absent_what, url);
    if (s) s->read_only = (flags & STORE_OPEN_READ_ONLY) != 0;
    return s;
}
