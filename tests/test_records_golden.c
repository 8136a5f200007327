/* test_records_golden.c — the bytes of every record kind, pinned: each sample record (every
 * kind, with and without its optional fields) encodes to exactly the bytes in
 * tests/records/golden/<name>.mp, written by the encoders of 2026-11-28 before the records
 * were described by one table (issue 27). A store written by any version since reads the
 * same, and a state's manifest hash — what a resume compares bit for bit — does not move.
 * Each golden file also decodes, and encodes back to itself.
 *
 * TANDEM_WRITE_GOLDEN=DIR writes the files instead (only to pin a deliberate new format).
 */
#include <stdlib.h>

#include "ledger/metrics.h"
#include "ledger/read.h"
#include "ledger/records.h"
#include "tests/record_samples.h"
#include "tests/test.h"

/* ------------------------------------------------------------------ the samples */

static void sample_head(rec_head *h) {
    memset(h, 0, sizeof *h);
    h->seq = 40;
    snprintf(h->state, sizeof h->state, "states/40.mp");
    sha256("state", 5, &h->state_sha);
    h->epoch = 3;
    h->time = 1795000000.25;
    h->commits = 7;
}

/* ------------------------------------------------------------------ one golden file */

static int write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int bad = fwrite(data, 1, n, f) != n;
    return fclose(f) || bad ? -1 : 0;
}

/* The whole file into *data (malloc'd); -1 when it cannot be read. */
static int read_file(const char *path, void **data, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 4096))) break;
        size_t got = fread(buf + len, 1, cap - len, f);
        if (!got) break;
        len += got;
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) return free(buf), -1;
    *data = buf, *n = len;
    return 0;
}

static const char *golden_dir(void) {
    static char dir[4096];
    const char *root = getenv("TANDEM_ROOT");
    snprintf(dir, sizeof dir, "%s/tests/records/golden", root ? root : ".");
    return dir;
}

/* Compares (or with TANDEM_WRITE_GOLDEN writes) `name`'s bytes; then the golden bytes
 * decode as `kind` and encode back to themselves through `reencode`. */
static void golden(const char *name, rec_kind kind, void *data, size_t n,
                   void *(*reencode)(const void *rec, size_t *n), void (*release)(void *rec)) {
    char path[4200];
    const char *w = getenv("TANDEM_WRITE_GOLDEN");
    snprintf(path, sizeof path, "%s/%s.mp", w ? w : golden_dir(), name);
    tdm_err e = {0};
    if (w) {
        CHECK(write_file(path, data, n) == 0, "cannot write %s", path);
        free(data);
        return;
    }
    void *want = NULL;
    size_t wn = 0;
    int rc = read_file(path, &want, &wn);
    CHECK(rc == 0, "cannot read %s", path);
    CHECK(rc == 0 && wn == n && memcmp(want, data, n) == 0, "%s: the encoder's %zu bytes differ from the golden %zu",
          name, n, wn);
    static union {
        rec_head h; rec_run r; rec_change c; rec_state s; rec_alpha a; rec_lease l; rec_mixture x;
        rec_model m; rec_metrics t; rec_sweep sw; rec_data da; rec_diverged dv;
    } back;
    if (rc == 0) {
        int d = ledger_decode(kind, want, wn, name, &back, &e);
        CHECK(d == 0, "%s: the golden bytes do not decode: %s", name, e.msg);
        if (d == 0) {
            size_t bn = 0;
            void *again = reencode(&back, &bn);
            CHECK(again && bn == wn && memcmp(again, want, wn) == 0, "%s: decoded and encoded again, %zu bytes differ",
                  name, bn);
            free(again);
            if (release) release(&back);
        }
    }
    free(want);
    free(data);
}

#define REENCODE(kind, T)                                                                 \
    static void *reencode_##kind(const void *rec, size_t *n) { return rec_##kind##_encode((const T *)rec, n); }
REENCODE(head, rec_head)
REENCODE(run, rec_run)
REENCODE(change, rec_change)
REENCODE(state, rec_state)
REENCODE(alpha, rec_alpha)
REENCODE(lease, rec_lease)
REENCODE(mixture, rec_mixture)
REENCODE(model, rec_model)
REENCODE(metrics, rec_metrics)
REENCODE(sweep, rec_sweep)
REENCODE(data, rec_data)
REENCODE(diverged, rec_diverged)
static void release_state(void *rec) { rec_state_free(rec); }
static void release_run(void *rec) { rec_run_free(rec); }
static void release_change(void *rec) { rec_change_free(rec); }

