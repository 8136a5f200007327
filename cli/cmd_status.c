/* cmd_status.c — `tandem status STORE`: where a run stands, from its store alone.
 *
 * Run id and config digest; episode and next step; the last full commit (seq, time);
 * what a resume would lose (steps since the last full state, as far as the α records
 * show progress beyond it); commits per hour; current α; the lease holder, and whether
 * that holder is provably gone (a stale lease). A store whose RUN is missing or damaged
 * is reported as such (what a resume would do: refuse, exit 3), with what is readable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ledger/audit.h"
#include "ledger/keys.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "runner/pin.h"

/* The lease line: holder, and held / released / stale with the reason. */
static int print_lease(store *st, tdm_err *e) {
    audit_lease al;
    int rc = audit_lease_read(st, &al, e);
    if (rc) return rc;
    if (al.state == AUDIT_LEASE_NONE) {
        printf("lease     none\n");
        return 0;
    }
    const rec_lease *l = &al.lease;
    char when[64], age[32];
    audit_time(l->time, when, sizeof when);
    audit_duration(al.age, age, sizeof age);
    printf("lease     epoch %llu, host %s, pid %llu, attempt %llu, ", (unsigned long long)l->epoch,
           l->host, (unsigned long long)l->pid, (unsigned long long)l->attempt);
    if (al.state == AUDIT_LEASE_RELEASED) printf("released at %s\n", when);
    else if (al.state == AUDIT_LEASE_HELD) printf("held since %s (%s)\n", when, al.why);
    else
        printf("STALE: held since %s, but the holder is gone: %s; last sign of life %s ago "
               "(tandem gc may proceed; the next tandem run takes the lease over)\n",
               when, al.why, age);
    return 0;
}

/* Bytes as people read them: kB, MB or GB (decimal units, as the store's tools show). */
static void human_bytes(double b, char *out, size_t cap) {
    if (b >= 1e9) snprintf(out, cap, "%.2f GB", b / 1e9);
    else if (b >= 1e6) snprintf(out, cap, "%.1f MB", b / 1e6);
    else snprintf(out, cap, "%.0f kB", b / 1e3);
}

/* The size line: full states kept and the bytes of one (3 tensors × the model's floats,
 * from HEAD's manifest), the unique chunks they all reference (what the states cost in
 * the store: unchanged chunks are shared) and the orphan blobs, if any. */
static int print_size(store *st, const rec_state *head_state, tdm_err *e) {
    uint64_t *seqs = NULL;
    size_t ns = 0;
    int rc = audit_state_seqs(st, &seqs, &ns, e);
    if (rc) return rc;
    double per_state = 0;
    for (size_t t = 0; t < head_state->ntensors; t++) per_state += (double)head_state->tensors[t].shape[0] * 4;
    sha256_digest *ref = NULL;
    size_t nref = 0, cap = 0;
    double unique = 0;
    for (size_t i = 0; i < ns && !rc; i++) {
        char key[64];
        ledger_state_key(key, sizeof key, seqs[i]);
        void *data = NULL;
        size_t n = 0;
        rec_state s;
        tdm_err ie;
        if (store_get(st, key, &data, &n, NULL, &ie)) continue;
        int bad = rec_state_decode(data, n, key, &s, &ie);
        free(data);
        if (bad) continue;
        for (size_t t = 0; t < s.ntensors; t++) {
            uint64_t bytes = s.tensors[t].shape[0] * 4;
            for (size_t k = 0; k < s.tensors[t].nchunks; k++) {
                int seen = 0;
                for (size_t j = 0; j < nref && !seen; j++) seen = sha256_equal(&ref[j], &s.tensors[t].chunks[k]);
                if (seen) continue;
                if (nref == cap) {
                    cap = cap ? 2 * cap : 256;
                    sha256_digest *r2 = realloc(ref, cap * sizeof *r2);
                    if (!r2) break;
                    ref = r2;
                }
                uint64_t off = k * s.tensors[t].chunk_bytes;
                uint64_t l = bytes - off < s.tensors[t].chunk_bytes ? bytes - off : s.tensors[t].chunk_bytes;
                ref[nref++] = s.tensors[t].chunks[k];
                unique += (double)l;
            }
        }
        rec_state_free(&s);
    }
    store_list l;
    size_t orphans = 0, blobs = 0;
    if (store_list_prefix(st, LEDGER_BLOBS, &l, e) == 0) {
        blobs = l.n;
        orphans = l.n > nref ? l.n - nref : 0;
        store_list_free(&l);
    }
    char one[32], all[32];
    human_bytes(per_state, one, sizeof one);
    human_bytes(unique, all, sizeof all);
    printf("size      %zu full state%s of %s each; their %zu chunks hold %s (unchanged chunks "
           "are shared)\n", ns, ns == 1 ? "" : "s", one, nref, all);
    if (orphans)
        printf("          %zu blobs no state references (of %zu; tandem gc removes them)\n", orphans, blobs);
    free(ref);
    free(seqs);
    return 0;
}

