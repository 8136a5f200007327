/* audit.c — reading a run's history; see audit.h. */
#include "ledger/audit.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ledger/keys.h"
#include "ledger/read.h"
#include "util/pidns.h"
#include "util/term.h"

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int list_indices(store *st, const char *prefix, uint64_t **out, size_t *n, tdm_err *e) {
    store_list l;
    int rc = store_list_prefix(st, prefix, &l, e);
    if (rc) return rc;
    uint64_t *v = calloc(l.n ? l.n : 1, sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < l.n; i++)
        if (ledger_key_index(l.keys[i], prefix, &v[k]) == 0) k++;
    store_list_free(&l);
    if (!v) return err_set(e, ERR_INTERNAL, "out of memory");
    qsort(v, k, sizeof *v, cmp_u64);
    *out = v;
    *n = k;
    return 0;
}

int audit_stranded(store *st, const ckpt_gens *g, char *why, size_t cap) {
    uint64_t at = ckpt_gens_newest(g);
    if (at == 0) return 0;
    size_t aside = 0;
    char last[STORE_KEY_MAX + 1] = "";
    store_list l;
    tdm_err le;
    if (store_list_prefix(st, LEDGER_QUARANTINE, &l, &le) == 0) {
        for (size_t i = 0; i < l.n; i++) {
            const char *s = strstr(l.keys[i], "/" LEDGER_STATES);
            if (!s || strchr(s + 1 + strlen(LEDGER_STATES), '/')) continue;
            aside++;
            snprintf(last, sizeof last, "%s", l.keys[i]);
        }
        store_list_free(&l);
    }
    char more[STORE_KEY_MAX + 300] = "";
    if (aside)
        snprintf(more, sizeof more, "; quarantine/ holds %zu set-aside state manifest%s (%s%s): one that "
                 "verifies, moved back to states/ with its name, is resumed from", aside, aside == 1 ? "" : "s",
                 aside == 1 ? "" : "e.g. ", last);
    snprintf(why, cap, "no state left, but its config was changed at run position %llu (configs/ "
             "records %llu changes): the run cannot be started again from its seed, which would compute all of "
             "it under today's config. Restore states/ and HEAD from a copy of the store (then check with "
             "tandem verify), or start the run anew in another store%s", (unsigned long long)at,
             (unsigned long long)g->n, more);
    return 1;
}

int audit_store_stranded(store *st, char *why, size_t cap) {
    uint64_t *seqs = NULL;
    size_t ns = 0;
    tdm_err ge;
    int none = audit_state_seqs(st, &seqs, &ns, &ge) == 0 && ns == 0;
    free(seqs);
    ckpt_gens g;
    memset(&g, 0, sizeof g);
    int r = none && audit_generation(st, &g, &ge) == 0 && audit_stranded(st, &g, why, cap);
    ckpt_gens_free(&g);
    return r;
}

int audit_generation(store *st, ckpt_gens *g, tdm_err *e) {
    memset(g, 0, sizeof *g);
    for (uint64_t k = 0;; k++) {
        char key[64];
        ledger_config_key(key, sizeof key, k);
        void *data = NULL;
        size_t n = 0;
        int rc = store_get(st, key, &data, &n, NULL, e);
        if (rc == STORE_NOT_FOUND) return 0;
        if (rc) return rc;
        rec_change ch;
        char what[600];
        snprintf(what, sizeof what, "%s/%s", store_url(st), key);
        rc = rec_change_decode(data, n, what, &ch, e);
        free(data);
        if (rc) return rc;
        uint64_t seq = ch.seq;
        rec_change_free(&ch);
        if (ckpt_gens_add(g, seq)) return err_set(e, ERR_INTERNAL, "out of memory");
    }
}

