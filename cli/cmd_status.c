/* cmd_status.c — `tandem status STORE`: where a run stands, from its store alone.
 *
 * Run id and config digest; episode and next step; the last full commit (seq, time);
 * what a resume would lose (steps since the last full state, as far as the α records
 * show progress beyond it); commits per hour; current α; the lease holder, and whether
 * that holder is provably gone (a stale lease); whether the run diverged (exit 5: where,
 * the message) while diverged.mp is the latest word on it (ledger/status.h). A store whose RUN is missing or damaged
 * is reported as such (what a resume would do: refuse, exit 3), with what is readable.
 * A sweep's root (what `tandem run --sweep` and `tandem manifest --sweep` use as STORE)
 * lists its points instead: state, episode and α* of each (cli/sweep_view.c).
 * `--json`: the same facts as one JSON object on stdout (docs/json.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/term.h"
#include "ledger/audit.h"
#include "ledger/keys.h"
#include "ledger/metrics.h"
#include "ledger/read.h"
#include "ledger/status.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "cli/sweep_view.h"
#include "config/run_config.h"
#include "util/json.h"

/* ,"key":T,"key_iso":"2026-11-22T23:10:00Z" — a unix time and the same in ISO 8601 UTC
 * (whole seconds; null when there is no time) */
static void json_time(FILE *j, const char *key, double t) {
    char k[64], iso[64];
    time_t s = (time_t)t;
    struct tm tm;
    fputc(',', j);
    json_key(j, key);
    json_num(j, t > 0 ? t : NAN);
    snprintf(k, sizeof k, "%s_iso", key);
    fputc(',', j);
    json_key(j, k);
    if (t > 0 && gmtime_r(&s, &tm) && strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm)) json_str(j, iso);
    else fputs("null", j);
}

/* ,"head_missing":{...}: HEAD missing or unusable (damage "" when missing); state, the
 * newest listed state status shows instead (NULL: none is the run's) of nlisted listed */
static void json_head_missing(FILE *j, const char *state, size_t nlisted, const char *damage) {
    fprintf(j, ",\"head_missing\":{\"state\":");
    if (state) json_str(j, state);
    else fprintf(j, "null");
    fprintf(j, ",\"states_listed\":%zu,\"damage\":", nlisted);
    if (damage[0]) json_str(j, damage);
    else fprintf(j, "null");
    fprintf(j, "}");
}

static const char *lease_state_name(int state) {
    return state == AUDIT_LEASE_RELEASED ? "released" : state == AUDIT_LEASE_HELD ? "held"
           : state == AUDIT_LEASE_STALE  ? "stale"
                                         : "none";
}

/* The lease line: holder, and held / released / stale with the reason; with j (--json)
 * the member ,"lease":{...} written to j instead. */
