/* cmd_repair.c — `tandem repair STORE [--apply]`: what a run cannot heal by itself.
 *
 * A run heals on its own from a damaged newest state (falls back, replays), a damaged or
 * missing α record past its last state (re-derived), a stale writer's objects (skipped,
 * replaced). It stops (exit 3) when the part of the α chain its newest state vouches for
 * has a hole or a damaged record: the audit trail must never have holes, and the state
 * cannot be trusted without it. `tandem repair` plans, and with --apply carries out:
 *
 *   - every state manifest a run would never use (damaged, naming a chunk that is missing
 *     or corrupt, or computed under a config generation that does not belong to the run:
 *     a fenced-out writer's) is set aside; a state of a generation the store has no
 *     change record for (a lost configs/<n>.mp) is refused instead (exit 3: only the
 *     record itself repairs that);
 *   - with the α chain broken at record t, every state that vouches for records ≥ t is set
 *     aside, and so are the records ≥ t: the run resumes from the newest state before the
 *     damage (or from the start) and re-derives them, bit for bit, by its deterministic
 *     replay;
 *   - a damaged α record past every state is set aside (the run would replace it anyway);
 *   - HEAD, when missing, damaged or naming a state that was set aside, is moved to the
 *     newest state that remains.
 *
 * "Set aside" = copied to quarantine/<epoch>/<key>, then deleted: nothing is destroyed.
 * The dry run (default) only prints the plan; --apply takes the lease first (so it never
 * races a running writer: a live one is fenced out), carries the plan out, releases it.
 * Exit 0 when nothing needs doing or the plan was applied; 1 (internal) never for a plan;
 * a dry run with work to do exits 0 and says "run again with --apply". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "config/run_config.h"
#include "ledger/audit.h"
#include "ledger/repair.h"
#include "runner/run.h"
#include "storage/store.h"

static const cli_opt OPTS[] = {
    {"--apply", CLI_SWITCH, NULL, "carry the plan out, holding the lease (a running\n"
                                  "writer is fenced out); without it, a dry run", NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"repair", "STORE", 1, 1, "a STORE is required (see tandem repair --help)",
                              "Plans (and with --apply carries out) what a run cannot heal by itself: a hole\n"
                              "or a damaged record in the alpha chain its newest state vouches for (the run\n"
                              "is rolled back to the newest state before it and replays), states a run never\n"
                              "uses, a missing or damaged HEAD. Everything removed is kept under\n"
                              "quarantine/<epoch>/. Without --apply only the plan is printed.",
                              OPTS, NULL};

static int run_repair(const cli_args *a) {
    const char *url = a->arg[0];
    int apply = cli_given(a, "--apply") > 0, rc = 0;
    tdm_err e = {0};
    /* the plan's lines leave at once, and a stop signal ends --apply between two
     * set-asides with the lease released, exit 75 (it died by the signal holding the
     * lease, which then kept gc out: a hunt) */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (apply) {
        run_signals_install();
        store_set_stop_check(run_signal_pending);
    }
    store *st = store_open_existing(url, apply ? STORE_OPEN_WRITABLE : STORE_OPEN_READ_ONLY, &e);
    if (!st) rc = e.code;
    if (!rc) rc = run_config_require_run(st, &e);
    ledger_repair_plan p;
    memset(&p, 0, sizeof p);
    if (!rc) rc = ledger_repair_plan_make(st, url, &p, &e);
    /* the plan */
    if (!rc) {
        char why[1200];
        if (p.n == 0 && !p.move_head && audit_store_stranded(st, why, sizeof why)) {
            /* nothing repair can set aside or move, and a run cannot go on: not "whole" */
            rc = err_set(&e, ERR_STORE, "%s has %s; repair has nothing to rebuild from (no state is left)", url,
                         why);
        } else if (p.n == 0 && !p.move_head) {
            printf("%s: nothing to repair (the states a run would use and the α chain they vouch "
                   "for are whole)\n", url);
        } else {
            printf("%s: %s\n", url, apply ? "repairing" : "repair plan (a dry run; nothing changes)");
            for (size_t i = 0; i < p.n; i++)
                printf("  set aside %-24s %s\n", p.items[i].key, p.items[i].why);
            if (p.move_head)
                printf("  move HEAD to %s (run position %llu)\n", p.head_key, (unsigned long long)p.head_seq);
            else if (p.head_bad)
                printf("  remove HEAD: no state remains; the run starts again from its seed\n");
        }
    }
    /* carry it out, holding the lease */
    if (!rc && apply && ledger_repair_needed(&p)) {
        uint64_t epoch = 0;
        /* a stop before the lease is taken changes nothing */
        if (run_signal_pending())
            rc = err_set(&e, ERR_STOPPED, "%s: stopped by a signal before carrying the plan out; nothing changed",
                         url);
        else
            rc = ledger_repair_apply(st, url, &p, &epoch, &e); /* ERR_STOPPED: stopped between set-asides */
        /* (a plan that only moves HEAD sets nothing aside: no folder to name, a hunt) */
        if (!rc && p.n)
            printf("done: what was set aside is under %s/quarantine/%llu/; `tandem run` resumes\n", url,
                   (unsigned long long)epoch);
        else if (!rc)
            printf("done: HEAD %s; `tandem run` resumes\n", p.move_head ? "moved" : "removed");
    } else if (!rc && (p.n || p.move_head)) {
        printf("run again with --apply to carry it out\n");
    }
    ledger_repair_free(&p);
    if (st) store_close(st);
    if (rc) fprintf(stderr, "tandem repair: %s\n", e.msg);
    return rc;
}

int cmd_repair(int argc, char **argv) { return cli_run(&SPEC, run_repair, argc, argv); }
