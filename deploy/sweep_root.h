/* sweep_root.h — a sweep's root read back: the study's record (ROOT/SWEEP) and where each
 * of its points stands (`tandem status ROOT`, `tandem results ROOT`; docs/scheduling.md,
 * "Sweeps").
 *
 * Every point runs in its own store ROOT/<label> (sweep.h). The first point that starts
 * writes ROOT/SWEEP, the --sweep texts; each later one checks that its study is the same,
 * so two studies never share a root by mistake. Reading a root then needs no listing: the
 * points, their labels and their stores all follow from the record.
 */
#ifndef TANDEM_DEPLOY_SWEEP_ROOT_H
#define TANDEM_DEPLOY_SWEEP_ROOT_H

#include <stddef.h>
#include <stdint.h>

#include "deploy/sweep.h"
#include "ledger/records.h"
#include "storage/store.h"
#include "util/err.h"

/* Writes ROOT/SWEEP for the study of texts[0..n) (parsed as s) when it is not there (a
 * create-only put: of points starting together one writes it), else checks that the one
 * there is the same study: ERR_USAGE naming both when it is another (use another --store),
 * ERR_STORE when it is damaged. `root_url` names the root in messages. */
int sweep_root_record(store *root, const char *root_url, char *const *texts, int n, const sweep *s, tdm_err *e);

/* Reads ROOT/SWEEP into *s (free with sweep_free) and the texts into *rec (may be NULL).
 * STORE_NOT_FOUND (e set) when the store is not a sweep's root; STORE_CORRUPT naming the
 * record when it does not decode or parse. */
int sweep_root_read(store *root, sweep *s, rec_sweep *rec, tdm_err *e);

/* Point i's store: ROOT/<label> (as `tandem run --sweep` makes it). */
void sweep_point_url(const char *root_url, const sweep *s, size_t i, char *out, size_t cap);

/* Where a point stands. */
typedef enum {
    SWEEP_POINT_PENDING,  /* no run in its store yet */
    SWEEP_POINT_RUNNING,  /* the writer lease is held (a writer may be at work) */
    SWEEP_POINT_STOPPED,  /* started, not finished, nobody holds the lease (requeue it) */
    SWEEP_POINT_FINISHED, /* its final state is committed */
    SWEEP_POINT_DAMAGED,  /* its store holds a run that cannot be read (tandem verify) */
} sweep_point_state;

const char *sweep_point_state_name(sweep_point_state st);

typedef struct sweep_point {
    size_t index;
    char label[2048];
    char url[4096];
    sweep_point_state state;
    char why[1024];       /* DAMAGED: what is wrong; else empty */
    uint64_t episode;     /* the committed state's next episode (0 without one) */
    uint64_t episodes;    /* run.episodes of the point's config */
    int fixed;            /* run.mode = fixed (no α*) */
    int have_mixture;     /* FINISHED TANDEM run: mixture holds α* */
    rec_mixture mixture;
} sweep_point;

/* Fills *p for point i of the study at root_url (read-only; a store that cannot be opened
 * or read is a failure, not a state: ERR_STORE with e set). */
int sweep_point_read(const char *root_url, const sweep *s, size_t i, sweep_point *p, tdm_err *e);

#endif
