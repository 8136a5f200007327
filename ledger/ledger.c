/* ledger.c — the front door of a run's checkpointing; see ledger.h. The order of a resume
 * and the grace policy live here; ckpt*.c do each step. */
#include "ledger/ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/audit.h"
#include "ledger/keys.h"
#include "ledger/metrics.h"
#include "ledger/read.h"
#include "util/testhook.h"
#include "util/urltext.h"

struct ledger {
    store *st;
    ckpt *ck;
    ckpt_tensor_io io;
    float *dev[CKPT_TENSORS];
    size_t numel;
    long every_episodes;
    double every_seconds, grace;
    uint64_t episodes;
    const volatile sig_atomic_t *stop_flag;
    const struct timespec *stop_at;
    struct {
        uint64_t nchanges, change_seq; /* the run's config changes, where the newest took effect */
    } gen;
    int found; /* ledger_resume found a state (its tensors are in the host buffers) */
};

/* Headroom on the estimate (a commit can be slower than the last one), time kept for
 * releasing the lease and exiting, and the most a stop waits for a first commit in flight
 * to show its pace. */
#define LEDGER_GRACE_SAFETY 1.5
#define LEDGER_GRACE_MARGIN_S 2.0
#define LEDGER_GRACE_PACE_S 5.0

static double now_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds since the first stop signal; 0 when none came. */
static double since_stop(const ledger *l) {
    const struct timespec *at = l->stop_at;
    if (!at || (!at->tv_sec && !at->tv_nsec)) return 0;
    return now_mono() - (at->tv_sec + at->tv_nsec * 1e-9);
}

/* The stop check of a commit the run waits for (a streamed one; any one while it waits
 * for a late DELETE of its key): once a stop signal has come, a commit whose rest would
 * outlast the grace period (with ledger_stop's headroom) is given up, so that the run still
 * exits 75 in time, the lease given back, instead of being killed in the middle of it.
 * Without a known grace period a stop always commits. */
static int stream_stop_check(void *arg, double seconds_left) {
    const ledger *l = arg;
    if (!l->stop_flag || !*l->stop_flag || l->grace <= 0) return 0;
    return seconds_left * LEDGER_GRACE_SAFETY > l->grace - since_stop(l) - LEDGER_GRACE_MARGIN_S;
}

ledger *ledger_open(store *st, const ledger_opts *o, tdm_err *e) {
    ledger *l = calloc(1, sizeof *l);
    if (!l) {
        err_set(e, ERR_INTERNAL, "out of memory");
        return NULL;
    }
    l->st = st;
    l->io = *o->io;
    memcpy(l->dev, o->dev, sizeof l->dev);
    l->numel = o->layout->numel;
    l->every_episodes = o->every_episodes;
    l->every_seconds = o->every_seconds;
    l->episodes = o->episodes;
    l->grace = o->grace_s;
    l->stop_flag = o->stop_flag;
    l->stop_at = o->stop_at;
    l->ck = o->streaming ? ckpt_open_stream(st, o->layout, o->chunk_bytes, &l->io, l->dev, e)
                         : ckpt_open(st, o->layout, o->chunk_bytes, e);
    if (!l->ck) {
        free(l);
        return NULL;
    }
    if (ckpt_acquire(l->ck, o->attempt, e)) {
        /* the lease written, the HEAD stamp failed: given back, or the next start reads
         * it as a writer's that did not release it */
        tdm_err ignore;
        if (ckpt_epoch(l->ck) != 0) ckpt_release(l->ck, &ignore);
        ckpt_close(l->ck);
        free(l);
        return NULL;
    }
    ckpt_set_retention(l->ck, o->keep);
    ckpt_set_seed(l->ck, o->seed);
    ckpt_set_run(l->ck, o->run);
    ckpt_set_stop_check(l->ck, stream_stop_check, l);
    return l;
}

void ledger_close(ledger *l, int failed) {
    if (!l) return;
    tdm_err ignore;
    ckpt_wait(l->ck, &ignore);
    if (failed && ckpt_epoch(l->ck)) ckpt_release(l->ck, &ignore);
    ckpt_close(l->ck);
    free(l);
}

int ledger_check_lease(ledger *l, tdm_err *e) { return ckpt_check_lease(l->ck, e); }

