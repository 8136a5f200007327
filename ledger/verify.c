/* verify.c — the audit of a run's store; see verify.h. */
#include "ledger/verify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/audit.h"
#include "ledger/ckpt.h"
#include "ledger/keys.h"
#include "ledger/metrics.h"
#include "ledger/read.h"
#include "ledger/retain.h"
#include "storage/digest_set.h"
#include "util/testhook.h"

/* ------------------------------------------------------------------ the report's lines */

/* Appends a line; a fault also counts. Out of memory loses the line's text ("(out of
 * memory)" instead), never the fault. */
static void add_line(ledger_verify_report *r, ledger_verify_kind kind, int state, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_line(ledger_verify_report *r, ledger_verify_kind kind, int state, const char *fmt, ...) {
    if (kind == VERIFY_FAULT) r->faults++;
    ledger_verify_line *nl = realloc(r->lines, (r->nlines + 1) * sizeof *nl);
    if (!nl) return;
    r->lines = nl;
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0) text = strdup("(out of memory)");
    va_end(ap);
    r->lines[r->nlines++] = (ledger_verify_line){.kind = kind, .state = state, .text = text};
}

/* Takes back the lines added since there were `n` (a state that vanished while it was
 * checked: what was said of it is said of nothing). */
static void drop_lines_since(ledger_verify_report *r, size_t n) {
    while (r->nlines > n) {
        ledger_verify_line *l = &r->lines[--r->nlines];
        if (l->kind == VERIFY_FAULT) r->faults--;
        free(l->text);
    }
}