static int print_lease(store *st, FILE *j, tdm_err *e) {
    audit_lease al;
    int rc = audit_lease_read(st, &al, e);
    if (rc) return rc;
    if (j) {
        fprintf(j, ",\"lease\":{\"state\":");
        json_str(j, al.damaged ? "damaged" : lease_state_name(al.state));
        if (al.damaged) {
            fprintf(j, ",\"fault\":");
            json_str(j, al.why);
        }
        if (al.state != AUDIT_LEASE_NONE) {
            const rec_lease *l = &al.lease;
            fprintf(j, ",\"epoch\":%llu,\"host\":", (unsigned long long)l->epoch);
            json_str(j, l->host);
            fprintf(j, ",\"pid\":%llu,\"attempt\":%llu", (unsigned long long)l->pid,
                    (unsigned long long)l->attempt);
            json_time(j, "time", l->time);
            fprintf(j, ",\"why\":");
            json_str(j, al.state == AUDIT_LEASE_RELEASED ? NULL : al.why);
            /* the holder's last sign of life: judged for an unreleased lease only */
            int judged = al.state == AUDIT_LEASE_HELD || al.state == AUDIT_LEASE_STALE;
            json_time(j, "last_life", judged ? al.life : NAN);
            fprintf(j, ",\"last_life_age_s\":");
            json_num(j, judged ? al.age : NAN);
        }
        fputc('}', j);
        return 0;
    }
    if (al.damaged) {
        /* not "none": verify calls it a fault, and a run says it replaces it */
        printf("lease     DAMAGED: ");
        term_text(stdout, al.why); /* may quote the store's text */
        printf("; it fences nobody (gc goes on): the next tandem run replaces it\n");
        return 0;
    }
    if (al.state == AUDIT_LEASE_NONE) {
        printf("lease     none\n");
        return 0;
    }
    const rec_lease *l = &al.lease;
    char when[64], age[32];
    audit_time(l->time, when, sizeof when);
    audit_duration(al.age, age, sizeof age);
    printf("lease     epoch %llu, host ", (unsigned long long)l->epoch);
    term_text(stdout, l->host); /* the store's text: no escapes into the terminal */
    printf(", pid %llu, attempt %llu, ", (unsigned long long)l->pid, (unsigned long long)l->attempt);
    if (al.state == AUDIT_LEASE_RELEASED) printf("released at %s\n", when);
    else if (al.state == AUDIT_LEASE_HELD) printf("held since %s (%s)\n", when, al.why);
    else
        printf("STALE: held since %s, but the holder is gone: %s; last sign of life %s ago "
               "(tandem gc may proceed; the next tandem run takes the lease over)\n",
               when, al.why, age);
    return 0;
}

/* The divergence (ledger_divergence_read): with j (--json) the member ,"diverged":null or
 * {...}; as text a "diverged" line while the record is the latest word on the run. */
static int print_diverged(store *st, FILE *j, tdm_err *e) {
    ledger_divergence dv;
    int rc = ledger_divergence_read(st, &dv, e);
    if (rc) return rc;
    const rec_diverged *d = &dv.d;
    int is_free = !strcmp(d->step, "free");
    if (j) {
        fprintf(j, ",\"diverged\":");
        if (dv.state == LEDGER_DIVERGED_NO) {
            fputs("null", j);
        } else if (dv.state == LEDGER_DIVERGED_DAMAGED) {
            fprintf(j, "{\"fault\":");
            json_str(j, dv.why);
            fputc('}', j);
        } else {
            fprintf(j, "{\"episode\":%llu,\"step\":", (unsigned long long)d->episode);
            json_str(j, d->step);
            if (is_free) fprintf(j, ",\"free_step\":%llu", (unsigned long long)d->index + 1);
            else fprintf(j, ",\"free_step\":null");
            fprintf(j, ",\"seq\":%llu,\"state_seq\":%llu,\"message\":", (unsigned long long)d->seq,
                    (unsigned long long)d->state_seq);
            json_str(j, d->message);
            json_time(j, "time", d->time);
            fprintf(j, ",\"epoch\":%llu,\"host\":", (unsigned long long)d->epoch);
            json_str(j, d->host);
            fprintf(j, ",\"attempt\":%llu}", (unsigned long long)d->attempt);
        }
        return 0;
    }
    if (dv.state == LEDGER_DIVERGED_DAMAGED) {
        printf("diverged  unknown: %s cannot be read (", LEDGER_DIVERGED);
        term_text(stdout, dv.why);
        printf("); the next tandem run removes it\n");
    } else if (dv.state == LEDGER_DIVERGED_YES) {
        char when[64];
        audit_time(d->time, when, sizeof when);
        printf("diverged  YES: at episode %llu, ", (unsigned long long)d->episode);
        term_text(stdout, d->step); /* the store's text, as the host below */
        printf(" step");
        if (is_free) printf(" %llu", (unsigned long long)d->index + 1);
        printf(" (run position %llu), at %s on ", (unsigned long long)d->seq, when);
        term_text(stdout, d->host); /* the store's text: no escapes into the terminal */
        printf(" (exit 5)\n          ");
        term_text(stdout, d->message);
        if (d->state_seq)
            printf("\n          the last full state (run position %llu) stands", (unsigned long long)d->state_seq);
        else
            printf("\n          no full state before it: a resume starts from the beginning");
        printf("; change the key the message names (--allow-change KEY when it is pinned) and run again\n");
    }
    return 0;
}