int ledger_resume(ledger *l, const ckpt_gens *g, rec_state *rec, ledger_resumed *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    l->gen.nchanges = g->n;
    l->gen.change_seq = ckpt_gens_newest(g);
    int rc = ckpt_set_generation(l->ck, g, e);
    if (rc) return rc;
    int found = 0;
    rc = ckpt_load(l->ck, rec, &found, e);
    if (rc) return rc;
    out->found = l->found = found;
    out->seed_replay = ckpt_seed_replay(l->ck);
    out->head_named = found && ckpt_head_named_loaded(l->ck);
    if (!found) return 0;
    rc = ckpt_check_chain(l->ck, rec->alpha_records, &rec->alpha_head, e);
    if (!rc) rc = ckpt_report_alpha_holes(l->ck, rec->alpha_records, l->episodes, e);
    if (rc) rec_state_free(rec);
    return rc;
}

float *ledger_host(ledger *l) { return ckpt_host(l->ck, 0); }

/* A divergence recorded by an earlier writer (diverged.mp) is no longer the latest word once
 * a run starts again from the store: removed under the lease, said on stderr. A record
 * that does not decode goes the same way. */
static int clear_divergence(ledger *l, tdm_err *e) {
    rec_diverged d;
    tdm_err de;
    int got = ledger_read(l->st, REC_KIND_DIVERGED, LEDGER_DIVERGED, NULL, &d, &de);
    if (got == STORE_NOT_FOUND) return 0;
    if (got && got != STORE_CORRUPT) return *e = de, got;
    int rc = ckpt_check_lease(l->ck, e);
    if (!rc) rc = store_delete(l->st, LEDGER_DIVERGED, e);
    if (rc == STORE_NOT_FOUND) rc = 0;
    if (rc) return rc;
    if (got == 0)
        fprintf(stderr, "tandem: the divergence recorded at episode %llu (%s step, run position %llu) is cleared "
                "from %s/%s: the run goes on\n", (unsigned long long)d.episode, d.step,
                (unsigned long long)d.seq, store_url(l->st), LEDGER_DIVERGED);
    else
        fprintf(stderr, "tandem: %s; removed (a run goes on)\n", de.msg);
    return 0;
}

/* Deletes states/<seq>.mp for every seq > after: the old trajectory's states after a
 * config change. The lease is checked before each deletion, so that a writer taken over
 * meanwhile deletes nothing: the writer that took over may have recorded a further change and committed states of its own
 * exactly here. A state of a newer generation than this writer's fences it out even where
 * its check came too early to see the new lease (only a writer that recorded a further
 * change computes one). A manifest that does not decode is deleted as before: it belongs to
 * no trajectory the run can resume. */
static int drop_states_after(ledger *l, uint64_t after, tdm_err *e) {
    store_list sl;
    int rc = store_list_prefix(l->st, LEDGER_STATES, &sl, e);
    for (size_t i = 0; !rc && i < sl.n; i++) {
        uint64_t s;
        if (ledger_key_index(sl.keys[i], LEDGER_STATES, &s) != 0 || s <= after) continue;
        rec_state st;
        tdm_err de;
        int got = ledger_read(l->st, REC_KIND_STATE, sl.keys[i], NULL, &st, &de);
        if (got == STORE_NOT_FOUND) continue;
        if (got == 0) {
            int newer = st.has_gen && st.gen > l->gen.nchanges;
            uint64_t gen = st.gen;
            rec_state_free(&st);
            if (newer) {
                rc = err_set(e, ERR_STORE,
                             "%s/%s was computed under config generation %llu, newer than this writer's (%llu): "
                             "another writer has taken the run over with a changed config, so this one is fenced "
                             "out and stops without writing more",
                             store_url(l->st), sl.keys[i], (unsigned long long)gen,
                             (unsigned long long)l->gen.nchanges);
                break;
            }
        } else if (got != STORE_CORRUPT) {
            rc = got, *e = de;
            break;
        }
        rc = ckpt_check_lease(l->ck, e);
        /* the replay under the new config writes these keys again (ckpt_announce_deletes) */
        if (!rc) rc = ckpt_announce_deletes(l->ck, LEDGER_STATES, e);
        if (!rc) rc = store_delete(l->st, sl.keys[i], e);
        if (rc == STORE_NOT_FOUND) rc = 0;
    }
    store_list_free(&sl);
    ckpt_announce_settled(l->ck);
    return rc;
}