void ledger_verify_free(ledger_verify_report *r) {
    for (size_t i = 0; i < r->nlines; i++) free(r->lines[i].text);
    free(r->lines);
    for (size_t i = 0; i < r->ndamaged; i++) free(r->damaged_metrics[i]);
    free(r->damaged_metrics);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------------ the checks */

/* Metrics rows that cannot be read (damaged, cut, another run's bytes): a note each and
 * their keys in the report; rows missing below the newest: a note per gap (at most 3). A
 * store error stops it. */
static int check_metrics_rows(store *st, ledger_verify_report *r, tdm_err *e) {
    store_list l;
    int rc = store_list_prefix(st, LEDGER_METRICS, &l, e);
    if (rc) return rc == STORE_NOT_FOUND ? 0 : rc;
    /* read 64 at a time side by side (store_get_many: one round trip each on an object
     * store), judged in order */
    enum { ROWS_WINDOW = 64 };
    store_got *got = calloc(ROWS_WINDOW, sizeof *got); /* on the heap: 64 KiB (ulimit -s 128) */
    if (!got) rc = err_set(e, ERR_INTERNAL, "out of memory");
    size_t have = 0;
    for (size_t i = 0; !rc && i < l.n; i++) {
        size_t k = i % ROWS_WINDOW;
        if (k == 0) {
            have = l.n - i < ROWS_WINDOW ? l.n - i : ROWS_WINDOW;
            for (size_t j = 0; j < have; j++) got[j].key = l.keys[i + j];
            store_get_many(st, got, have);
        }
        tdm_err de;
        rec_metrics m;
        int rd = got[k].rc;
        if (rd) de = got[k].err;
        else rd = ledger_decode(REC_KIND_METRICS, got[k].data, got[k].n, l.keys[i], &m, &de);
        free(got[k].data);
        got[k].data = NULL;
        if (rd == STORE_NOT_FOUND) continue; /* deleted meanwhile */
        if (rd == STORE_CORRUPT) {
            char **nd = realloc(r->damaged_metrics, (r->ndamaged + 1) * sizeof *nd);
            if (nd) {
                r->damaged_metrics = nd;
                if ((nd[r->ndamaged] = strdup(l.keys[i]))) r->ndamaged++;
            }
            add_line(r, VERIFY_NOTE, 0, "%s cannot be read (%s): metrics rows are not part of the audit trail; "
                     "a run writes it again when it passes that episode, tandem metrics skips it",
                     l.keys[i], de.msg);
        } else if (rd) {
            rc = rd, *e = de;
        }
    }
    for (size_t j = 0; got && j < have; j++) free(got[j].data); /* those left unjudged (freed ones are NULL) */
    free(got);
    store_list_free(&l);
    /* a row missing below the newest (deleted): noted as a damaged one is */
    audit_gap gaps[3];
    size_t ng = 0;
    if (!rc) rc = audit_metrics_gaps(st, gaps, 3, &ng, e);
    for (size_t i = 0; !rc && i < ng; i++) {
        if (gaps[i].first == gaps[i].last)
            add_line(r, VERIFY_NOTE, 0, "%s%llu.mp is missing: metrics rows are not part of the audit trail; tandem "
                     "metrics says the gap", LEDGER_METRICS, (unsigned long long)gaps[i].first);
        else
            add_line(r, VERIFY_NOTE, 0, "%s%llu.mp..%llu.mp are missing: metrics rows are not part of the audit "
                     "trail; tandem metrics says the gap", LEDGER_METRICS, (unsigned long long)gaps[i].first,
                     (unsigned long long)gaps[i].last);
    }
    return rc;
}

/* What a state vouches for of the α chain (checked once the chain is read). */
typedef struct vouch {
    uint64_t seq, records;
    sha256_digest head;
} vouch;

/* What the checks share. */
typedef struct verify_ctx {
    store *st;
    const char *url;
    const ledger_pin *pin;
    ledger_verify_report *r;
    uint64_t gen;   /* gens.n: the run's config generation */
    ckpt_gens gens; /* where each generation ended */
    digest_set good, referenced;
    vouch *vouches;
    size_t nv;
    int run_seed_bad;
    int run_identity_bad; /* every state of the pinned seed that names its run names another */
    /* a writer holds the lease and may be alive (audit_lease_read: held): what a live run
     * passes through between two of its writes — no HEAD yet at its first commit, no
     * mixture.mp yet at its end — is a note, not a fault (a hunt: exit 3 beside a run) */
    int live;
    int have_head;     /* HEAD read, naming head_seq's state */
    uint64_t head_seq;
    uint64_t sealed_min; /* the lowest seq of a sealed state (UINT64_MAX: none) */
} verify_ctx;

/* One state manifest: its seed and generation against the run's, every chunk it names
 * present and intact (each blob fetched once); its line VERIFY_OK or VERIFY_BAD. */
static int check_state(verify_ctx *v, uint64_t seq, tdm_err *e) {
    ledger_verify_report *r = v->r;
    const ledger_pin *pin = v->pin;
    char key[64];
    ledger_state_key(key, sizeof key, seq);
    rec_state s;
    tdm_err de;
    int got = ledger_read(v->st, REC_KIND_STATE, key, NULL, &s, &de);
    if (got == STORE_NOT_FOUND) {
        r->vanished++;
        return 0;
    }
    if (got == STORE_CORRUPT) {
        add_line(r, VERIFY_FAULT, 0, "%s", de.msg);
        return 0;
    }
    if (got) {
        *e = de;
        return got;
    }
    int rc = 0, state_ok = 1, gone = 0;
    size_t lines_before = r->nlines;
    testhook_stop_at("state-read"); /* frozen here by the tests: a manifest read, its blobs not yet */
    if (!s.has_gen && s.seq > v->sealed_min) { /* as the load judges it (ckpt_load.c) */
        char older[64];
        ledger_state_key(older, sizeof older, v->sealed_min);
        add_line(r, VERIFY_FAULT, 0, "%s has no seal (gen, self) although %s before it has one: damaged or edited; "
                 "tandem run sets it aside and falls back to an older state", key, older);
        state_ok = 0;
    }
    vouch *nvp = realloc(v->vouches, (v->nv + 1) * sizeof *nvp);
    if (nvp) (v->vouches = nvp)[v->nv++] = (vouch){s.seq, s.alpha_records, s.alpha_head};
    if (pin->have && !v->run_seed_bad && s.seed != pin->seed) {
        add_line(r, VERIFY_FAULT, 0, "%s: made with seed %llu, not the run's %llu: another run's state", key,
                 (unsigned long long)s.seed, (unsigned long long)pin->seed);
        state_ok = 0;
    } else if (pin->has_run && !v->run_identity_bad && s.has_run && !sha256_equal(&s.run, &pin->run)) {
        if (v->have_head && seq == v->head_seq)
            add_line(r, VERIFY_FAULT, 0, "%s, the state HEAD names, was made by another run (the same seed, not the "
                     "config RUN pins): RUN was changed or damaged, or HEAD and its state are another run's; restore "
                     "RUN, or HEAD and states/, from a copy of the store (a run refuses it, exit 3)", key);
        else
            add_line(r, VERIFY_FAULT, 0, "%s: made by another run (the same seed, not the config RUN pins): another "
                     "run's state, copied in; a run passes over it, replaces it when its replay gets there, and sets "
                     "it aside at its end", key);
        state_ok = 0;
    }
    if (s.has_gen && s.gen > v->gen && pin->ok) {
        add_line(r, VERIFY_FAULT, 0, "%s: computed under config generation %llu, but the store records %llu "
                 "config changes: configs/%llu.mp is missing (restore it from a copy)", key,
                 (unsigned long long)s.gen, (unsigned long long)v->gen, (unsigned long long)v->gen);
        state_ok = 0;
    } else if (!ckpt_gen_belongs(s.has_gen, s.gen, s.seq, &v->gens)) {
        add_line(r, VERIFY_FAULT, 0, "%s: computed under config generation %llu by a writer that was fenced "
                 "out or superseded (the run is at generation %llu): a run never uses it",
                 key, (unsigned long long)s.gen, (unsigned long long)v->gen);
        state_ok = 0;
    }
    /* a view is a window of the parameter tensor: one outside it names parameters that are
     * not there, and every load refuses the manifest (ckpt_load's layout check) */
    for (size_t i = 0; s.ntensors && i < s.nviews; i++) {
        const rec_view *vw = &s.views[i];
        uint64_t numel = s.tensors[0].shape[0];
        if ((vw->cols && vw->rows > UINT64_MAX / vw->cols) || vw->offset > numel ||
            vw->rows * vw->cols > numel - vw->offset) {
            add_line(r, VERIFY_FAULT, 0, "%s: view %s (%llu x %llu at %llu) lies outside the parameter tensor (%llu "
                     "values): damaged; tandem run falls back to an older state", key, vw->name,
                     (unsigned long long)vw->rows, (unsigned long long)vw->cols, (unsigned long long)vw->offset,
                     (unsigned long long)numel);
            state_ok = 0;
            break;
        }
    }
    for (size_t t = 0; t < s.ntensors && !rc && !gone; t++) {
        const rec_tensor *rt = &s.tensors[t];
        uint64_t total = rt->shape[0] * 4;
        for (int d = 1; d < rt->ndim; d++) total *= rt->shape[d];
        for (size_t k = 0; k < rt->nchunks && !rc; k++) {
            if (digest_set_add(&v->referenced, &rt->chunks[k]) < 0) rc = err_set(e, ERR_INTERNAL, "out of memory");
            if (digest_set_has(&v->good, &rt->chunks[k])) continue;
            char bkey[80];
            ledger_blob_key(bkey, sizeof bkey, &rt->chunks[k]);
            void *b = NULL;
            size_t bn = 0;
            int g = store_get_verified(v->st, bkey, &rt->chunks[k], &b, &bn, e);
            uint64_t off = k * rt->chunk_bytes;
            size_t want = (size_t)(total - off < rt->chunk_bytes ? total - off : rt->chunk_bytes);
            free(b);
            int still = 1;
            tdm_err xe;
            if (g == STORE_NOT_FOUND && store_exists(v->st, key, &still, &xe) == 0 && !still) {
                /* the manifest went meanwhile: a live run's retention deletes it, then its
                 * blobs, after its HEAD move (so the re-read on a moved HEAD misses it): no
                 * damage, the state merely gone (a hunt: "blobs/... is missing", exit 3, on
                 * a healthy store beside its run) */
                gone = 1;
                break;
            }
            if (g == 0 && bn == want) {
                digest_set_add(&v->good, &rt->chunks[k]);
                r->blob_bytes += (double)bn;
            } else if (g == 0 || g == STORE_NOT_FOUND || g == STORE_CORRUPT) {
                add_line(r, VERIFY_FAULT, 0, "%s: %s (tensor %s chunk %zu) is %s", key, bkey, rt->name, k,
                         g == STORE_NOT_FOUND ? "missing" : g == STORE_CORRUPT ? "corrupt" : "the wrong size");
                state_ok = 0;
            } else {
                rc = g;
            }
        }
    }
    rec_state_free(&s);
    if (!rc && gone) {
        drop_lines_since(r, lines_before);
        if (v->nv && v->vouches[v->nv - 1].seq == seq) v->nv--; /* nor vouches for anything now */
        r->vanished++;
        return 0;
    }
    if (!rc) add_line(r, state_ok ? VERIFY_OK : VERIFY_BAD, 1, "%s", key);
    return rc;
}

/* The α chain: its links, each record's generation, what every state vouches for of it
 * (a state the chain does not hold cannot be resumed from), and mixture.mp of a finished
 * TANDEM run against α* of the chain. */
static int check_chain(verify_ctx *v, int have_head, uint64_t head_seq, int done, tdm_err *e) {
    ledger_verify_report *r = v->r;
    const ledger_pin *pin = v->pin;
    audit_chain c;
    memset(&c, 0, sizeof c);
    int rc = audit_chain_read(v->st, &c, e);
    if (rc) return rc;
    if (pin->have) audit_chain_domains(&c, pin->M);
    r->chain_read = 1;
    if (!c.ok) add_line(r, VERIFY_FAULT, 0, "%s", c.problem);
    for (size_t t = 0; t < c.n; t++)
        if (c.rec[t].has_gen && c.rec[t].gen > v->gen && pin->ok)
            add_line(r, VERIFY_FAULT, 0, "alpha/%zu.mp: computed under config generation %llu, but the store "
                     "records %llu config changes: configs/%llu.mp is missing (restore it from a copy)", t,
                     (unsigned long long)c.rec[t].gen, (unsigned long long)v->gen, (unsigned long long)v->gen);
        else if (!ckpt_gen_belongs(c.rec[t].has_gen, c.rec[t].gen, c.rec[t].seq, &v->gens))
            add_line(r, VERIFY_FAULT, 0, "alpha/%zu.mp: computed under config generation %llu by a writer "
                     "that was fenced out or superseded (the run is at generation %llu)",
                     t, (unsigned long long)c.rec[t].gen, (unsigned long long)v->gen);
    /* a state vouches for the first N records and the hash of the last: one that the chain
     * does not hold (a record missing at its end, or not the one it names) cannot be
     * resumed from; a run falls back to a state the chain holds, or replays from the seed,
     * and writes the records again (issue 26: verify called this clean) */
    int short_chain = 0;
    for (size_t i = 0; i < v->nv; i++) {
        uint64_t want = v->vouches[i].records;
        if (!want || (want <= c.n && sha256_equal(&c.hash[want - 1], &v->vouches[i].head))) continue;
        /* a state past HEAD (a commit cut off before HEAD moved) is not the run's position:
         * the run passes over it and re-derives what it lacks — no fault, but said, as the
         * run says it */
        if (have_head && v->vouches[i].seq > head_seq) {
            char key[64];
            ledger_state_key(key, sizeof key, v->vouches[i].seq);
            add_line(r, VERIFY_NOTE, 0, "%s lies past HEAD (a commit cut off before HEAD moved) and vouches for "
                     "%llu alpha records, %s: a run passes over it to the state HEAD names and re-derives them",
                     key, (unsigned long long)want,
                     want > c.n ? "more than the chain holds" : "not the ones the chain holds");
            continue;
        }
        if (!c.ok && want > c.n) continue; /* the broken link is reported above */
        char key[64];
        ledger_state_key(key, sizeof key, v->vouches[i].seq);
        if (want > c.n)
            add_line(r, VERIFY_FAULT, 0, "%s vouches for %llu alpha records but the chain holds %zu: "
                     "alpha/%zu.mp is missing; tandem run falls back to an older state (or replays from "
                     "the seed) and writes it again", key, (unsigned long long)want, c.n, c.n);
        else
            add_line(r, VERIFY_FAULT, 0, "%s vouches for another alpha/%llu.mp than the store holds; tandem "
                     "run falls back to an older state (or replays from the seed) and checks it", key,
                     (unsigned long long)want - 1);
        short_chain = 1;
    }
    r->alpha_records = c.n;
    r->alpha_chain_ok = c.ok;
    add_line(r, VERIFY_CHAIN, 0, "alpha chain: %zu records", c.n);
    r->mixture_ok = -1;
    /* mixture.mp of a finished TANDEM run: α* of the chain, as tandem run writes it */
    if (pin->have && c.ok && c.n && !short_chain && !pin->fixed) {
        void *md = NULL;
        size_t mn = 0;
        tdm_err me;
        int mr = store_get(v->st, LEDGER_MIXTURE, &md, &mn, NULL, &me);
        rec_mixture x;
        audit_mixture(&c, 0.1, &x);
        for (int m = 0; m < x.M; m++) snprintf(x.names[m], REC_DOMAIN_MAX, "%s", m < pin->M ? pin->names[m] : "?");
        if (mr == 0 && done && !rec_mixture_same(md, mn, &x)) {
            add_line(r, VERIFY_FAULT, 0, "%s/mixture.mp does not hold the alpha* of the alpha chain (damaged): "
                     "tandem run writes it again", v->url);
            r->mixture_ok = 0;
        } else if (mr == STORE_NOT_FOUND && done && v->live) {
            add_line(r, VERIFY_NOTE, 0, "%s/mixture.mp is not there yet: the run is finished and holds the lease "
                     "(it writes mixture.mp as it ends)", v->url);
        } else if (mr == STORE_NOT_FOUND && done) {
            add_line(r, VERIFY_FAULT, 0, "%s/mixture.mp is missing although the run is finished: tandem run "
                     "writes it again", v->url);
            r->mixture_ok = 0;
        } else if (mr == 0 && done) {
            add_line(r, VERIFY_OK, 0, "mixture.mp");
            r->mixture_ok = 1;
        } else if (mr && mr != STORE_NOT_FOUND) {
            rc = mr, *e = me;
        }
        free(md);
    }
    audit_chain_free(&c);
    return rc;
}

static int verify_once(store *st, const char *url, const ledger_pin *pin, ledger_verify_report *r, tdm_err *e);

/* Beside a live run a commit and its retention may land while the audit reads: a state
 * listed, then deleted with its blobs before they were read, was reported as missing
 * blobs (exit 3 on a healthy store), or, deleted before its manifest was read, left out
 * unsaid ("3 states, 0 blobs ... 373 orphan blobs; 0 faults"). A report with faults, with
 * states gone beneath it or with orphan blobs (a newer commit's, listed after the states)
 * is made again while HEAD moved during it (a commit came); after three tries the last one
 * stands with a note that a run is writing. Any other stands at once (each pass reads
 * every blob). */
int ledger_verify(store *st, const char *url, const ledger_pin *pin, ledger_verify_report *r, tdm_err *e) {
    int rc = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        sha256_digest before, after;
        if (attempt) ledger_verify_free(r);
        tdm_err he;
        int hb = audit_head_digest(st, &before, &he);
        rc = verify_once(st, url, pin, r, e);
        if (rc || (r->faults == 0 && r->vanished == 0 && r->orphan_blobs <= 0) || hb ||
            audit_head_digest(st, &after, &he) || sha256_equal(&before, &after))
            return rc;
    }
    add_line(r, VERIFY_NOTE, 0, "HEAD moved while verify read the store, three times: a run is writing to it, and "
             "this report may leave out states its retention deleted meanwhile; verify again once it stops");
    return rc;
}