void audit_mixture(const audit_chain *chain, double fraction, rec_mixture *x) {
    size_t n = chain->n;
    size_t k = (size_t)ceil(fraction * (double)n);
    if (k < 1) k = 1;
    if (k > n) k = n;
    memset(x, 0, sizeof *x);
    x->M = n ? chain->rec[0].M : 0;
    x->first = n - k;
    x->last = n ? n - 1 : 0;
    for (size_t t = n - k; t < n; t++)
        for (int m = 0; m < x->M; m++) x->alpha[m] += chain->rec[t].alpha_next[m] / (double)k;
    /* k shares of a weight held at 1 can add up past it (k = 9: 1.0000000000000002), and
     * mixture.mp's own check then refused the run's α*: verify said damaged, compare and
     * data.mixture_file = STORE exit 3 (a hunt of odd configs). Only such a sum moves. */
    for (int m = 0; m < x->M; m++)
        if (x->alpha[m] > 1) x->alpha[m] = 1;
}

int audit_state_seqs(store *st, uint64_t **seqs, size_t *n, tdm_err *e) {
    return list_indices(st, LEDGER_STATES, seqs, n, e);
}

int audit_metrics_gaps(store *st, audit_gap *gaps, size_t cap, size_t *n, tdm_err *e) {
    *n = 0;
    uint64_t *ts;
    size_t nt;
    int rc = list_indices(st, LEDGER_METRICS, &ts, &nt, e);
    if (rc) return rc == STORE_NOT_FOUND ? 0 : rc;
    for (size_t i = 0; i < nt && *n < cap; i++) {
        uint64_t want = i ? ts[i - 1] + 1 : 0;
        if (ts[i] > want) gaps[(*n)++] = (audit_gap){want, ts[i] - 1};
    }
    uint64_t newest = nt ? ts[nt - 1] : 0;
    free(ts);
    /* the rows at the end, past the newest listed: every episode HEAD's state has finished
     * has its row (a run writes it before any state after the episode is committed,
     * metrics.h), so those missing up to there were deleted or are not files (a FIFO, a
     * directory: the listing shows regular files only). None listed: a run of a tandem
     * from before metrics rows, said as such by the commands. A HEAD or state that cannot
     * be read is verify's own fault to report, not a gap. */
    if (!nt || *n >= cap) return 0;
    rec_head h;
    tdm_err he;
    rc = ledger_read(st, REC_KIND_HEAD, LEDGER_HEAD, NULL, &h, &he);
    rec_state sr;
    if (!rc) rc = ledger_read(st, REC_KIND_STATE, h.state, NULL, &sr, &he);
    if (rc == STORE_NOT_FOUND || rc == STORE_CORRUPT) return 0;
    if (rc) {
        *e = he;
        return rc;
    }
    uint64_t finished = sr.episode; /* episodes before the state's next step */
    rec_state_free(&sr);
    if (finished > newest + 1) gaps[(*n)++] = (audit_gap){newest + 1, finished - 1};
    return 0;
}

void audit_chain_free(audit_chain *c) {
    free(c->rec);
    free(c->hash);
    memset(c, 0, sizeof *c);
}

/* Whether v[0..M) is a mixture: entries >= 0 summing to 1 within 1e-6. */
static int on_simplex(const double *v, int M) {
    double s = 0;
    for (int m = 0; m < M; m++) {
        if (!(v[m] >= 0)) return 0;
        s += v[m];
    }
    return fabs(s - 1) <= 1e-6;
}

void audit_chain_domains(audit_chain *c, int M) {
    if (!c->ok || !c->n || M <= 0 || c->rec[0].M == M) return;
    c->ok = 0;
    c->bad = 0;
    snprintf(c->problem, sizeof c->problem, "alpha/0.mp holds %d domains but RUN pins %d (damaged or edited "
             "records, or another run's)", c->rec[0].M, M);
}

