/* cmd_verify.c — `tandem verify STORE`: checks the pinned config (RUN and the change
 * records, as `tandem run` reads them), re-hashes every state manifest, every blob they
 * reference and every α record; reports each fault by name and exits 3 when there is
 * any. Blobs no manifest references are listed as orphans (left by an interrupted
 * commit or gc; `tandem gc` removes them), which is not a fault. A store that is not
 * there, or holds no run at all, is an error (exit 3), never "0 faults". `--json`: the
 * same report as one JSON object on stdout (docs/json.md). Metrics rows (metrics/) are
 * not part of the audit trail: one that cannot be read is a note, not a fault (a run
 * writes it again when it passes that episode, `tandem metrics` skips it). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/audit.h"
#include "ledger/ckpt.h"
#include "ledger/keys.h"
#include "ledger/metrics.h"
#include "ledger/read.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "config/run_config.h"
#include "util/json.h"

typedef struct digest_set {
    sha256_digest *d;
    size_t n, cap;
} digest_set;

static int set_has(const digest_set *s, const sha256_digest *d) {
    for (size_t i = 0; i < s->n; i++)
        if (sha256_equal(&s->d[i], d)) return 1;
    return 0;
}

static int set_add(digest_set *s, const sha256_digest *d) {
    if (set_has(s, d)) return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        sha256_digest *nd = realloc(s->d, cap * sizeof *nd);
        if (!nd) return -1;
        s->d = nd;
        s->cap = cap;
    }
    s->d[s->n++] = *d;
    return 0;
}

static const cli_opt OPTS[] = {
    {"--json", CLI_SWITCH, NULL, "one JSON object on stdout (docs/json.md)", NULL, 0, 0, NULL, NULL},
    CLI_FORMAT_TABLE_JSON,
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"verify", "STORE", 1, 1, "a STORE is required", NULL, OPTS, NULL};

/* Where the report goes with --json (all NULL without): the object's other members, the
 * fault messages and the per-state results, each entry after a comma. */
typedef struct json_out {
    FILE *body, *faults, *states;
} json_out;