int ledger_start(ledger *l, uint64_t seq, tdm_err *e) {
    int rc = 0;
    if (l->found) {
        /* HEAD names the state the run goes on from (a finished run commits no more) */
        rc = ckpt_settle_head(l->ck, e);
        /* streaming: the load wrote the tensors already */
        for (int t = 0; !rc && !ckpt_streaming(l->ck) && t < CKPT_TENSORS; t++)
            rc = l->io.upload(l->io.ctx, l->dev[t], ckpt_host(l->ck, t), l->numel, e);
    }
    /* Resuming at or before the newest config change: what lies beyond this state was
     * computed under the old config. Checked on every resume, not only when the change is
     * recorded, so that a kill between recording and cleaning up is finished later. */
    if (!rc && l->gen.nchanges && seq <= l->gen.change_seq) {
        int moved = 0;
        rc = drop_states_after(l, seq, e);
        if (!rc) rc = ckpt_supersede_alpha_after(l->ck, seq, l->gen.nchanges - 1, &moved, e);
        if (!rc && moved)
            fprintf(stderr, "tandem: %d alpha records computed under the previous config after "
                    "run position %llu set aside under superseded/%llu/alpha/ (the replay "
                    "writes new ones)\n", moved, (unsigned long long)seq,
                    (unsigned long long)(l->gen.nchanges - 1));
    }
    if (!rc) rc = clear_divergence(l, e);
    return rc;
}

int ledger_save(ledger *l, const rec_state *rec, ledger_save_when when, tdm_err *e) {
    /* a background commit that has failed since the last call: the run stops here, as at
     * the next commit, not a whole checkpoint interval later (with nothing saved meanwhile) */
    int rc = ckpt_failed(l->ck, e);
    if (rc) return rc;
    int due = when == LEDGER_SAVE_NOW;
    if (when == LEDGER_SAVE_TICK)
        due = l->every_seconds > 0 && now_mono() - ckpt_last_commit_time(l->ck) >= l->every_seconds &&
              ckpt_last_commit_seq(l->ck) != rec->seq;
    else if (when == LEDGER_SAVE_EPISODE)
        due = l->every_episodes > 0 && rec->episode % (uint64_t)l->every_episodes == 0;
    /* at the position of the one state past HEAD the load went past, a commit compares
     * it with the replay whatever the cadence (every_seconds, another run's with another
     * checkpoint.every_episodes): it stayed unchecked, a trusted older state (review) */
    if (!due && !ckpt_unvouched_at(l->ck, rec->seq)) return 0;
    return ckpt_snapshot(l->ck, rec, &l->io, l->dev, when != LEDGER_SAVE_NOW, e);
}

/* The decision of ledger_stop (act 0): the estimate of a full commit against what is left
 * of the grace period. A first commit in flight, judged by the guess alone, first gets a
 * quarter of what is left (at most LEDGER_GRACE_PACE_S) to show its pace or land. Seen
 * on an H100 node: a 1B state's first commit (11 GB at 1.4 GB/s, 8 s) given up at 30 s of
 * grace because the guess (50 MB/s) said 433 s. */
static void stop_plan(ledger *l, ledger_stop_plan *p, double *inflight) {
    memset(p, 0, sizeof *p);
    p->grace = l->grace;
    *inflight = 0;
    p->need = ckpt_commit_estimate(l->ck, inflight);
    p->left = l->grace - since_stop(l) - LEDGER_GRACE_MARGIN_S;
    if (l->grace > 0 && *inflight > 0 && p->left > 0 && !ckpt_rate_measured(l->ck)) {
        ckpt_await_pace(l->ck, p->left / 4 < LEDGER_GRACE_PACE_S ? p->left / 4 : LEDGER_GRACE_PACE_S);
        p->need = ckpt_commit_estimate(l->ck, inflight);
        p->left = l->grace - since_stop(l) - LEDGER_GRACE_MARGIN_S;
    }
    p->margin = LEDGER_GRACE_SAFETY;
    p->full = l->grace <= 0 || p->need * LEDGER_GRACE_SAFETY <= p->left;
}

int ledger_stop(ledger *l, const rec_state *rec, ledger_stop_plan *p, int act, tdm_err *e) {
    if (!act) {
        double inflight;
        stop_plan(l, p, &inflight);
        return 0;
    }
    int rc = 0;
    if (p->full) {
        rc = ckpt_snapshot(l->ck, rec, &l->io, l->dev, 0, e);
    } else {
        /* the commit in flight first: it lands if it fits (then it is the state that
         * stands), else it is given up */
        double inflight = 0;
        ckpt_commit_estimate(l->ck, &inflight);
        if (inflight > 0 && inflight * LEDGER_GRACE_SAFETY <= p->left) p->landed = (rc = ckpt_wait(l->ck, e)) == 0;
        else if (inflight > 0) ckpt_cancel(l->ck);
        else rc = ckpt_wait(l->ck, e); /* none in flight: nothing to wait for */
        uint64_t last = ckpt_last_commit_seq(l->ck);
        p->last_seq = last == UINT64_MAX ? 0 : last;
        p->none_yet = last == UINT64_MAX;
    }
    if (!rc) rc = ckpt_release(l->ck, e);
    return rc;
}

