/* store_impl.h — what a store backend provides; only storage/ includes this. */
#ifndef TANDEM_STORAGE_STORE_IMPL_H
#define TANDEM_STORAGE_STORE_IMPL_H

#include "storage/store.h"

typedef struct store_backend {
    const char *scheme;
    int (*put)(store *s, const char *key, const void *data, size_t n, int mode, tdm_err *e);
    int (*put_if)(store *s, const char *key, const void *data, size_t n,
                  const store_version *expected, store_version *out, tdm_err *e);
    int (*get)(store *s, const char *key, void **data, size_t *n, store_version *ver,
               tdm_err *e);
    /* optional: NULL means get and hash */
    int (*get_verified)(store *s, const char *key, const sha256_digest *expect, void **data,
                        size_t *n, tdm_err *e);
    int (*exists)(store *s, const char *key, int *exists, tdm_err *e);
    /* optional: store_age (NULL: the store cannot say, 1) */
    int (*age)(store *s, const char *key, double *age_s, tdm_err *e);
    /* optional: 1 when something that is no object stands at key (a directory, a FIFO, a
     * link to itself), else 0 (store_obstacle) */
    int (*obstacle)(store *s, const char *key);
    int (*list)(store *s, const char *prefix, store_list *out, tdm_err *e);
    int (*del)(store *s, const char *key, tdm_err *e);
    /* optional: NULL means the backend leaves no temporaries (store_sweep_temporaries) */
    int (*sweep)(store *s, double min_age_s, size_t *n, uint64_t *bytes, tdm_err *e);
    /* optional: NULL means every write is settled (a local file system's are, when they
     * return); else the seconds until none of key given up on can land (deletes_only 1: no
     * DELETE of it, store_delete_unsettled_s; 2: none of this process's own; NULL key: of
     * any key), 0 when settled */
    double (*unsettled)(store *s, const char *key, int deletes_only);
    /* optional, with `unsettled`: another process's writes may still land, for the
     * backend's window (for_s <= 0) or for_s seconds (store_note_lost_writer) */
    void (*lost_writer)(store *s, double for_s);
    /* optional, with `unsettled`: a DELETE of key (ending in '/': of every key under it;
     * NULL: of any key) another process gave up on may land for for_s seconds
     * (store_note_late_delete) */
    void (*late_delete)(store *s, const char *key, double for_s);
    /* optional, with `unsettled`: the keys of this process's DELETEs that may still land
     * (store_unsettled_delete_keys) */
    double (*late_deletes)(store *s, char *out, size_t cap);
    /* optional, with `unsettled`: how long a write given up on may land after it was sent */
    double (*settle_window)(store *s);
    void (*close)(store *s);
} store_backend;

struct store {
    const store_backend *b;
    char *url;  /* as given, for messages */
    void *impl; /* the backend's own state */
    int read_only; /* opened with STORE_OPEN_READ_ONLY: writes and deletes are refused */
};

/* Opens a file store rooted at the directory `path`: creates it (and its parents, 0700)
 * when must_exist is 0; otherwise nothing is created, and a missing or empty root gives
 * NULL with *absent set to 1 (when absent is given). */
store *file_store_open(const char *url, const char *path, int must_exist, int *absent, tdm_err *e);

/* Opens the s3:// store at `url` (storage/s3_store.c); with must_exist, a prefix that
 * holds no object at all is reported through *absent (NULL returned). */
store *s3_store_open(const char *url, int must_exist, int *absent, tdm_err *e);

/* Appends a key to a list (used by backends while listing). 0, or -1 when out of memory. */
int store_list_append(store_list *l, const char *key);
/* Sorts a list bytewise. */
void store_list_sort(store_list *l);

#endif