/* Bytes as people read them: kB, MB or GB (decimal units, as the store's tools show). */
static void human_bytes(double b, char *out, size_t cap) {
    if (b >= 1e9) snprintf(out, cap, "%.2f GB", b / 1e9);
    else if (b >= 1e6) snprintf(out, cap, "%.1f MB", b / 1e6);
    else snprintf(out, cap, "%.0f kB", b / 1e3);
}

/* "3 h 12 min", "4 min 5 s", "12 s" */
static void human_seconds(double s, char *out, size_t cap) {
    if (s >= 3600) snprintf(out, cap, "%.0f h %.0f min", floor(s / 3600), floor(fmod(s, 3600) / 60));
    else if (s >= 60) snprintf(out, cap, "%.0f min %.0f s", floor(s / 60), floor(fmod(s, 60)));
    else snprintf(out, cap, "%.0f s", s);
}


/* The size line: full states kept and the bytes of one (3 tensors × the model's floats,
 * from HEAD's manifest), the unique chunks they all reference (what the states cost in
 * the store: unchanged chunks are shared) and the orphan blobs, if any; with j (--json)
 * the member ,"size":{...} written to j instead. */
static int print_size(store *st, const rec_state *head_state, FILE *j, tdm_err *e) {
    ledger_size sz;
    int rc = ledger_size_read(st, head_state, &sz, e);
    if (rc) return rc;
    size_t ns = sz.states, nref = sz.chunks, blobs = sz.blobs, orphans = sz.orphan_blobs;
    const uint64_t *seqs = sz.seqs;
    double per_state = sz.state_bytes, unique = sz.chunk_bytes;
    if (j) {
        fprintf(j, ",\"size\":{\"states\":%zu,\"state_bytes\":%llu,\"chunks\":%zu,\"chunk_bytes\":%llu,"
                "\"blobs\":%zu,\"orphan_blobs\":%zu,\"state_seqs\":[", ns, (unsigned long long)per_state, nref,
                (unsigned long long)unique, blobs, orphans);
        for (size_t i = 0; i < ns; i++) fprintf(j, "%s%llu", i ? "," : "", (unsigned long long)seqs[i]);
        fprintf(j, "]}");
        ledger_size_free(&sz);
        return 0;
    }
    char one[32], all[32];
    human_bytes(per_state, one, sizeof one);
    human_bytes(unique, all, sizeof all);
    printf("size      %zu full state%s of %s each; their %zu chunks hold %s (unchanged chunks "
           "are shared)\n", ns, ns == 1 ? "" : "s", one, nref, all);
    /* the kept states by run position: what export --state and eval --state take (the
     * first and the newest few when there are many) */
    if (ns) {
        printf("          at run positions");
        for (size_t i = 0; i < ns; i++) {
            if (ns > 12 && i == 4) {
                printf(" ... (%zu more)", ns - 8);
                i = ns - 5;
                continue;
            }
            printf("%s %llu", i ? "," : "", (unsigned long long)seqs[i]);
        }
        printf(" (tandem export/eval --state SEQ)\n");
    }
    if (orphans)
        printf("          %zu blobs no state references (of %zu; tandem gc removes them)\n", orphans, blobs);
    ledger_size_free(&sz);
    return 0;
}

/* Status of a run whose pin is unusable: the fault, then HEAD and the lease as far as
 * they can be read (with j: as members written to j). Returns ERR_STORE (what a resume
 * would do). */
