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

#include "runner/audit.h"
#include "runner/cmds.h"
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

int cmd_status(int argc, char **argv) {
    if (argc != 2 || !strcmp(argv[1], "--help")) {
        fprintf(argc == 2 ? stdout : stderr, "usage: tandem status STORE\n");
        return argc == 2 ? 0 : 2;
    }
    const char *url = argv[1];
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
        } else {
            printf("position  no full state committed yet\n");
        }
        printf("alpha log %zu records%s\n", c.n, c.ok ? "" : " (chain broken: run tandem alpha --verify)");
        rc = print_lease(st, &e);
    }
    if (have) rec_state_free(&s);
    audit_chain_free(&c);
    rec_run_free(&run);
    store_close(st);
    if (rc) fprintf(stderr, "tandem status: %s\n", e.msg);
    return rc;
}
