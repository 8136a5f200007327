/* status.c — what `tandem status` reports beside HEAD, the chain and the lease; see
 * status.h. */
#include "ledger/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/audit.h"
#include "ledger/keys.h"
#include "ledger/metrics.h"
#include "ledger/read.h"
#include "storage/digest_set.h"

void ledger_speed_read(store *st, uint64_t episodes, ledger_speed *sp) {
    memset(sp, 0, sizeof *sp);
    store_list l;
    tdm_err e;
    if (store_list_prefix(st, LEDGER_METRICS, &l, &e)) return;
    uint64_t idx[LEDGER_SPEED_ROWS];
    int k = 0;
    for (size_t i = 0; i < l.n; i++) { /* the LEDGER_SPEED_ROWS largest indices, descending */
        uint64_t t;
        if (ledger_key_index(l.keys[i], LEDGER_METRICS, &t)) continue;
        if (k == LEDGER_SPEED_ROWS && t <= idx[k - 1]) continue;
        int at = k < LEDGER_SPEED_ROWS ? k++ : k - 1;
        idx[at] = t;
        for (int j = at; j > 0 && idx[j] > idx[j - 1]; j--) {
            uint64_t x = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = x;
        }
    }
    store_list_free(&l);
    for (int i = 0; i < k; i++) {
        char key[64];
        rec_metrics m;
        ledger_metrics_key(key, sizeof key, idx[i]);
        if (ledger_read(st, REC_KIND_METRICS, key, NULL, &m, &e)) continue;
        if (!(m.tokens_per_s > 0) || !(m.episode_s > 0)) continue;
        sp->tokens_per_s += m.tokens_per_s, sp->episode_s += m.episode_s, sp->n++;
        if (m.t + 1 > sp->reached) sp->reached = m.t + 1;
        if (m.seq > sp->reached_seq) sp->reached_seq = m.seq;
    }
    if (!sp->n) return;
    sp->tokens_per_s /= sp->n, sp->episode_s /= sp->n;
    sp->eta_s = episodes > sp->reached ? (double)(episodes - sp->reached) * sp->episode_s : 0;
}

int ledger_size_read(store *st, const rec_state *head_state, ledger_size *sz, tdm_err *e) {
    memset(sz, 0, sizeof *sz);
    int rc = audit_state_seqs(st, &sz->seqs, &sz->states, e);
    if (rc) return rc;
    for (size_t t = 0; t < head_state->ntensors; t++) sz->state_bytes += (double)head_state->tensors[t].shape[0] * 4;
    digest_set ref = {0}; /* the chunks counted (a list scanned per chunk was quadratic: a hunt) */
    for (size_t i = 0; i < sz->states; i++) {
        char key[64];
        ledger_state_key(key, sizeof key, sz->seqs[i]);
        rec_state s;
        tdm_err ie;
        if (ledger_read(st, REC_KIND_STATE, key, NULL, &s, &ie)) continue;
        for (size_t t = 0; t < s.ntensors; t++) {
            uint64_t bytes = s.tensors[t].shape[0] * 4;
            for (size_t k = 0; k < s.tensors[t].nchunks; k++) {
                int added = digest_set_add(&ref, &s.tensors[t].chunks[k]);
                if (added < 0) break;
                if (!added) continue;
                uint64_t off = k * s.tensors[t].chunk_bytes;
                uint64_t l = bytes - off < s.tensors[t].chunk_bytes ? bytes - off : s.tensors[t].chunk_bytes;
                sz->chunk_bytes += (double)l;
            }
        }
        rec_state_free(&s);
    }
    size_t nref = ref.n;
    digest_set_free(&ref);
    sz->chunks = nref;
    store_list l;
    if (store_list_prefix(st, LEDGER_BLOBS, &l, e) == 0) {
        sz->blobs = l.n;
        sz->orphan_blobs = l.n > nref ? l.n - nref : 0;
        store_list_free(&l);
    }
    return 0;
}

void ledger_size_free(ledger_size *sz) {
    free(sz->seqs);
    memset(sz, 0, sizeof *sz);
}

int ledger_divergence_read(store *st, ledger_divergence *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    tdm_err de;
    int rc = ledger_read(st, REC_KIND_DIVERGED, LEDGER_DIVERGED, NULL, &out->d, &de);
    if (rc == STORE_NOT_FOUND) return 0;
    if (rc == STORE_CORRUPT) {
        out->state = LEDGER_DIVERGED_DAMAGED;
        snprintf(out->why, sizeof out->why, "%s", de.msg);
        return 0;
    }
    if (rc) return *e = de, rc;
    audit_lease al;
    rc = audit_lease_read(st, &al, e);
    if (rc) return rc;
    int replaced = al.state == AUDIT_LEASE_HELD && al.lease.epoch > out->d.epoch;
    /* a later writer committed past where it diverged: a record that landed after that
     * writer's start had removed none (the diverging writer already taken over) is stale
     * once the later one released the lease (repair moves HEAD back, never past) */
    rec_head h;
    tdm_err he;
    if (!replaced && ledger_read(st, REC_KIND_HEAD, LEDGER_HEAD, NULL, &h, &he) == 0 && h.epoch > out->d.epoch &&
        h.seq > out->d.seq)
        replaced = 1;
    out->state = replaced ? LEDGER_DIVERGED_NO : LEDGER_DIVERGED_YES;
    return 0;
}