/* Status of a run whose pin is unusable: the fault, then HEAD and the lease as far as
 * they can be read. Returns ERR_STORE (what a resume would do). */
static int print_damaged(store *st, const char *url, int health, const char *why, tdm_err *e) {
    printf("store     %s\n", url);
    printf("RUN       FAULT: %s\n", why);
    rec_head h;
    rec_state s;
    int have = 0;
    tdm_err he;
    if (audit_head(st, &h, &s, &have, &he) == 0 && have) {
        printf("position  episode %llu, next step %s (run position %llu), in %s\n",
               (unsigned long long)s.episode, s.step, (unsigned long long)s.seq, h.state);
        rec_state_free(&s);
    }
    int rc = print_lease(st, e);
    if (rc) return rc;
    return err_set(e, ERR_STORE, "%s: RUN is %s: tandem run refuses to resume it (see above)",
                   url, health == PIN_MISSING ? "missing" : "damaged");
}

/* one STORE and no options */
static const cli_spec SPEC = {"status", "STORE", 1, 1, "a STORE is required", NULL, NULL, NULL};

static int run_status(const cli_args *a) {
    const char *url = a->arg[0];
    tdm_err e = {0};
    store *st = store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!st) {
        fprintf(stderr, "tandem status: %s\n", e.msg);
        return e.code;
    }
    int health = PIN_OK;
    int rc = pin_check(st, &health, &e);
    if (!rc && (health == PIN_MISSING || health == PIN_DAMAGED)) {
        char why[sizeof e.msg];
        snprintf(why, sizeof why, "%s", e.msg);
        rc = print_damaged(st, url, health, why, &e);
        store_close(st);
        fprintf(stderr, "tandem status: %s\n", e.msg);
        return rc;
    }
    if (!rc && health == PIN_NO_RUN) rc = e.code;
    rec_run run;
    memset(&run, 0, sizeof run);
    audit_chain c;
    memset(&c, 0, sizeof c);
    rec_head h;
    rec_state s;
    int have = 0;
    if (!rc) rc = pin_read_run(st, &run, &e);
    config cfg;
    char run_id[64];
    if (!rc) rc = pin_read(st, &cfg, run_id, sizeof run_id, &e);
    if (!rc) rc = audit_chain_read(st, &c, &e);
    if (!rc) rc = audit_head(st, &h, &s, &have, &e);
    if (!rc) {
        char created[64], hex[65];
        audit_time((double)run.created, created, sizeof created);
        sha256_hex(&run.config_sha, hex);
        printf("run       %s (created %s)\n", run.run_id, created);
        printf("store     %s\n", url);
        printf("config    sha256 %s\n", hex);
        uint64_t E = (uint64_t)cfg.tandem.E, T = (uint64_t)cfg.run.episodes;
        uint64_t per_episode = cfg.run.mode == CONFIG_MODE_FIXED ? E : E + 2;
        if (have) {
            printf("position  episode %llu/%llu, next step %s", (unsigned long long)s.episode,
                   (unsigned long long)T, s.step);
            if (!strcmp(s.step, "free")) printf(" %llu/%llu", (unsigned long long)s.index + 1, (unsigned long long)E);
            printf(" (run position %llu of %llu)\n", (unsigned long long)s.seq,
                   (unsigned long long)(T * per_episode));
            if (cfg.run.mode == CONFIG_MODE_FIXED) printf("mode      fixed mixture (no alpha updates)\n");
            char when[64];
            audit_time(h.time, when, sizeof when);
            double age = (double)time(NULL) - h.time;
            if (age < 0) age = 0; /* whole-second clock against a fractional commit time */
            printf("commit    last full state %s at %s (%.0f s ago)\n", h.state, when, age);
            double hours = (h.time - (double)run.created) / 3600.0;
            if (hours > 0) printf("rate      %llu commits, %.1f per hour\n", (unsigned long long)h.commits,
                                  (double)h.commits / hours);
            uint64_t ahead = c.n ? c.rec[c.n - 1].seq : 0;
            printf("at risk   %llu steps since the last full state (alpha records reach run position %llu)\n",
                   (unsigned long long)(ahead > s.seq ? ahead - s.seq : 0), (unsigned long long)ahead);
            printf("alpha    ");
            for (int m = 0; m < s.M; m++) printf(" %s %.4f", m < run.M ? run.domains[m] : "?", s.alpha[m]);
            printf("\n");
            printf("finished  %s\n", !strcmp(s.step, "done") ? "yes" : "no");
            rc = print_size(st, &s, &e);
        } else {
            printf("position  no full state committed yet\n");
        }
        printf("alpha log %zu records%s\n", c.n, c.ok ? "" : " (chain broken: run tandem alpha --verify)");
        if (!rc) rc = print_lease(st, &e);
    }
    if (have) rec_state_free(&s);
    audit_chain_free(&c);
    rec_run_free(&run);
    store_close(st);
    if (rc) fprintf(stderr, "tandem status: %s\n", e.msg);
    return rc;
}

int cmd_status(int argc, char **argv) { return cli_run(&SPEC, run_status, argc, argv); }