int audit_chain_read(store *st, audit_chain *c, tdm_err *e) {
    memset(c, 0, sizeof *c);
    uint64_t *ts;
    size_t nt;
    int rc = list_indices(st, LEDGER_ALPHA, &ts, &nt, e);
    if (rc) return rc;
    c->rec = calloc(nt ? nt : 1, sizeof *c->rec);
    c->hash = calloc(nt ? nt : 1, sizeof *c->hash);
    if (!c->rec || !c->hash) {
        free(ts);
        audit_chain_free(c);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    c->ok = 1;
    /* read CHAIN_WINDOW records at a time, side by side (store_get_many), and judged in
     * order as before: the reads past a record that ends the chain are dropped */
    enum { CHAIN_WINDOW = 64 };
    char keys[CHAIN_WINDOW][64];
    store_got *got = calloc(CHAIN_WINDOW, sizeof *got);
    if (!got) rc = err_set(e, ERR_INTERNAL, "out of memory");
    size_t have = 0, from = 0; /* got[0..have) holds records from, from + 1, ... */
    for (size_t i = 0; !rc && i < nt && c->ok; i++) {
        if (i == from + have) {
            for (size_t k = 0; k < have; k++) free(got[k].data);
            from = i, have = nt - i < CHAIN_WINDOW ? nt - i : CHAIN_WINDOW;
            for (size_t k = 0; k < have; k++) {
                /* read even when the listing lacks it: something that is no object (a
                 * directory, a FIFO) in a record's place is not listed, and is said as the
                 * run says it */
                ledger_alpha_key(keys[k], sizeof keys[k], from + k);
                got[k].key = keys[k];
            }
            store_get_many(st, got, have);
        }
        store_got *g = &got[i - from];
        const char *key = g->key;
        void *data = g->data;
        size_t n = g->n;
        g->data = NULL; /* freed below, as it is judged */
        rc = g->rc;
        if (rc && rc != STORE_NOT_FOUND) *e = g->err;
        if (rc == STORE_NOT_FOUND) {
            c->ok = 0, c->bad = i;
            if (ts[i] != i)
                snprintf(c->problem, sizeof c->problem, "%s is missing (the chain has records up to alpha/%llu.mp)",
                         key, (unsigned long long)ts[nt - 1]);
            else
                snprintf(c->problem, sizeof c->problem, "%s is missing", key);
            rc = 0;
            break;
        }
        if (rc) break;
        tdm_err de;
        rec_alpha *a = &c->rec[i];
        if (rec_alpha_decode(data, n, key, a, &de)) {
            c->ok = 0, c->bad = i;
            snprintf(c->problem, sizeof c->problem, "%.1000s", de.msg);
        }
        free(data);
        if (!c->ok) break;
        rec_alpha_hash(a, &c->hash[i]);
        sha256_digest zero = {{0}};
        const sha256_digest *want = i ? &c->hash[i - 1] : &zero;
        if (a->t != i) {
            c->ok = 0, c->bad = i;
            snprintf(c->problem, sizeof c->problem, "%s claims to be episode %llu", key,
                     (unsigned long long)a->t);
        } else if (!sha256_equal(&a->prev, want)) {
            c->ok = 0, c->bad = i ? i - 1 : 0;
            snprintf(c->problem, sizeof c->problem,
                     i ? "alpha/%zu.mp was altered: its hash is not the one alpha/%zu.mp links to"
                       : "alpha/%zu.mp was altered: the first record must link to zeros (record %zu)",
                     i ? i - 1 : 0, i);
        } else if (i && c->rec[i - 1].has_gen && !a->has_gen) {
            /* a run that seals its records seals every later one (a store begun before
             * records were sealed has none sealed before): one without, after a sealed
             * one, lost its seal to damage or an edit, and nothing vouches for it */
            c->ok = 0, c->bad = i;
            snprintf(c->problem, sizeof c->problem, "%s has no seal (gen, self) although alpha/%zu.mp before it "
                     "has one: damaged or edited", key, i - 1);
        } else if (!on_simplex(a->alpha, a->M) || !on_simplex(a->alpha_next, a->M)) {
            /* every α a run writes sums to 1 (to rounding): one that does not was edited */
            c->ok = 0, c->bad = i;
            snprintf(c->problem, sizeof c->problem, "%s holds weights that do not sum to 1 (damaged or edited)",
                     key);
        } else if (i && (a->M != c->rec[i - 1].M ||
                         memcmp(a->alpha, c->rec[i - 1].alpha_next, (size_t)a->M * sizeof(double)))) {
            c->ok = 0, c->bad = i;
            snprintf(c->problem, sizeof c->problem,
                     "%s starts from another alpha than alpha/%zu.mp ended with", key, i - 1);
        }
        if (c->ok) c->n = i + 1;
    }
    for (size_t k = 0; got && k < have; k++) free(got[k].data);
    free(got);
    free(ts);
    if (!rc && c->ok) {
        /* the record after the listed ones: a directory or a FIFO in its place is no
         * object, unlisted, but a run that reaches it stops there — said here too */
        char key[64];
        ledger_alpha_key(key, sizeof key, nt);
        void *data = NULL;
        size_t n = 0;
        rc = store_get(st, key, &data, &n, NULL, e);
        free(data);
        if (rc == STORE_NOT_FOUND || rc == 0) rc = 0; /* absent, or written since the listing */
    }
    if (rc) audit_chain_free(c); /* an error leaves nothing to free (callers free a chain read) */
    return rc;
}

/* audit_head_damage, and in *named whether the damage is in what HEAD names (a state
 * missing, or not the bytes HEAD vouches for) rather than in a record's own decoding:
 * audit_head says those with the store's URL in front, as its callers always did. */
static int head_read(store *st, rec_head *head, rec_state *state, int *have, char *damage, size_t cap, int *named,
                     tdm_err *e) {
    *have = 0, *named = 0;
    damage[0] = '\0';
    memset(state, 0, sizeof *state);
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(st, LEDGER_HEAD, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND) return 0;
    if (rc) return rc;
    tdm_err de;
    rc = rec_head_decode(data, n, LEDGER_HEAD, head, &de);
    unsigned long long newer = rc ? rec_format_newer(data, n) : 0;
    free(data);
    /* a newer tandem's is no damage: the resume refuses it, nothing changed (a review) */
    if (newer) return err_set(e, ERR_STORE, "%s", de.msg);
    if (rc) return memset(head, 0, sizeof *head), snprintf(damage, cap, "%s", de.msg), 0;
    rc = store_get(st, head->state, &data, &n, NULL, e);
    *named = 1;
    if (rc == STORE_NOT_FOUND) return snprintf(damage, cap, "HEAD names %s, which is missing", head->state), 0;
    if (rc) return rc;
    sha256_digest d;
    sha256(data, n, &d);
    if (!sha256_equal(&d, &head->state_sha)) {
        free(data);
        return snprintf(damage, cap, "%s does not match the SHA-256 in HEAD", head->state), 0;
    }
    *named = 0;
    rc = rec_state_decode(data, n, head->state, state, &de);
    newer = rc ? rec_format_newer(data, n) : 0;
    free(data);
    if (newer) /* the state HEAD vouches for, of a newer tandem: the resume refuses (nothing changed) */
        return err_set(e, ERR_STORE, "%s/%s was written by a newer tandem (record format %llu; this one reads %d): run "
                       "the newer tandem on this store", store_url(st), head->state, newer, REC_FORMAT_MAX);
    if (rc) return snprintf(damage, cap, "%s", de.msg), 0;
    *have = 1;
    return 0;
}

int audit_head_damage(store *st, rec_head *head, rec_state *state, int *have, char *damage, size_t cap,
                      tdm_err *e) {
    int named;
    return head_read(st, head, state, have, damage, cap, &named, e);
}

int audit_head(store *st, rec_head *head, rec_state *state, int *have, tdm_err *e) {
    char damage[1200];
    int named;
    int rc = head_read(st, head, state, have, damage, sizeof damage, &named, e);
    if (!rc && damage[0])
        return named ? err_set(e, ERR_STORE, "%s: %s", store_url(st), damage) : err_set(e, ERR_STORE, "%s", damage);
    return rc;
}

int audit_newest_listed(store *st, uint64_t seed, const sha256_digest *run, const rec_head *head, rec_state *state,
                        char *key, size_t cap, size_t *listed, int *have, tdm_err *e) {
    *have = 0, *listed = 0;
    memset(state, 0, sizeof *state);
    uint64_t *seqs = NULL;
    size_t ns = 0;
    int rc = list_indices(st, LEDGER_STATES, &seqs, &ns, e);
    if (rc) return rc;
    *listed = ns;
    for (size_t i = ns; !rc && !*have && i-- > 0;) { /* newest first */
        ledger_state_key(key, cap, seqs[i]);
        void *data = NULL;
        size_t n = 0;
        tdm_err de;
        rc = store_get(st, key, &data, &n, NULL, e);
        if (rc == STORE_NOT_FOUND) { /* deleted since the listing (retention) */
            rc = 0;
            continue;
        }
        sha256_digest d;
        if (!rc && head && head->state[0] && !strcmp(head->state, key)) {
            /* HEAD's state whose bytes are not those HEAD records: the resume sets it aside */
            sha256(data, n, &d);
            if (!sha256_equal(&d, &head->state_sha)) {
                free(data);
                continue;
            }
        }
        if (!rc && rec_state_decode(data, n, key, state, &de) == 0) {
            /* another run's (copied in) is passed over, as the resume passes it over */
            if (state->seed == seed && !(run && state->has_run && !sha256_equal(&state->run, run))) *have = 1;
            else rec_state_free(state);
        }
        free(data);
    }
    free(seqs);
    if (!*have) key[0] = '\0';
    return rc;
}

void audit_time(double t, char *out, size_t cap) {
    struct tm tm;
    /* a stored time is the writer's word: NaN, Inf or past time_t is "-", never cast */
    if (!(t > 0 && t < 253402300800.0)) { /* year 10000 */
        snprintf(out, cap, "-");
        return;
    }
    time_t s = (time_t)t;
    if (!gmtime_r(&s, &tm)) {
        snprintf(out, cap, "-");
        return;
    }
    strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

void audit_duration(double s, char *out, size_t cap) {
    if (!(s >= 0)) s = 0;
    unsigned long long t = (unsigned long long)s;
    if (t < 60) snprintf(out, cap, "%llus", t);
    else if (t < 3600) snprintf(out, cap, "%llum%02llus", t / 60, t % 60);
    else if (t < 86400) snprintf(out, cap, "%lluh%02llum", t / 3600, t / 60 % 60);
    else snprintf(out, cap, "%llud%02lluh", t / 86400, t / 3600 % 24);
}

/* This machine's boot time (unix seconds, /proc/stat's btime); 0 when it cannot be read. */
static double proc_btime(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    char buf[256];
    unsigned long long btime = 0;
    int found = 0;
    while (!found && fgets(buf, sizeof buf, f)) found = sscanf(buf, "btime %llu", &btime) == 1;
    fclose(f);
    return found ? (double)btime : 0;
}

/* The wall-clock start time of process pid (the boot time plus its start in clock ticks),
 * and its command name; for a lease that does not record its holder's start ticks. 0, or
 * -1 when it cannot be read. */
static int process_start(unsigned long long pid, double *start, char *comm, size_t cap) {
    uint64_t ticks;
    if (pid > (unsigned long long)INT32_MAX || pidns_start_ticks((long)pid, &ticks, comm, cap)) return -1;
    double btime = proc_btime();
    long hz = sysconf(_SC_CLK_TCK);
    if (!(btime > 0) || hz <= 0) return -1;
    *start = btime + (double)ticks / (double)hz;
    return 0;
}

/* This machine's boot time as a lease's judge takes it (TANDEM_TEST_BOOT_TIME for the
 * tests: a boot after every sign of life of a test's store); 0 when unknown. */
static double boot_time(void) {
    const char *t = getenv("TANDEM_TEST_BOOT_TIME");
    return t && *t ? atof(t) : proc_btime();
}

/* The time of the newest α record (its meta time), or 0 when there is none; its key into
 * key (64 bytes; "" when none). */
static int newest_alpha_time(store *st, double *t, char *key, tdm_err *e) {
    uint64_t *ts;
    size_t nt;
    *t = 0;
    key[0] = '\0';
    int rc = list_indices(st, LEDGER_ALPHA, &ts, &nt, e);
    if (rc) return rc;
    if (nt) {
        ledger_alpha_key(key, 64, ts[nt - 1]);
        void *data = NULL;
        size_t n = 0;
        rec_alpha a;
        tdm_err de;
        rc = store_get(st, key, &data, &n, NULL, e);
        if (rc == STORE_NOT_FOUND) rc = 0;
        else if (rc == 0 && rec_alpha_decode(data, n, key, &a, &de) == 0) *t = a.time;
        free(data);
    }
    free(ts);
    return rc;
}

double audit_settle_left(const rec_lease *l, double lease_age, double now) {
    if (!l->has_settle) return 0;
    double at_release = l->settle_until - l->time;
    if (lease_age >= 0 && isfinite(at_release)) return at_release - lease_age + 1;
    return l->settle_until - now;
}

int audit_lease_read(store *st, audit_lease *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(st, LEDGER_LEASE, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND) return 0;
    if (rc) return rc;
    tdm_err de;
    int bad = rec_lease_decode(data, n, LEDGER_LEASE, &out->lease, &de);
    free(data);
    data = NULL;
    if (bad) { /* an undecodable lease fences nobody: the next run replaces it */
        out->damaged = 1;
        snprintf(out->why, sizeof out->why, "%.255s", de.msg);
        return 0;
    }
    const rec_lease *l = &out->lease;
    if (l->released) {
        out->state = AUDIT_LEASE_RELEASED;
        return 0;
    }
    /* the holder's last sign of life: it took the lease, moved HEAD, wrote α records */
    /* (a time that is not finite is no sign of life: an Inf would keep the lease "held"
     * forever, a NaN would compare false everywhere) */
    out->life = isfinite(l->time) ? l->time : 0;
    rec_head h;
    rc = store_get(st, LEDGER_HEAD, &data, &n, NULL, e);
    if (rc == 0 && rec_head_decode(data, n, LEDGER_HEAD, &h, &de) == 0 && isfinite(h.time) && h.time > out->life)
        out->life = h.time;
    free(data);
    if (rc && rc != STORE_NOT_FOUND) return rc;
    double at = 0;
    char akey[64];
    if ((rc = newest_alpha_time(st, &at, akey, e))) return rc;
    if (isfinite(at) && at > out->life) out->life = at;
    double now = (double)time(NULL);
    out->age = now > out->life ? now - out->life : 0;
    /* the same signs of life on the store's own clock (store_age: when the lease, HEAD and
     * that record were last written): a holder whose machine's clock is behind this one's
     * stamps times that read as old, and the younger of the two ages is believed (a clock
     * hunt: a live writer 25 h behind read "no sign of life for 1d01h", and gc collected
     * beside it; a copied store, its files new, reads as recently alive: the safe side) */
    const char *signs[] = {LEDGER_LEASE, LEDGER_HEAD, akey};
    for (size_t i = 0; i < sizeof signs / sizeof *signs; i++) {
        double sa;
        tdm_err ae;
        if (signs[i][0] && store_age(st, signs[i], &sa, &ae) == 0 && sa < out->age) {
            out->age = sa;
            out->life = now - sa;
        }
    }
    char host[256] = "";
    gethostname(host, sizeof host);
    host[REC_NAME_MAX - 1] = '\0'; /* as the writer recorded its name (ckpt.c) */
    out->state = AUDIT_LEASE_HELD;
    char age[32];
    audit_duration(out->age, age, sizeof age);
    int alive_here = 0;
    /* the pid is judged only where it means what it meant to the holder: in its PID
     * namespace, on its boot (a lease written before these were recorded: as before, on
     * its host name alone). From another namespace on the same host name (a container
     * sharing the node's name) a live holder's pid does not exist or is another process:
     * judged as on another host, by its last sign of life */
    pidns_id me, holder = {.has_ns = l->has_pid_ns, .ns = l->pid_ns, .has_boot = l->has_boot_id};
    snprintf(holder.boot, sizeof holder.boot, "%s", l->boot_id);
    pidns_self(&me);
    int old_lease = !l->has_pid_ns && !l->has_boot_id;
    int same_host = strcmp(host, l->host) == 0;
    /* the holder's host name as the reasons below show it: the store's text, its control
     * characters as '?' (printed to a terminal and logs; util/term.h) */
    char lhost[64];
    term_copy(lhost, sizeof lhost, l->host);
    double booted = boot_time();
    if (same_host && l->has_boot_id && me.has_boot && strcmp(me.boot, l->boot_id) != 0 && booted > 0 &&
        out->life + 5 < booted) {
        /* this machine has booted since the holder's last sign of life: it is gone (5 s:
         * the boot time is in whole seconds). A node that crashed and came back, common on
         * Slurm, read as "held" for 24 h and gc refused */
        out->state = AUDIT_LEASE_STALE;
        snprintf(out->why, sizeof out->why, "this host (%s) has booted again since the holder's last sign of "
                 "life %s ago (pid %llu of an earlier boot)", lhost, age, (unsigned long long)l->pid);
    } else if (same_host && !old_lease && !pidns_same(&me, &holder)) {
        const char *other = !l->has_pid_ns || !me.has_ns || !l->has_boot_id || !me.has_boot
                                ? "a PID namespace or boot not comparable with this one"
                            : strcmp(me.boot, l->boot_id) != 0 ? "an earlier boot (or another machine of that name)"
                                                               : "another PID namespace";
        snprintf(out->why, sizeof out->why, "held from %s on host %s (pid %llu there, not "
                 "judged from here), last sign of life %s ago", other, lhost,
                 (unsigned long long)l->pid, age);
    } else if (same_host) {
        double start;
        uint64_t ticks;
        char comm[64];
        int gone = l->pid == 0 || l->pid > (unsigned long long)INT32_MAX ||
                   (kill((pid_t)l->pid, 0) != 0 && errno == ESRCH);
        if (gone) {
            out->state = AUDIT_LEASE_STALE;
            snprintf(out->why, sizeof out->why, "no process %llu on this host",
                     (unsigned long long)l->pid);
        } else if (l->has_start && pidns_start_ticks((long)l->pid, &ticks, comm, sizeof comm) == 0 &&
                   ticks != l->start_ticks) {
            /* the same boot (pidns_same above): another start is another process */
            out->state = AUDIT_LEASE_STALE;
            snprintf(out->why, sizeof out->why,
                     "pid %llu on this host is now another process (%.32s, started at another moment than the "
                     "holder)", (unsigned long long)l->pid, comm);
        } else if (!l->has_start && process_start(l->pid, &start, comm, sizeof comm) == 0 && start > l->time + 5) {
            /* 5 s: the boot time is in whole seconds and may drift with the clock */
            out->state = AUDIT_LEASE_STALE;
            snprintf(out->why, sizeof out->why,
                     "pid %llu on this host is now another process (%.32s, started after the "
                     "lease was taken)", (unsigned long long)l->pid, comm);
        } else {
            alive_here = 1; /* alive (maybe stopped): never stale, however old */
            snprintf(out->why, sizeof out->why, "pid %llu is alive on this host, last sign of "
                     "life %s ago", (unsigned long long)l->pid, age);
        }
    } else {
        snprintf(out->why, sizeof out->why, "held from host %s (this is %.63s), last sign of life "
                 "%s ago", lhost, host, age);
    }
    if (out->state == AUDIT_LEASE_HELD && !alive_here && out->age > AUDIT_LEASE_STALE_AGE_S) {
        out->state = AUDIT_LEASE_STALE;
        snprintf(out->why, sizeof out->why,
                 "no sign of life from host %s for %s (no lease, HEAD or alpha record written "
                 "since; the limit is 24h)", lhost, age);
    }
    return 0;
}

int audit_head_digest(store *st, sha256_digest *d, tdm_err *e) {
    memset(d, 0, sizeof *d);
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(st, LEDGER_HEAD, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND) return 0;
    if (!rc) sha256(data, n, d);
    free(data);
    return rc;
}