static int verify_once(store *st, const char *url, const ledger_pin *pin, ledger_verify_report *r, tdm_err *e) {
    memset(r, 0, sizeof *r);
    r->mixture_ok = -1;
    r->orphan_blobs = -1;
    verify_ctx v = {.st = st, .url = url, .pin = pin, .r = r, .sealed_min = UINT64_MAX};
    /* the pin, judged exactly as `tandem run` judges it: a fault here is a run refused */
    if (!pin->ok) add_line(r, VERIFY_FAULT, 0, "%s", pin->problem ? pin->problem : "RUN is damaged");
    else add_line(r, VERIFY_OK, 0, "RUN (pinned config)");
    /* the config generation: states and α records of any other belong to a stale writer */
    tdm_err ge;
    if (audit_generation(st, &v.gens, &ge) && pin->ok) add_line(r, VERIFY_FAULT, 0, "%s", ge.msg);
    v.gen = v.gens.n;
    int rc = 0;
    /* the lease: a run replaces one that does not decode or fails its checksum (and says
     * so). One whose holder may be alive makes the windows every live run passes through
     * notes; audit_lease_read's own reads (HEAD, the newest α record) failing only leave
     * that unsaid, so that a damaged store is reported, not given up on (a review: one
     * read of the lease through audit_lease_read made such a store exit with the error) */
    tdm_err le;
    rec_lease l;
    int lr = ledger_read(st, REC_KIND_LEASE, LEDGER_LEASE, NULL, &l, &le);
    if (lr == STORE_CORRUPT) add_line(r, VERIFY_FAULT, 0, "%s (the next tandem run replaces it)", le.msg);
    else if (lr && lr != STORE_NOT_FOUND) rc = lr, *e = le;
    audit_lease al;
    if (!rc && lr == 0 && !l.released && audit_lease_read(st, &al, &le) == 0) v.live = al.state == AUDIT_LEASE_HELD;
    /* the pins of the run's inputs: a run writes a damaged one again from its dataset or
     * model folder (and says so), losing the comparison with what the run started from */
    if (!rc) {
        rec_data dd;
        rec_model md;
        const struct { rec_kind kind; const char *key; void *out; const char *from; } pins[] = {
            {REC_KIND_DATA, LEDGER_DATA, &dd, "dataset"}, {REC_KIND_MODEL, LEDGER_MODEL, &md, "model.init folder"}};
        for (size_t i = 0; !rc && i < sizeof pins / sizeof *pins; i++) {
            tdm_err pe;
            int pr = ledger_read(st, pins[i].kind, pins[i].key, NULL, pins[i].out, &pe);
            if (pr == STORE_CORRUPT)
                add_line(r, VERIFY_FAULT, 0, "%s (the next tandem run writes it again from today's %s, which it can "
                         "then no longer check against the one the run started with)", pe.msg, pins[i].from);
            else if (pr && pr != STORE_NOT_FOUND) rc = pr, *e = pe;
        }
    }
    /* diverged.mp: the run diverged (a note, not a fault: what to change is in it), or a
     * record that does not decode (a fault: status cannot say; repair sets it aside) */
    if (!rc) {
        rec_diverged dv;
        tdm_err de;
        int dr = ledger_read(st, REC_KIND_DIVERGED, LEDGER_DIVERGED, NULL, &dv, &de);
        if (dr == STORE_CORRUPT)
            add_line(r, VERIFY_FAULT, 0, "%s (tandem status cannot say whether the run diverged; tandem repair sets "
                     "it aside, the next tandem run removes it)", de.msg);
        else if (dr == 0)
            add_line(r, VERIFY_NOTE, 0, "%s: the run diverged at episode %llu (%s step, run position %llu; the state "
                     "at run position %llu stands): %s", LEDGER_DIVERGED, (unsigned long long)dv.episode, dv.step,
                     (unsigned long long)dv.seq, (unsigned long long)dv.state_seq, dv.message);
        else if (dr != STORE_NOT_FOUND) rc = dr, *e = de;
    }
    uint64_t *seqs = NULL;
    size_t ns = 0;
    if (!rc) rc = audit_state_seqs(st, &seqs, &ns, e);
    testhook_stop_at("audit"); /* frozen here by the tests: the states listed, none read */
    /* the seed the run's states were made with: when none was made with the pinned one,
     * RUN is the odd one out; otherwise a state of another seed is another run's */
    size_t seed_match = 0, seed_other = 0, run_match = 0, run_other = 0;
    uint64_t other_seed = 0;
    for (size_t i = 0; !rc && i < ns; i++) { /* the seeds, and where the states are sealed from */
        char key[64];
        ledger_state_key(key, sizeof key, seqs[i]);
        rec_state s;
        tdm_err de;
        if (ledger_read(st, REC_KIND_STATE, key, NULL, &s, &de) == 0) {
            if (s.has_gen && s.seq < v.sealed_min) v.sealed_min = s.seq;
            if (pin->have && s.seed == pin->seed) seed_match++;
            else if (pin->have) seed_other++, other_seed = s.seed;
            if (pin->has_run && s.seed == pin->seed) {
                if (s.has_run && !sha256_equal(&s.run, &pin->run)) run_other++;
                else run_match++;
            }
            rec_state_free(&s);
        }
    }
    v.run_seed_bad = pin->have && seed_other && !seed_match;
    v.run_identity_bad = !v.run_seed_bad && run_other && !run_match;
    if (v.run_identity_bad)
        add_line(r, VERIFY_FAULT, 0, "%s/RUN does not pin the config any of the states was computed under (the same "
                 "run.seed, another config): RUN is not this run's pin (another run's RUN, or a damaged one); restore "
                 "it from a copy of the store", url);
    if (v.run_seed_bad)
        add_line(r, VERIFY_FAULT, 0, "%s/RUN pins run.seed = %llu, but every state was made with seed %llu: RUN "
                 "is not this run's pin (another run's RUN, or a damaged one); restore it from a copy of the "
                 "store", url, (unsigned long long)pin->seed, (unsigned long long)other_seed);
    /* HEAD must name a state that is there and matches */
    rec_head h;
    rec_state hs;
    int have = 0;
    char hs_step[16] = "";
    uint64_t head_seq = 0;
    if (!rc) {
        tdm_err he;
        if (audit_head(st, &h, &hs, &have, &he)) {
            add_line(r, VERIFY_FAULT, 0, "%s", he.msg);
        } else if (have) {
            snprintf(hs_step, sizeof hs_step, "%s", hs.step);
            head_seq = h.seq;
            v.have_head = 1, v.head_seq = h.seq;
            rec_state_free(&hs);
        } else if (ns == 1 && v.live) { /* a first commit in flight: one state, HEAD next */
            add_line(r, VERIFY_NOTE, 0, "%s: HEAD is not there yet although states exist: a run holds the lease "
                     "(its first commit moves HEAD after its state)", url);
        } else if (ns) {
            add_line(r, VERIFY_FAULT, 0, "%s: HEAD is missing although states exist", url);
        } else {
            /* no state at all: a fault where a run cannot start again (run says the same) */
            char why[1200];
            if (audit_stranded(st, &v.gens, why, sizeof why)) add_line(r, VERIFY_FAULT, 0, "%s has %s", url, why);
        }
    }
    for (size_t i = 0; !rc && i < ns; i++) rc = check_state(&v, seqs[i], e);
    r->states = ns - r->vanished;
    if (!rc) rc = check_chain(&v, have, head_seq, have && !strcmp(hs_step, "done"), e);
    if (!rc) rc = check_metrics_rows(st, r, e);
    store_list bl;
    tdm_err be;
    int blr = rc ? 0 : store_list_prefix(st, LEDGER_BLOBS, &bl, &be);
    if (blr) /* orphans are a note, not a fault: said, not counted (--json: null) */
        add_line(r, VERIFY_NOTE, 0, "blobs/ could not be listed, orphan blobs not counted: %s", be.msg);
    if (!rc && !blr) {
        /* the blobs of states set aside under quarantine/ are gc's to keep, not orphans
         * (before: counted as such, which gc then did not remove) */
        size_t orphans = 0, kept = 0;
        tdm_err qe;
        digest_set qs = {0};
        int qok = retain_quarantined_refs(st, &qs, &qe) == 0;
        for (size_t i = 0; i < bl.n; i++) {
            sha256_digest d;
            if (!sha256_parse_hex(bl.keys[i] + 6, &d) && digest_set_has(&v.referenced, &d)) continue;
            if (qok && digest_set_has(&qs, &d)) kept++;
            else orphans++;
        }
        digest_set_free(&qs);
        r->orphan_blobs = (long)orphans;
        if (orphans)
            add_line(r, VERIFY_NOTE, 0, "%zu orphan blobs (no manifest references them; tandem gc removes them)",
                     orphans);
        if (kept)
            add_line(r, VERIFY_NOTE, 0, "%zu blobs of states set aside under quarantine/ (kept by gc, so that "
                     "those copies can still be loaded)", kept);
        store_list_free(&bl);
    }
    /* a pin of a state that is not there: gc keeps every unreferenced blob while it is (a
     * gc may be putting that state back), so it is said here, where a user looks */
    store_list pl;
    tdm_err pe;
    if (!rc && store_list_prefix(st, LEDGER_PINS, &pl, &pe) == 0) {
        for (size_t i = 0; i < pl.n; i++) {
            uint64_t p;
            int listed = 0;
            if (ledger_key_index(pl.keys[i], LEDGER_PINS, &p)) continue;
            for (size_t k = 0; k < ns && !listed; k++) listed = seqs[k] == p;
            if (!listed)
                add_line(r, VERIFY_NOTE, 0, "%s pins states/%llu.mp, which is not there: gc deletes no unreferenced "
                         "blob while it does; if that state is gone for good, tandem pin STORE %llu --remove",
                         pl.keys[i], (unsigned long long)p, (unsigned long long)p);
        }
        store_list_free(&pl);
    }
    r->blobs = v.good.n;
    free(v.vouches);
    free(seqs);
    digest_set_free(&v.good);
    digest_set_free(&v.referenced);
    ckpt_gens_free(&v.gens);
    return rc;
}