static int print_damaged(store *st, const char *url, int health, const char *why, FILE *j, tdm_err *e) {
    if (j) {
        fprintf(j, ",\"store\":");
        json_str(j, url);
        fprintf(j, ",\"run_health\":");
        json_str(j, health == RUN_CONFIG_MISSING ? "missing" : "damaged");
        fprintf(j, ",\"fault\":");
        json_str(j, why);
    } else {
        printf("store     %s\n", url);
        printf("RUN       FAULT: %s\n", why);
    }
    rec_head h;
    rec_state s;
    int have = 0;
    tdm_err he;
    if (audit_head(st, &h, &s, &have, &he) == 0 && have) {
        if (j) {
            fprintf(j, ",\"position\":{\"episode\":%llu,\"next_step\":", (unsigned long long)s.episode);
            json_str(j, s.step);
            fprintf(j, ",\"seq\":%llu},\"commit\":{\"state\":", (unsigned long long)s.seq);
            json_str(j, h.state);
            json_time(j, "time", h.time);
            fputc('}', j);
        } else {
            printf("position  episode %llu, next step %s (run position %llu), in %s\n",
                   (unsigned long long)s.episode, s.step, (unsigned long long)s.seq, h.state);
        }
        rec_state_free(&s);
    } else if (j) {
        fprintf(j, ",\"position\":null,\"commit\":null");
    }
    int rc = print_lease(st, j, e);
    if (rc) return rc;
    return err_set(e, ERR_STORE, "%s: RUN is %s: tandem run refuses to resume it (see above)",
                   url, health == RUN_CONFIG_MISSING ? "missing" : "damaged");
}

static const cli_opt OPTS[] = {
    {"--json", CLI_SWITCH, NULL, "one JSON object on stdout (docs/json.md)", NULL, 0, 0, NULL, NULL},
    CLI_FORMAT_TABLE_JSON,
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"status", "STORE", 1, 1, "a STORE is required",
                              "Where a run stands, from its store alone; at a sweep's root (the --store of\n"
                              "`tandem run --sweep`), every point's state, episode and alpha*.",
                              OPTS, NULL};

/* The command; with j (--json) every fact goes to j as members instead of to stdout, and
 * the error is left in *out for the caller's document (it is on stderr either way). */