int ledger_alpha(ledger *l, const rec_alpha *a, sha256_digest *hash, tdm_err *e) {
    return ckpt_alpha_record(l->ck, a, hash, e);
}

int ledger_metrics(ledger *l, rec_metrics *row, int *fresh, tdm_err *e) {
    row->commit_s = ckpt_last_commit_seconds(l->ck);
    return ckpt_metrics_record(l->ck, row, fresh, e);
}

ledger_commit_info ledger_last_commit(const ledger *l) {
    return (ledger_commit_info){.seq = ckpt_last_commit_seq(l->ck), .time = ckpt_last_commit_time(l->ck)};
}

/* mixture.mp from the verified α chain (ledger_finish's f->mixture). Written only by the
 * lease holder: the lease is checked right before the write, and the write is a
 * compare-and-swap against the version read here, so that a writer taken over between
 * its check and its write (its successor extended the run and sealed a longer run's α*)
 * is refused by the store instead of writing its shorter mixture over the newer one. */
static int seal_mixture(ledger *l, const ledger_final *f, ledger_mixture *out, tdm_err *e) {
    /* TANDEM_TEST_STOP_AT=mixture:1: frozen before the α chain is read (a takeover overtakes it) */
    testhook_stop_at("mixture");
    audit_chain c;
    int rc = audit_chain_read(l->st, &c, e);
    const char *url = store_url(l->st);
    /* a chain that ends elsewhere than the final state says is most often a successor's
     * (it took the lease over and extended the run: its records come after its lease), not
     * damage: checked after the read, the lease tells the two apart */
    if (!rc) rc = ckpt_check_lease(l->ck, e);
    if (!rc && (!c.ok || c.n != f->alpha_records ||
                (c.n && !sha256_equal(&c.hash[c.n - 1], &f->alpha_head))))
        rc = err_set(e, ERR_STORE,
                     "%s: the α chain does not verify at the end of the run (%s): the audit "
                     "trail is damaged. Restore the record from a copy of the store, or run "
                     "`tandem repair %s` (a dry run; then --apply) to roll the run back to "
                     "before it",
                     url, !c.ok ? c.problem : "it does not end where the final state says", url);
    rec_mixture *x = &out->x;
    if (!rc) {
        audit_mixture(&c, 0.1, x);
        for (int m = 0; m < x->M; m++) {
            snprintf(x->names[m], REC_DOMAIN_MAX, "%s", f->names[m]);
            out->start[m] = c.n ? c.rec[0].alpha[m] : x->alpha[m];
        }
        size_t n;
        void *data = rec_mixture_encode(x, &n);
        void *old = NULL;
        size_t on = 0;
        store_version ver;
        memset(&ver, 0, sizeof ver); /* empty: absent, for the compare-and-swap */
        int got = store_get(l->st, LEDGER_MIXTURE, &old, &on, &ver, e);
        if (got == STORE_NOT_FOUND) memset(&ver, 0, sizeof ver);
        /* the same α* stays as it is (also one written before mixture.mp was sealed) */
        int same = got == 0 && rec_mixture_same(old, on, x);
        /* said once it is written: a writer fenced out below writes nothing */
        int say = f->again && !same && (got == STORE_NOT_FOUND || got == 0);
        free(old);
        if (!data) rc = err_set(e, ERR_INTERNAL, "out of memory encoding mixture.mp");
        else if (got && got != STORE_NOT_FOUND) rc = got;
        else if (!same) rc = ckpt_check_lease(l->ck, e);
        if (!rc && !same) {
            testhook_stop_at("mixture-put"); /* after the lease check, before the write */
            rc = store_put_if(l->st, LEDGER_MIXTURE, data, n, &ver, NULL, e);
            if (rc == STORE_CONFLICT || rc == STORE_NOT_FOUND)
                rc = err_set(e, ERR_STORE,
                             "%s: fenced out: %s/mixture.mp was written by another writer after this one read it "
                             "(a run that took the lease over); this writer (epoch %llu) stops without writing it",
                             url, url, (unsigned long long)ckpt_epoch(l->ck));
            if (!rc && say)
                fprintf(stderr, "tandem: %s/mixture.mp %s; written again from the alpha chain\n", url,
                        got == STORE_NOT_FOUND ? "was missing" : "did not match the alpha chain (damaged)");
        }
        free(data);
    }
    audit_chain_free(&c);
    return rc;
}