static void test_golden_bytes(void) {
    size_t n;
    void *d; /* encoded first: an argument list has no order of evaluation */
    rec_head h;
    sample_head(&h);
    d = rec_head_encode(&h, &n);
    golden("head", REC_KIND_HEAD, d, n, reencode_head, NULL);
    for (int full = 0; full < 2; full++) {
        rec_state s;
        sample_state(&s, full, 0);
        d = rec_state_encode(&s, &n);
        golden(full ? "state" : "state-legacy", REC_KIND_STATE, d, n, reencode_state, release_state);
        rec_state_free(&s);
        rec_alpha a;
        sample_alpha(&a, full);
        d = rec_alpha_encode(&a, &n);
        golden(full ? "alpha" : "alpha-legacy", REC_KIND_ALPHA, d, n, reencode_alpha, NULL);
        rec_metrics m;
        sample_metrics(&m, full);
        d = rec_metrics_encode(&m, &n);
        golden(full ? "metrics" : "metrics-fixed", REC_KIND_METRICS, d, n, reencode_metrics,
               NULL);
    }
    rec_kv kv[2] = {{"model.layers", "4"}, {"tandem.K", "5"}};
    rec_run run = {.created = 1795000000, .nconfig = 2, .config = kv, .M = 2};
    snprintf(run.domains[0], REC_NAME_MAX, "web");
    snprintf(run.domains[1], REC_NAME_MAX, "code");
    snprintf(run.run_id, sizeof run.run_id, "run-0123456789abcdef");
    rec_config_hash(kv, 2, &run.config_sha);
    d = rec_run_encode(&run, &n);
    golden("run", REC_KIND_RUN, d, n, reencode_run, release_run);
    rec_kv o[1] = {{"tandem.K", "5"}}, nw[1] = {{"tandem.K", "3"}};
    rec_change c = {.seq = 8, .created = 1795000100, .n = 1, .old_values = o, .new_values = nw};
    d = rec_change_encode(&c, &n);
    golden("change", REC_KIND_CHANGE, d, n, reencode_change, release_change);
    rec_lease l = {.epoch = 3, .pid = 4242, .attempt = 1, .time = 1795000000.5, .released = 1};
    snprintf(l.host, sizeof l.host, "node-3");
    d = rec_lease_encode(&l, &n);
    golden("lease", REC_KIND_LEASE, d, n, reencode_lease, NULL);
    rec_mixture x = {.M = 2, .alpha = {0.25, 0.75}, .first = 9, .last = 10};
    snprintf(x.names[0], REC_NAME_MAX, "web");
    snprintf(x.names[1], REC_NAME_MAX, "code");
    d = rec_mixture_encode(&x, &n);
    golden("mixture", REC_KIND_MIXTURE, d, n, reencode_mixture, NULL);
    rec_model md = {.init = "hf:/models/qwen2-0.5b"};
    sha256("config", 6, &md.config_sha);
    sha256("weights", 7, &md.weights_sha);
    d = rec_model_encode(&md, &n);
    golden("model", REC_KIND_MODEL, d, n, reencode_model, NULL);
    static rec_sweep sw = {.n = 2, .points = 6};
    snprintf(sw.text[0], REC_SWEEP_TEXT_MAX, "run.seed=1,2,3");
    snprintf(sw.text[1], REC_SWEEP_TEXT_MAX, "tandem.lr_alpha=2e-3,4e-3");
    d = rec_sweep_encode(&sw, &n);
    golden("sweep", REC_KIND_SWEEP, d, n, reencode_sweep, NULL);
    /* data.mp (2026-11-29) */
    static rec_data da = {.M = 2, .domains = {"web", "code"}};
    for (int m = 0; m < 2; m++)
        for (int sp = 0; sp < REC_DATA_SPLITS; sp++) sha256(da.domains[m], sp + 1, &da.sha[m][sp]);
    d = rec_data_encode(&da, &n);
    golden("data", REC_KIND_DATA, d, n, reencode_data, NULL);
    /* diverged.mp (2026-12-06) */
    static rec_diverged dv = {.epoch = 4, .seq = 13, .episode = 3, .step = "free", .index = 1, .state_seq = 12,
                              .time = 1795000200.5, .host = "node-3", .attempt = 1};
    snprintf(dv.message, sizeof dv.message, "free step 9: the gradient norm is not finite: u diverged (optim.lr "
             "= 1e+30); lower optim.lr");
    d = rec_diverged_encode(&dv, &n);
    golden("diverged", REC_KIND_DIVERGED, d, n, reencode_diverged, NULL);
}

int main(void) {
    RUN(test_golden_bytes);
    return test_summary("test_records_golden");
}