static int status(const char *url, FILE *j, tdm_err *out) {
    tdm_err e = {0};
    store *st = store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!st) {
        fprintf(stderr, "tandem status: %s\n", e.msg);
        *out = e;
        return e.code;
    }
    /* a sweep's root (SWEEP): its points, each in its own store */
    int is_sweep = 0;
    int rc = sweep_view_status(st, url, j, &is_sweep, &e);
    if (rc || is_sweep) {
        store_close(st);
        if (rc) fprintf(stderr, "tandem status: %s\n", e.msg);
        *out = e;
        return rc;
    }
    int health = RUN_CONFIG_OK;
    rc = run_config_check(st, &health, &e);
    if (!rc && (health == RUN_CONFIG_MISSING || health == RUN_CONFIG_DAMAGED)) {
        char why[sizeof e.msg];
        snprintf(why, sizeof why, "%s", e.msg);
        rc = print_damaged(st, url, health, why, j, &e);
        store_close(st);
        fprintf(stderr, "tandem status: %s\n", e.msg);
        *out = e;
        return rc;
    }
    if (!rc && health == RUN_CONFIG_NO_RUN) rc = e.code;
    rec_run run;
    memset(&run, 0, sizeof run);
    audit_chain c;
    memset(&c, 0, sizeof c);
    rec_head h;
    rec_state s;
    int have = 0;
    if (!rc) rc = run_config_read_run(st, &run, &e);
    config *cfg = calloc(1, sizeof *cfg); /* ~95 KB: off the stack (ulimit -s 128) */
    char run_id[64];
    if (!rc && !cfg) rc = err_set(&e, ERR_INTERNAL, "out of memory");
    if (!rc) rc = run_config_read(st, cfg, run_id, sizeof run_id, &e);
    if (!rc) rc = audit_chain_read(st, &c, &e);
    char hdamage[1200] = "";
    if (!rc) rc = audit_head_damage(st, &h, &s, &have, hdamage, sizeof hdamage, &e);
    /* HEAD missing (a first commit cut off before HEAD moved, or HEAD lost) or unusable
     * while states are there: a resume goes on from the newest of the run's that verifies,
     * not from the beginning (said so before, while the resume went on from states/840.mp;
     * a damaged HEAD was exit 3 and nothing else) */
    int listed = 0;
    size_t nlisted = 0;
    char lkey[64] = "";
    if (!rc && !have) {
        sha256_digest id;
        int has_id = run_config_identity(&run, &id) == 0;
        rc = audit_newest_listed(st, cfg->run.seed, has_id ? &id : NULL, hdamage[0] ? &h : NULL, &s, lkey, sizeof lkey,
                                 &nlisted, &listed, &e);
        have = listed;
    }
    if (!rc && j) {
        char hex[65];
        sha256_hex(&run.config_sha, hex);
        uint64_t E = (uint64_t)cfg->tandem.E, T = (uint64_t)cfg->run.episodes;
        uint64_t per_episode = cfg->run.mode == CONFIG_MODE_FIXED ? E : E + 2;
        fprintf(j, ",\"run_id\":");
        json_str(j, run.run_id);
        json_time(j, "created", (double)run.created);
        fprintf(j, ",\"store\":");
        json_str(j, url);
        fprintf(j, ",\"run_health\":\"ok\",\"config_sha256\":\"%s\",\"mode\":\"%s\"", hex,
                cfg->run.mode == CONFIG_MODE_FIXED ? "fixed" : "tandem");
        if (have) {
            fprintf(j, ",\"position\":{\"episode\":%llu,\"episodes\":%llu,\"next_step\":",
                    (unsigned long long)s.episode, (unsigned long long)T);
            json_str(j, s.step);
            if (!strcmp(s.step, "free")) fprintf(j, ",\"free_step\":%llu", (unsigned long long)s.index + 1);
            else fprintf(j, ",\"free_step\":null");
            fprintf(j, ",\"free_steps\":%llu,\"seq\":%llu,\"seq_total\":%llu}", (unsigned long long)E,
                    (unsigned long long)s.seq, (unsigned long long)(T * per_episode));
            if (listed) {
                fprintf(j, ",\"commit\":null,\"commits\":null,\"commits_per_hour\":null");
                json_head_missing(j, lkey, nlisted, hdamage);
            } else {
                double age = (double)time(NULL) - h.time;
                if (age < 0) age = 0; /* whole-second clock against a fractional commit time */
                fprintf(j, ",\"commit\":{\"state\":");
                json_str(j, h.state);
                json_time(j, "time", h.time);
                fprintf(j, ",\"age_s\":");
                json_num(j, age);
                double hours = (h.time - (double)run.created) / 3600.0;
                fprintf(j, "},\"commits\":%llu,\"commits_per_hour\":", (unsigned long long)h.commits);
                json_num(j, hours > 0 ? (double)h.commits / hours : NAN);
            }
            ledger_speed sp;
            ledger_speed_read(st, T, &sp);
            uint64_t ahead = c.n ? c.rec[c.n - 1].seq : 0;
            uint64_t reach = !c.n && sp.reached_seq > ahead ? sp.reached_seq : ahead; /* a fixed run: its rows */
            fprintf(j, ",\"at_risk_steps\":%llu,\"alpha_reach_seq\":%llu,\"alpha\":{",
                    (unsigned long long)(reach > s.seq ? reach - s.seq : 0), (unsigned long long)ahead);
            for (int m = 0; m < s.M; m++) {
                if (m) fputc(',', j);
                json_key(j, m < run.M ? run.domains[m] : "?");
                json_num(j, s.alpha[m]);
            }
            fprintf(j, "},\"finished\":%s", !strcmp(s.step, "done") ? "true" : "false");
            if (sp.n) {
                fprintf(j, ",\"speed\":{\"tokens_per_s\":");
                json_num(j, sp.tokens_per_s);
                fprintf(j, ",\"episode_s\":");
                json_num(j, sp.episode_s);
                fprintf(j, ",\"episodes_measured\":%d,\"eta_s\":", sp.n);
                json_num(j, strcmp(s.step, "done") ? sp.eta_s : 0);
                fprintf(j, "}");
            } else {
                fprintf(j, ",\"speed\":null");
            }
            rc = print_size(st, &s, j, &e);
        } else {
            /* no full state yet: a resume starts from the beginning, so every step the α
             * records (a fixed run: its rows) reach is at risk */
            ledger_speed sp;
            ledger_speed_read(st, T, &sp);
            uint64_t ahead = c.n ? c.rec[c.n - 1].seq : 0;
            uint64_t reach = !c.n && sp.reached_seq > ahead ? sp.reached_seq : ahead;
            fprintf(j, ",\"position\":null,\"commit\":null,\"commits\":null,\"commits_per_hour\":null,"
                       "\"at_risk_steps\":%llu,\"alpha_reach_seq\":%llu,\"alpha\":null,\"finished\":false,"
                       "\"speed\":null,\"size\":null", (unsigned long long)reach, (unsigned long long)ahead);
            if (hdamage[0]) json_head_missing(j, NULL, nlisted, hdamage);
            char why[1200];
            if (audit_store_stranded(st, why, sizeof why)) {
                fprintf(j, ",\"stranded\":");
                json_str(j, why);
            }
        }
        fprintf(j, ",\"alpha_records\":%zu,\"alpha_chain_ok\":%s", c.n, c.ok ? "true" : "false");
        if (!rc) rc = print_diverged(st, j, &e);
        if (!rc) rc = print_lease(st, j, &e);
    } else if (!rc) {
        char created[64], hex[65];
        audit_time((double)run.created, created, sizeof created);
        sha256_hex(&run.config_sha, hex);
        printf("run       ");
        term_text(stdout, run.run_id); /* the store's text: no escapes into the terminal */
        printf(" (created %s)\n", created);
        printf("store     %s\n", url);
        printf("config    sha256 %s\n", hex);
        uint64_t E = (uint64_t)cfg->tandem.E, T = (uint64_t)cfg->run.episodes;
        uint64_t per_episode = cfg->run.mode == CONFIG_MODE_FIXED ? E : E + 2;
        if (have) {
            printf("position  episode %llu/%llu, next step %s", (unsigned long long)s.episode,
                   (unsigned long long)T, s.step);
            if (!strcmp(s.step, "free")) printf(" %llu/%llu", (unsigned long long)s.index + 1, (unsigned long long)E);
            printf(" (run position %llu of %llu)\n", (unsigned long long)s.seq,
                   (unsigned long long)(T * per_episode));
            if (cfg->run.mode == CONFIG_MODE_FIXED) printf("mode      fixed mixture (no alpha updates)\n");
            if (listed) {
                if (hdamage[0]) {
                    printf("commit    HEAD cannot be used (");
                    term_text(stdout, hdamage); /* the store's text: no escapes into the terminal */
                    printf(")");
                } else {
                    printf("commit    HEAD is missing");
                }
                printf(": %s is the newest state of this run (of %zu listed); a resume goes on from it if it "
                       "verifies, else from an older one (tandem verify checks them)\n", lkey, nlisted);
            } else {
                char when[64];
                audit_time(h.time, when, sizeof when);
                double age = (double)time(NULL) - h.time;
                if (age < 0) age = 0; /* whole-second clock against a fractional commit time */
                printf("commit    last full state %s at %s (%.0f s ago)\n", h.state, when, age);
                double hours = (h.time - (double)run.created) / 3600.0;
                if (hours > 0 && h.commits) /* 0: HEAD was written again by a resume (the count went with it) */
                    printf("rate      %llu commits, %.1f per hour\n", (unsigned long long)h.commits,
                           (double)h.commits / hours);
            }
            ledger_speed sp;
            ledger_speed_read(st, T, &sp);
            /* how far the run went past its last state: its α records, or for a fixed run
             * (none) its metrics rows */
            uint64_t ahead = c.n ? c.rec[c.n - 1].seq : 0;
            int by_rows = !c.n && sp.reached_seq > ahead;
            if (by_rows) ahead = sp.reached_seq;
            printf("at risk   %llu steps since %s (%s reach run position %llu)\n",
                   (unsigned long long)(ahead > s.seq ? ahead - s.seq : 0), listed ? lkey : "the last full state",
                   by_rows ? "metrics rows" : "alpha records",
                   (unsigned long long)ahead);
            if (sp.n) {
                char eta[64];
                human_seconds(sp.eta_s, eta, sizeof eta);
                printf("speed     %.0f tokens/s, %.2f s per episode (mean of the last %d episodes)", sp.tokens_per_s,
                       sp.episode_s, sp.n);
                if (strcmp(s.step, "done")) printf("; about %s to go at that pace", eta);
                printf("\n");
            }
            printf("alpha    ");
            for (int m = 0; m < s.M; m++) printf(" %s %.4f", m < run.M ? run.domains[m] : "?", s.alpha[m]);
            printf("\n");
            printf("finished  %s\n", !strcmp(s.step, "done") ? "yes" : "no");
            rc = print_size(st, &s, NULL, &e);
        } else {
            printf("position  no full state committed yet\n");
            if (hdamage[0]) {
                printf("HEAD      cannot be used (");
                term_text(stdout, hdamage);
                printf("), and of the %zu states listed none decodes as this run's\n", nlisted);
            }
            ledger_speed sp;
            ledger_speed_read(st, T, &sp);
            uint64_t ahead = c.n ? c.rec[c.n - 1].seq : 0;
            int by_rows = !c.n && sp.reached_seq > ahead;
            if (by_rows) ahead = sp.reached_seq;
            char why[1200];
            if (audit_store_stranded(st, why, sizeof why))
                printf("STRANDED  %s has %s\n", url, why);
            else if (ahead)
                printf("at risk   %llu steps: a resume starts from the beginning (%s reach run position %llu)\n",
                       (unsigned long long)ahead, by_rows ? "metrics rows" : "alpha records",
                       (unsigned long long)ahead);
        }
        if (!rc) rc = print_diverged(st, NULL, &e);
        printf("alpha log %zu records%s\n", c.n, c.ok ? "" : " (chain broken: run tandem alpha --verify)");
        if (!rc) rc = print_lease(st, NULL, &e);
    }
    if (have) rec_state_free(&s);
    audit_chain_free(&c);
    rec_run_free(&run);
    free(cfg);
    store_close(st);
    if (rc) fprintf(stderr, "tandem status: %s\n", e.msg);
    *out = e;
    return rc;
}

static int run_status(const cli_args *a) {
    const char *url = a->arg[0];
    tdm_err e = {0};
    if (!cli_json(a)) return status(url, NULL, &e);
    char *body = NULL;
    size_t len = 0;
    FILE *j = open_memstream(&body, &len);
    int rc = j ? status(url, j, &e) : err_set(&e, ERR_INTERNAL, "out of memory");
    if (!j) fprintf(stderr, "tandem status: %s\n", e.msg);
    if (j) fclose(j);
    json_document(stdout, rc, e.msg, body);
    free(body);
    return rc;
}

int cmd_status(int argc, char **argv) { return cli_run(&SPEC, run_status, argc, argv); }