int ledger_finish(ledger *l, const ledger_final *f, ledger_mixture *out, tdm_err *e) {
    int rc = ckpt_wait(l->ck, e);
    if (!rc && ckpt_stopped_short(l->ck)) {
        /* the final state is not in the store: no mixture, no wait for late DELETEs (the
         * released lease names them for the next writer); the lease goes back in time */
        rc = ckpt_release(l->ck, e);
        return rc ? rc : LEDGER_STOPPED_SHORT;
    }
    if (!rc) rc = ckpt_set_aside_unreached(l->ck, e); /* a state past HEAD past the run's end */
    if (!rc && f && f->mixture) rc = seal_mixture(l, f, out, e);
    if (!rc) store_settle_own_deletes(l->st, "tandem run"); /* before the lease goes: see store.h */
    if (!rc) rc = ckpt_release(l->ck, e);
    return rc;
}

/* text with every word that reads as a URL with user info masked (url_text_mask_userinfo),
 * in place: a divergence's message holds no store URL today, but the record outlives the
 * process and is read by anyone who can read the store */
static void mask_words(char *text, size_t cap) {
    char out[REC_DIVERGED_MSG_MAX];
    size_t o = 0;
    for (const char *p = text; *p && o + 1 < sizeof out;) {
        size_t sp = strspn(p, " \t\n'\"()"), w;
        for (size_t k = 0; k < sp && o + 1 < sizeof out; k++) out[o++] = p[k];
        p += sp;
        if (!(w = strcspn(p, " \t\n'\"()"))) continue;
        char word[REC_DIVERGED_MSG_MAX], masked[REC_DIVERGED_MSG_MAX];
        snprintf(word, sizeof word, "%.*s", (int)w, p);
        url_text_mask_userinfo(word, masked, sizeof masked);
        o += (size_t)snprintf(out + o, sizeof out - o, "%s", masked);
        if (o >= sizeof out) o = sizeof out - 1;
        p += w;
    }
    out[o] = '\0';
    snprintf(text, cap, "%s", out);
}

int ledger_diverged(ledger *l, rec_diverged *d, tdm_err *e) {
    tdm_err ignore;
    ckpt_wait(l->ck, &ignore); /* a commit in flight: its own failure is not this record's */
    d->epoch = ckpt_epoch(l->ck);
    /* the last full state: this writer's last commit, else HEAD as this life found it (a
     * HEAD read that fails now must not say "no full state": a resume starts from it) */
    rec_head h;
    tdm_err he;
    ledger_commit_info last = ledger_last_commit(l);
    d->state_seq = last.seq != UINT64_MAX ? last.seq
                   : ledger_read(l->st, REC_KIND_HEAD, LEDGER_HEAD, NULL, &h, &he) == 0 ? h.seq : 0;
    if (d->state_seq > d->seq) d->state_seq = d->seq;
    mask_words(d->message, sizeof d->message);
    for (char *p = d->message; *p; p++) /* what the decoder refuses (util/err.c does it already) */
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    for (char *p = d->host; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    if (!d->message[0]) snprintf(d->message, sizeof d->message, "the run diverged");
    testhook_sleep("TANDEM_TEST_DIVERGED_DELAY_MS"); /* a slow store (S3: seconds), for the tests */
    int rc = ckpt_check_lease(l->ck, e);
    /* TANDEM_TEST_FAIL_AT=diverged-put:1: the put fails, as a store that stopped answering */
    if (!rc && testhook_hit("TANDEM_TEST_FAIL_AT", "diverged-put"))
        rc = err_set(e, ERR_STORE, "%s/%s: the store refused the write (TANDEM_TEST_FAIL_AT)", store_url(l->st),
                     LEDGER_DIVERGED);
    size_t n = 0;
    void *data = rc ? NULL : rec_diverged_encode(d, &n);
    if (!rc && !data) rc = err_set(e, ERR_INTERNAL, "out of memory encoding %s", LEDGER_DIVERGED);
    if (!rc) rc = store_put(l->st, LEDGER_DIVERGED, data, n, STORE_OVERWRITE, e);
    free(data);
    return rc;
}