/* A fault: "FAULT what" on stdout, or with --json the message added to the list. */
static void fault(const json_out *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fault(const json_out *j, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (j->faults) {
        char *msg = NULL;
        fputc(',', j->faults);
        if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
        json_str(j->faults, msg ? msg : "(out of memory)");
        free(msg);
    } else {
        printf("FAULT ");
        vprintf(fmt, ap);
        printf("\n");
    }
    va_end(ap);
}

/* A checked object's line, "ok    WHAT" or "BAD   WHAT"; with --json an entry
 * {"key":WHAT,"ok":...} of the list, or nothing without one (a member says it). */
static void checked(const json_out *j, FILE *list, int ok, const char *what) {
    if (list) {
        fprintf(list, ",{\"key\":");
        json_str(list, what);
        fprintf(list, ",\"ok\":%s}", ok ? "true" : "false");
    } else if (!j->body) {
        printf("%-5s %s\n", ok ? "ok" : "BAD", what);
    }
}

/* Metrics rows that cannot be read (damaged, cut, another run's bytes): one "note" line
 * each, or with --json the list "damaged_metrics" of their keys. A store error stops it. */
static int note_damaged_rows(store *st, const json_out *j, tdm_err *e) {
    store_list l;
    int rc = store_list_prefix(st, LEDGER_METRICS, &l, e);
    if (rc) return rc == STORE_NOT_FOUND ? 0 : rc;
    if (j->body) fprintf(j->body, ",\"damaged_metrics\":[");
    int n = 0;
    for (size_t i = 0; !rc && i < l.n; i++) {
        tdm_err de;
        rec_metrics m;
        int got = ledger_read(st, REC_KIND_METRICS, l.keys[i], NULL, &m, &de);
        if (got == STORE_NOT_FOUND) continue; /* deleted meanwhile */
        if (got == STORE_CORRUPT) {
            if (j->body) {
                if (n) fputc(',', j->body);
                json_str(j->body, l.keys[i]);
            } else {
                printf("note  %s cannot be read (%s): metrics rows are not part of the audit trail; "
                       "a run writes it again when it passes that episode, tandem metrics skips it\n",
                       l.keys[i], de.msg);
            }
            n++;
        } else if (got) {
            rc = got, *e = de;
        }
    }
    if (j->body) fprintf(j->body, "]");
    store_list_free(&l);
    return rc;
}

/* The command; with --json the report goes to j's streams instead of stdout, and the error
 * is left in *out for the caller's document (it is on stderr either way). */
static int verify(const char *url, const json_out *j, tdm_err *out) {
    tdm_err e = {0};
    store *st = store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!st) {
        fprintf(stderr, "tandem verify: %s\n", e.msg);
        *out = e;
        return e.code;
    }
    long faults = 0;
    uint64_t *seqs = NULL;
    size_t ns = 0;
    digest_set good = {0}, referenced = {0};
    /* what each state vouches for of the α chain (checked once the chain is read) */
    typedef struct vouch {
        uint64_t seq, records;
        sha256_digest head;
    } vouch;
    vouch *vouches = NULL;
    size_t nv = 0;
    double bytes = 0;
    /* the pin, judged exactly as `tandem run` judges it: a fault here is a run refused */
    int health = RUN_CONFIG_OK;
    int rc = run_config_check(st, &health, &e);
    if (!rc && health == RUN_CONFIG_NO_RUN) {
        rc = err_set(&e, ERR_STORE, "%s holds no run: no RUN, HEAD, states or alpha records "
                     "(check the store URL)", url);
    } else if (!rc && health != RUN_CONFIG_OK) {
        fault(j, "%s", e.msg);
        faults++;
    } else if (!rc) {
        checked(j, NULL, 1, "RUN (pinned config)");
    }
    if (!rc && j->body) fprintf(j->body, ",\"run_pin_ok\":%s", health == RUN_CONFIG_OK ? "true" : "false");
    /* the config generation: states and α records of any other belong to a stale writer */
    uint64_t gen = 0, change_seq = 0;
    if (!rc) {
        tdm_err ge;
        if (audit_generation(st, &gen, &change_seq, &ge) && health == RUN_CONFIG_OK) {
            fault(j, "%s", ge.msg);
            faults++;
        }
    }
    /* the pinned config, for the checks against it (seed, mode) */
    config cfg;
    rec_run run;
    int have_cfg = 0;
    memset(&run, 0, sizeof run);
    if (!rc && health == RUN_CONFIG_OK) {
        tdm_err pe;
        have_cfg = run_config_read(st, &cfg, NULL, 0, &pe) == 0 && run_config_read_run(st, &run, &pe) == 0;
    }
    /* the lease: a run replaces one that does not decode (and says so) */
    if (!rc) {
        tdm_err le;
        rec_lease l;
        int lr = ledger_read(st, REC_KIND_LEASE, LEDGER_LEASE, NULL, &l, &le);
        if (lr == STORE_CORRUPT) {
            fault(j, "%s (the next tandem run replaces it)", le.msg);
            faults++;
        } else if (lr && lr != STORE_NOT_FOUND) {
            rc = lr, e = le;
        }
    }
    if (!rc) rc = audit_state_seqs(st, &seqs, &ns, &e);
    /* the seed the run's states were made with: when none was made with the pinned one,
     * RUN is the odd one out; otherwise a state of another seed is another run's */
    size_t seed_match = 0, seed_other = 0;
    uint64_t other_seed = 0;
    for (size_t i = 0; !rc && have_cfg && i < ns; i++) {
        char key[64];
        ledger_state_key(key, sizeof key, seqs[i]);
        rec_state s;
        tdm_err de;
        if (ledger_read(st, REC_KIND_STATE, key, NULL, &s, &de) == 0) {
            if (s.seed == cfg.run.seed) seed_match++;
            else seed_other++, other_seed = s.seed;
            rec_state_free(&s);
        }
    }
    int run_seed_bad = have_cfg && seed_other && !seed_match;
    if (run_seed_bad) {
        fault(j, "%s/RUN pins run.seed = %llu, but every state was made with seed %llu: RUN is "
              "not this run's pin (another run's RUN, or a damaged one); restore it from a copy "
              "of the store", url, (unsigned long long)cfg.run.seed, (unsigned long long)other_seed);
        faults++;
    }
    /* HEAD must name a state that is there and matches */
    rec_head h;
    rec_state hs;
    int have = 0;
    char hs_step[16] = "";
    uint64_t head_seq = 0;
    if (!rc) {
        tdm_err he;
        if (audit_head(st, &h, &hs, &have, &he)) {
            fault(j, "%s", he.msg);
            faults++;
        } else if (have) {
            snprintf(hs_step, sizeof hs_step, "%s", hs.step);
            head_seq = h.seq;
            rec_state_free(&hs);
        } else if (ns) {
            fault(j, "%s: HEAD is missing although states exist", url);
            faults++;
        }
    }
    for (size_t i = 0; !rc && i < ns; i++) {
        char key[64];
        ledger_state_key(key, sizeof key, seqs[i]);
        rec_state s;
        tdm_err de;
        int got = ledger_read(st, REC_KIND_STATE, key, NULL, &s, &de);
        if (got == STORE_NOT_FOUND) continue;
        if (got == STORE_CORRUPT) {
            fault(j, "%s", de.msg);
            faults++;
            continue;
        }
        if (got) {
            rc = got, e = de;
            break;
        }
        int state_ok = 1;
        vouch *nvp = realloc(vouches, (nv + 1) * sizeof *vouches);
        if (nvp) (vouches = nvp)[nv++] = (vouch){s.seq, s.alpha_records, s.alpha_head};
        if (have_cfg && !run_seed_bad && s.seed != cfg.run.seed) {
            fault(j, "%s: made with seed %llu, not the run's %llu: another run's state", key,
                  (unsigned long long)s.seed, (unsigned long long)cfg.run.seed);
            faults++;
            state_ok = 0;
        }
        if (s.has_gen && s.gen > gen && health == RUN_CONFIG_OK) {
            fault(j, "%s: computed under config generation %llu, but the store records %llu "
                  "config changes: configs/%llu.mp is missing (restore it from a copy)", key,
                  (unsigned long long)s.gen, (unsigned long long)gen, (unsigned long long)gen);
            faults++;
            state_ok = 0;
        } else if (!ckpt_gen_belongs(s.has_gen, s.gen, s.seq, gen, change_seq)) {
            fault(j, "%s: computed under config generation %llu by a writer that was fenced "
                  "out or superseded (the run is at generation %llu): a run never uses it",
                  key, (unsigned long long)s.gen, (unsigned long long)gen);
            faults++;
            state_ok = 0;
        }
        for (size_t t = 0; t < s.ntensors && !rc; t++) {
            const rec_tensor *rt = &s.tensors[t];
            uint64_t total = rt->shape[0] * 4;
            for (int d = 1; d < rt->ndim; d++) total *= rt->shape[d];
            for (size_t k = 0; k < rt->nchunks && !rc; k++) {
                if (set_add(&referenced, &rt->chunks[k])) rc = err_set(&e, ERR_INTERNAL, "out of memory");
                if (set_has(&good, &rt->chunks[k])) continue;
                char bkey[80];
                ledger_blob_key(bkey, sizeof bkey, &rt->chunks[k]);
                void *b = NULL;
                size_t bn = 0;
                int r = store_get_verified(st, bkey, &rt->chunks[k], &b, &bn, &e);
                uint64_t off = k * rt->chunk_bytes;
                size_t want = (size_t)(total - off < rt->chunk_bytes ? total - off : rt->chunk_bytes);
                free(b);
                if (r == 0 && bn == want) {
                    set_add(&good, &rt->chunks[k]);
                    bytes += (double)bn;
                } else if (r == 0 || r == STORE_NOT_FOUND || r == STORE_CORRUPT) {
                    fault(j, "%s: %s (tensor %s chunk %zu) is %s", key, bkey, rt->name, k,
                          r == STORE_NOT_FOUND ? "missing" : r == STORE_CORRUPT ? "corrupt" : "the wrong size");
                    faults++;
                    state_ok = 0;
                } else {
                    rc = r;
                }
            }
        }
        rec_state_free(&s);
        if (!rc) checked(j, j->states, state_ok, key);
    }
    audit_chain c;
    memset(&c, 0, sizeof c);
    if (!rc) rc = audit_chain_read(st, &c, &e);
    if (!rc) {
        if (!c.ok) {
            fault(j, "%s", c.problem);
            faults++;
        }
        for (size_t t = 0; t < c.n; t++)
            if (c.rec[t].has_gen && c.rec[t].gen > gen && health == RUN_CONFIG_OK) {
                fault(j, "alpha/%zu.mp: computed under config generation %llu, but the store "
                      "records %llu config changes: configs/%llu.mp is missing (restore it from a "
                      "copy)", t, (unsigned long long)c.rec[t].gen, (unsigned long long)gen,
                      (unsigned long long)gen);
                faults++;
            } else if (!ckpt_gen_belongs(c.rec[t].has_gen, c.rec[t].gen, c.rec[t].seq, gen, change_seq)) {
                fault(j, "alpha/%zu.mp: computed under config generation %llu by a writer "
                      "that was fenced out or superseded (the run is at generation %llu)",
                      t, (unsigned long long)c.rec[t].gen, (unsigned long long)gen);
                faults++;
            }
        /* a state vouches for the first N records and the hash of the last: one that the
         * chain does not hold (a record missing at its end, or not the one it names) cannot
         * be resumed from; a run falls back to a state the chain holds, or replays from the
         * seed, and writes the records again (issue 26: verify called this clean) */
        int short_chain = 0;
        for (size_t i = 0; i < nv; i++) {
            uint64_t want = vouches[i].records;
            if (!want || (want <= c.n && sha256_equal(&c.hash[want - 1], &vouches[i].head))) continue;
            /* a state past HEAD (a commit cut off before HEAD moved) is not the run's
             * position: the run passes over it and re-derives what it lacks, no fault */
            if (have && vouches[i].seq > head_seq) continue;
            if (!c.ok && want > c.n) continue; /* the broken link is reported above */
            char key[64];
            ledger_state_key(key, sizeof key, vouches[i].seq);
            if (want > c.n)
                fault(j, "%s vouches for %llu alpha records but the chain holds %zu: alpha/%zu.mp is "
                      "missing; tandem run falls back to an older state (or replays from the seed) and "
                      "writes it again", key, (unsigned long long)want, c.n, c.n);
            else
                fault(j, "%s vouches for another alpha/%llu.mp than the store holds; tandem run falls "
                      "back to an older state (or replays from the seed) and checks it", key,
                      (unsigned long long)want - 1);
            faults++;
            short_chain = 1;
        }
        if (j->body) fprintf(j->body, ",\"alpha_records\":%zu,\"alpha_chain_ok\":%s", c.n, c.ok ? "true" : "false");
        else printf("%-5s alpha chain: %zu records\n", c.ok ? "ok" : "BAD", c.n);
        int mixture_ok = -1; /* -1: not checked */
        /* mixture.mp of a finished TANDEM run: α* of the chain, as tandem run writes it */
        int done = have && !strcmp(hs_step, "done");
        if (have_cfg && c.ok && c.n && !short_chain && cfg.run.mode != CONFIG_MODE_FIXED) {
            void *md = NULL;
            size_t mn = 0;
            tdm_err me;
            int mr = store_get(st, LEDGER_MIXTURE, &md, &mn, NULL, &me);
            rec_mixture x;
            audit_mixture(&c, 0.1, &x);
            for (int m = 0; m < x.M; m++) snprintf(x.names[m], REC_NAME_MAX, "%s", m < run.M ? run.domains[m] : "?");
            if (mr == 0 && done && !rec_mixture_same(md, mn, &x)) {
                fault(j, "%s/mixture.mp does not hold the alpha* of the alpha chain (damaged): "
                      "tandem run writes it again", url);
                faults++;
                mixture_ok = 0;
            } else if (mr == STORE_NOT_FOUND && done) {
                fault(j, "%s/mixture.mp is missing although the run is finished: tandem run "
                      "writes it again", url);
                faults++;
                mixture_ok = 0;
            } else if (mr == 0 && done) {
                checked(j, NULL, 1, "mixture.mp");
                mixture_ok = 1;
            } else if (mr && mr != STORE_NOT_FOUND) {
                rc = mr, e = me;
            }
            free(md);
        }
        if (j->body) fprintf(j->body, ",\"mixture_ok\":%s", mixture_ok < 0 ? "null" : mixture_ok ? "true" : "false");
        if (!rc) rc = note_damaged_rows(st, j, &e);
        store_list l;
        if (store_list_prefix(st, LEDGER_BLOBS, &l, &e) == 0) {
            size_t orphans = 0;
            for (size_t i = 0; i < l.n; i++) {
                sha256_digest d;
                if (sha256_parse_hex(l.keys[i] + 6, &d) || !set_has(&referenced, &d)) orphans++;
            }
            if (j->body) fprintf(j->body, ",\"orphan_blobs\":%zu", orphans);
            else if (orphans) printf("note  %zu orphan blobs (no manifest references them; tandem gc removes them)\n", orphans);
            store_list_free(&l);
        } else if (j->body) {
            fprintf(j->body, ",\"orphan_blobs\":null");
        }
        if (j->body)
            fprintf(j->body, ",\"states\":%zu,\"blobs\":%zu,\"blob_bytes\":%llu,\"fault_count\":%ld", ns,
                    good.n, (unsigned long long)bytes, faults);
        else
            printf("%s: %zu states, %zu blobs (%.3f GB), %zu alpha records verified; %ld faults\n", url, ns,
                   good.n, bytes / 1e9, c.n, faults);
        if (faults) rc = err_set(&e, ERR_STORE, "%s: %ld faults (listed above)", url, faults);
    }
    audit_chain_free(&c);
    rec_run_free(&run);
    free(vouches);
    free(seqs);
    free(good.d);
    free(referenced.d);
    store_close(st);
    if (rc) fprintf(stderr, "tandem verify: %s\n", e.msg);
    *out = e;
    return rc;
}

