/* cmd_status.c — `tandem status STORE`: where a run stands, from its store alone.
 *
 * Run id and config digest; episode and next step; the last full commit (seq, time);
 * what a resume would lose (steps since the last full state, as far as the α records
 * show progress beyond it); commits per hour; current α; the lease holder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner/audit.h"
#include "runner/cmds.h"
#include "runner/pin.h"

int cmd_status(int argc, char **argv) {
    if (argc != 2 || !strcmp(argv[1], "--help")) {
        fprintf(argc == 2 ? stdout : stderr, "usage: tandem status STORE\n");
        return argc == 2 ? 0 : 2;
    }
    const char *url = argv[1];
    tdm_err e = {0};
    store *st = store_open(url, &e);
    if (!st) {
        fprintf(stderr, "tandem status: %s\n", e.msg);
        return e.code;
    }
    rec_run run;
    memset(&run, 0, sizeof run);
    audit_chain c;
    memset(&c, 0, sizeof c);
    rec_head h;
    rec_state s;
    int have = 0, rc = pin_read_run(st, &run, &e);
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
        int E = cfg.tandem.E, T = cfg.run.episodes;
        int per_episode = cfg.run.mode == CONFIG_MODE_FIXED ? E : E + 2;
        if (have) {
            printf("position  episode %llu/%d, next step %s", (unsigned long long)s.episode, T, s.step);
            if (!strcmp(s.step, "free")) printf(" %llu/%d", (unsigned long long)s.index + 1, E);
            printf(" (run position %llu of %llu)\n", (unsigned long long)s.seq,
                   (unsigned long long)T * (uint64_t)per_episode);
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
        void *data = NULL;
        size_t n = 0;
        rec_lease l;
        int lr = store_get(st, "lease", &data, &n, NULL, &e);
        if (lr == 0 && rec_lease_decode(data, n, "lease", &l, &e) == 0) {
            char when[64];
            audit_time(l.time, when, sizeof when);
            printf("lease     epoch %llu, host %s, pid %llu, attempt %llu, %s %s\n",
                   (unsigned long long)l.epoch, l.host, (unsigned long long)l.pid,
                   (unsigned long long)l.attempt, l.released ? "released at" : "held since", when);
        } else {
            printf("lease     none\n");
        }
        free(data);
    }
    if (have) rec_state_free(&s);
    audit_chain_free(&c);
    rec_run_free(&run);
    store_close(st);
    if (rc) fprintf(stderr, "tandem status: %s\n", e.msg);
    return rc;
}