/* A memory stream's text after closing it: "" when there is none. */
static char *close_stream(FILE *f, char **buf) {
    if (f) fclose(f);
    return *buf ? *buf : "";
}

static int run_verify(const cli_args *a) {
    const char *url = a->arg[0];
    tdm_err e = {0};
    json_out j = {0};
    if (!cli_json(a)) return verify(url, &j, &e);
    char *body = NULL, *faults = NULL, *states = NULL;
    size_t nb = 0, nf = 0, ns = 0;
    j.body = open_memstream(&body, &nb);
    j.faults = open_memstream(&faults, &nf);
    j.states = open_memstream(&states, &ns);
    int rc = j.body && j.faults && j.states ? verify(url, &j, &e) : err_set(&e, ERR_INTERNAL, "out of memory");
    if (!(j.body && j.faults && j.states)) fprintf(stderr, "tandem verify: %s\n", e.msg);
    const char *b = close_stream(j.body, &body), *f = close_stream(j.faults, &faults);
    const char *s = close_stream(j.states, &states);
    /* the object: the error first when there is one, then what was found */
    printf("{");
    if (rc) {
        json_error_member(stdout, rc, e.msg);
        printf(",");
    }
    printf("\"store\":");
    json_str(stdout, url);
    printf(",\"ok\":%s%s,\"faults\":[%s],\"state_checks\":[%s]}\n", rc ? "false" : "true", b,
           *f ? f + 1 : "", *s ? s + 1 : "");
    free(body);
    free(faults);
    free(states);
    return rc;
}

int cmd_verify(int argc, char **argv) { return cli_run(&SPEC, run_verify, argc, argv); }
