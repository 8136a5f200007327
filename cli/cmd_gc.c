/* cmd_gc.c — retention (DESIGN.md §5): `tandem gc STORE --keep N [--dry-run] [--force]`
 * and `tandem pin STORE SEQ [--remove]`.
 *
 * gc keeps the newest N states, the state HEAD names, the newest older state that
 * verifies (the fall-back if HEAD's state rots), and every pinned state (pins/<seq>);
 * it deletes the other state manifests first and then the blobs that no kept manifest
 * references. That order makes it safe to kill at any moment: a manifest is never left
 * pointing at a deleted blob, and a re-run finishes the job. α records, RUN, HEAD, the
 * lease and config changes are never touched. Because a running writer uploads blobs
 * before it writes their manifest, gc refuses to run while a writer holds the lease
 * (unless --force), except a stale lease whose holder is provably gone (audit.h), and
 * stops at its next deletion when a run takes the lease while it collects. It also removes
 * a file store's temporaries of killed writes, an hour old (store_sweep_temporaries). gc and
 * pin never create a store: a missing one is exit 3. `gc --json`: the report as one JSON
 * object on stdout (docs/json.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ledger/audit.h"
#include "ledger/ckpt.h"
#include "ledger/keys.h"
#include "ledger/read.h"
#include "ledger/retain.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "config/run_config.h"
#include "runner/run.h"
#include "util/args.h"
#include "util/json.h"

static const cli_opt GC_OPTS[] = {
    {"--keep", CLI_INT, "N",
     "keep the newest N states (required); HEAD's state, the\n"
     "newest older one that verifies and pinned ones stay too",
     NULL, 1, 1L << 30, NULL, NULL},
    {"--dry-run", CLI_SWITCH, NULL, "print what would be deleted; delete nothing", NULL, 0, 0, NULL, NULL},
    {"--force", CLI_SWITCH, NULL, "collect although a run holds the lease, or its writes\n"
                                  "may still land (S3): only when its writer is dead and\n"
                                  "none of its requests in flight (a live one uploads\n"
                                  "blobs before their manifest)", NULL, 0, 0, NULL, NULL},
    {"--json", CLI_SWITCH, NULL, "one JSON object on stdout (docs/json.md)", NULL, 0, 0, NULL, NULL},
    CLI_FORMAT_TABLE_JSON,
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec GC_SPEC = {"gc", "STORE --keep N", 1, 1, "a STORE is required",
                                 "Deletes old state manifests, then the blobs no kept manifest references\n"
                                 "(safe to kill at any moment; a re-run finishes the job). Kept: the newest\n"
                                 "N states, the state HEAD names, the newest older state that verifies and\n"
                                 "every pinned state (tandem pin). Alpha records, RUN, HEAD, the lease and\n"
                                 "config changes are never touched. A stop signal (TERM, INT, ...) ends it\n"
                                 "before its next deletion: exit 75; exit 2 when a run holds or takes the\n"
                                 "lease, 3 for a store that cannot be read.",
                                 GC_OPTS, NULL};

/* A line of retain_collect's log: 0 a state's deletion, 1 a blob's ("would delete KEY" or
 * "delete KEY"; *key is KEY), 2 anything else, a note (*key is the line). */
static int log_line(const char *line, const char **key) {
    const char *k = !strncmp(line, "would delete ", 13) ? line + 13 : !strncmp(line, "delete ", 7) ? line + 7 : NULL;
    int kind = !k ? 2 : !strncmp(k, LEDGER_STATES, strlen(LEDGER_STATES)) ? 0
               : !strncmp(k, LEDGER_BLOBS, strlen(LEDGER_BLOBS))          ? 1
                                                                          : 2;
    *key = kind < 2 ? k : line;
    return kind;
}

/* ,"deleted":{"states":[...],"blobs":[...]},"notes":[...] from retain_collect's log (a
 * note goes to stderr too). */
static void json_log(FILE *j, char *log) {
    static const char *const heads[] = {",\"deleted\":{\"states\":[", "],\"blobs\":[", "]},\"notes\":["};
    for (int kind = 0; kind < 3; kind++) {
        fputs(heads[kind], j);
        int n = 0;
        for (char *p = log; p && *p;) {
            size_t len = strcspn(p, "\n");
            char end = p[len];
            p[len] = '\0';
            const char *key;
            if (log_line(p, &key) == kind) {
                if (n++) fputc(',', j);
                json_str(j, key);
                if (kind == 2) fprintf(stderr, "tandem gc: %s\n", key);
            }
            p[len] = end;
            p += len + (end == '\n');
        }
    }
    fputc(']', j);
}

static const char *lease_state_name(int state) {
    return state == AUDIT_LEASE_RELEASED ? "released" : state == AUDIT_LEASE_HELD ? "held"
           : state == AUDIT_LEASE_STALE  ? "stale"
                                         : "none";
}

/* The lease as gc first saw it; every deletion checks that it is unchanged (retain.h's
 * guard). A run that starts while gc collects takes the lease (a new epoch) before it
 * uploads anything, so its blobs, whose manifests gc has not read, are never taken for
 * garbage. */
/* How old a file store's temporary must be before gc removes it (seconds). */
#define GC_TEMP_MIN_AGE_S 3600.0

typedef struct gc_lease_guard {
    int present;
    rec_lease seen;
    int taken; /* lease_unchanged found the lease taken since (the error says by whom) */
} gc_lease_guard;

static int read_raw_lease(store *st, gc_lease_guard *g, tdm_err *e) {
    memset(g, 0, sizeof *g);
    int rc = ledger_read(st, REC_KIND_LEASE, LEDGER_LEASE, NULL, &g->seen, e);
    if (rc == STORE_NOT_FOUND || rc == STORE_CORRUPT) return 0; /* none: a run writes one first */
    if (!rc) g->present = 1;
    return rc;
}

static int lease_unchanged(store *st, void *ctx, tdm_err *e) {
    gc_lease_guard *was = ctx;
    gc_lease_guard now;
    int rc = read_raw_lease(st, &now, e);
    if (rc) return rc;
    if (now.present == was->present &&
        (!now.present || (now.seen.epoch == was->seen.epoch && now.seen.released == was->seen.released)))
        return 0;
    was->taken = 1;
    /* what gc deleted before it saw this is the caller's to say (gc_taken_over) */
    return err_set(e, ERR_USAGE,
                   "%s: a run took the lease while gc was collecting (writer epoch %llu, host %s, pid "
                   "%llu): gc stopped (a run's new blobs look unreferenced until their manifest is "
                   "written)",
                   store_url(st), now.present ? (unsigned long long)now.seen.epoch : 0ULL,
                   now.present ? now.seen.host : "?", now.present ? (unsigned long long)now.seen.pid : 0ULL);
}

/* Completes lease_unchanged's error with what gc deleted before it saw the new lease
 * (retain.h: the one deletion in flight). Each deletion is preceded by a check, so every
 * deletion but the last landed while the lease was still as gc found it. The last one may
 * have landed after the run took the lease, and a run that finds an object stored uses it
 * (its replay of a commit cut off before its manifest finds that commit's blobs and does
 * not upload them): a state manifest or an orphan blob gc read first and put back
 * (rep->put_back); a blob of a state gc deleted it names as possibly lost, with how to find
 * out and mend it (rep->last_deleted). */
static void gc_taken_over(const char *url, const retain_report *rep, tdm_err *e) {
    size_t ns = rep->deleted_states, nb = rep->deleted_blobs;
    if (rep->put_back[0] && rep->put_back_broken)
        err_append(e, ". It put back %s, whose deletion may have landed after the run took the lease, but its blobs "
                   "were deleted meanwhile (by the run's retention, or another gc): that state cannot be loaded; "
                   "run gc again once that run has stopped (it removes it)", rep->put_back);
    else if (rep->not_put_back[0])
        err_append(e, ". Its deletion of %s may have landed after the run took the lease, but that state's blobs "
                   "were gone (deleted by the run's retention, or another gc), so it was not put back; the %zu "
                   "state%s and %zu blob%s it deleted before went while the lease was as gc found it. Run gc again "
                   "once that run has stopped", rep->not_put_back, ns, ns == 1 ? "" : "s", nb, nb == 1 ? "" : "s");
    else if (rep->put_back[0])
        err_append(e, ". It put back %s, whose deletion may have landed after the run took the lease (gc had read it "
                   "first), so nothing the run uses is gone; the %zu state%s and %zu blob%s it deleted before went "
                   "while the lease was as gc found it. Run gc again once that run has stopped", rep->put_back, ns,
                   ns == 1 ? "" : "s", nb, nb == 1 ? "" : "s");
    else if (rep->last_deleted[0])
        err_append(e, " after deleting %zu state%s and %zu blob%s. The last deletion, %s, came after gc's last look at "
                   "the lease: if the run found it stored and used it, a state of the run lacks it. Once the run has "
                   "stopped, run `tandem verify %s` (it names such a state; the next run falls back and replays), "
                   "then gc again", ns, ns == 1 ? "" : "s", nb, nb == 1 ? "" : "s", rep->last_deleted, url);
    else if (ns || nb)
        err_append(e, " after deleting %zu state%s and %zu blob%s, all before the run took the lease. Run gc again once "
                   "that run has stopped", ns, ns == 1 ? "" : "s", nb, nb == 1 ? "" : "s");
    else
        err_append(e, " before deleting anything. Run gc again once that run has stopped");
}

/* gc itself; with j (--json) the report goes to j as members instead of stdout, and the
 * error is left in *out for the caller's document (it is on stderr either way). */
static int gc(const char *url, long keep, int dry, int force, FILE *j, tdm_err *out) {
    int rc = 0;
    tdm_err e = {0};
    if (j) {
        fprintf(j, ",\"store\":");
        json_str(j, url);
        fprintf(j, ",\"keep\":%ld,\"dry_run\":%s,\"force\":%s", keep, dry ? "true" : "false",
                force ? "true" : "false");
    }
    store *st = store_open_existing(url, STORE_OPEN_WRITABLE, &e);
    if (!st) rc = e.code;
    if (!rc) rc = run_config_require_run(st, &e);
    /* a live writer could be between uploading blobs and writing their manifest; a lease
     * whose holder is provably gone (audit_lease_read) does not stop gc */
    int lease_read = 0, judged = 0;
    gc_lease_guard seen;
    memset(&seen, 0, sizeof seen);
    if (!rc && !force) {
        /* a dry run reads it too: what it lists is what gc would delete now, the settle
         * window of a writer's late writes included */
        audit_lease al;
        rc = audit_lease_read(st, &al, &e);
        /* every deletion checks the lease against this very reading: read again, a run
         * that took the lease in between would be what gc took as unchanged */
        if (!rc && !dry) {
            judged = 1;
            seen.present = al.state != AUDIT_LEASE_NONE;
            seen.seen = al.lease;
        }
        const rec_lease *l = &al.lease;
        if (!rc && j) { /* what gc judged the lease to be (a held one stops it) */
            lease_read = 1;
            fprintf(j, ",\"lease\":{\"state\":");
            json_str(j, lease_state_name(al.state));
            if (al.state != AUDIT_LEASE_NONE) {
                fprintf(j, ",\"epoch\":%llu,\"host\":", (unsigned long long)l->epoch);
                json_str(j, l->host);
                fprintf(j, ",\"pid\":%llu,\"why\":", (unsigned long long)l->pid);
                json_str(j, al.state == AUDIT_LEASE_RELEASED ? NULL : al.why);
            }
            fputc('}', j);
        }
        if (!rc && al.state == AUDIT_LEASE_HELD && dry)
            fprintf(j ? stderr : stdout,
                    "%snote: a run holds the lease (epoch %llu, host %s, pid %llu; %s): gc would stop "
                    "here and delete nothing; below is what it would delete once the run stops (or "
                    "with --force, if it is dead)\n",
                    j ? "tandem gc: " : "", (unsigned long long)l->epoch, l->host, (unsigned long long)l->pid,
                    al.why);
        else if (!rc && al.state == AUDIT_LEASE_HELD)
            rc = err_set(&e, ERR_USAGE,
                         "%s: a run holds the lease (epoch %llu, host %s, pid %llu; %s): stop it "
                         "first (its commits upload blobs before their manifest), or pass --force "
                         "if it is dead",
                         url, (unsigned long long)l->epoch, l->host, (unsigned long long)l->pid, al.why);
        else if (!rc && al.state == AUDIT_LEASE_STALE)
            fprintf(j ? stderr : stdout, /* with --json: the human line on stderr */
                    "%snote: the lease of writer epoch %llu (host %s, pid %llu) is stale: %s; collecting\n",
                    j ? "tandem gc: " : "", (unsigned long long)l->epoch, l->host, (unsigned long long)l->pid,
                    al.why);
        /* writes an earlier writer gave up on may still land (S3: a request held in a proxy):
         * what they could recreate stays until they cannot. A released lease says until when;
         * one whose holder died (stale) cannot, and a request it had in flight lands within
         * the settle window of its death, which comes after its last sign of life: gc counts
         * GC_TEMP_MIN_AGE_S (as for temporaries) or the window, the longer, from that sign */
        double now = (double)time(NULL), until = 0, lease_age = -1;
        /* the hour, or the store's own window where longer (S3 with a long TANDEM_S3_TIMEOUT) */
        double window = fmax(GC_TEMP_MIN_AGE_S, rc ? 0 : store_settle_window_s(st));
        /* the holder's own window where it said one (its TANDEM_S3_TIMEOUT, not gc's) */
        if (!rc && al.state != AUDIT_LEASE_NONE && l->has_window)
            window = fmax(window, fmin(l->settle_window, CKPT_SETTLE_MAX_S));
        /* both counted from now: the settle window's rest by the lease's age on the store's
         * clock, the stale holder's by its signs of life there too (audit_lease_read) */
        tdm_err ae;
        if (!rc && al.state != AUDIT_LEASE_NONE && l->has_settle) {
            if (store_age(st, LEDGER_LEASE, &lease_age, &ae) != 0) lease_age = -1;
            until = now + audit_settle_left(l, lease_age, now);
        }
        if (!rc && al.state == AUDIT_LEASE_STALE && now - al.age + window > until)
            until = now - al.age + window;
        if (until > now) {
            store_note_lost_writer(st, fmin(until - now, CKPT_SETTLE_MAX_S));
            double left = store_unsettled_s(st); /* 0 where writes land when they return */
            if (left > 0)
                fprintf(j ? stderr : stdout,
                        "%snote: writes of writer epoch %llu may still land for %.0f s more (%s): the "
                        "states they could recreate and unreferenced blobs are kept until then; run gc "
                        "again after that, or pass --force if none of its requests can be in flight\n",
                        j ? "tandem gc: " : "", (unsigned long long)l->epoch, left,
                        al.state == AUDIT_LEASE_STALE ? "it stopped without releasing the lease"
                                                       : "it gave up on some without an answer");
        }
    }
    if (j && !lease_read) fprintf(j, ",\"lease\":null");
    retain_report rep;
    memset(&rep, 0, sizeof rep);
    char *log = NULL;
    size_t loglen = 0;
    FILE *logf = j ? open_memstream(&log, &loglen) : stdout;
    if (!logf) rc = err_set(&e, ERR_INTERNAL, "out of memory");
    retain_guard guard = {lease_unchanged, &seen};
    if (!rc && !dry && !judged) rc = read_raw_lease(st, &seen, &e); /* --force: as it is now */
    if (!rc) {
        rc = retain_collect(st, keep, 1, dry, dry ? NULL : &guard, logf, &rep, &e);
        if (j) {
            fclose(logf);
            logf = NULL;
            json_log(j, log); /* what was deleted (or would be), also when collecting failed */
        }
    }
    if (logf && logf != stdout) fclose(logf);
    free(log);
    /* what writes killed midway left and nothing lists (a file store's .tmp-* files, up to
     * a chunk each); an hour old at least, so that no live write loses its file */
    size_t ntmp = 0;
    uint64_t tmp_bytes = 0;
    if (!rc && !dry) rc = lease_unchanged(st, &seen, &e);
    if (rc && seen.taken) gc_taken_over(url, &rep, &e);
    if (rc == ERR_STOPPED) /* the stop's own error only: another keeps its exit status */
        err_append(&e, " (after deleting %zu state%s and %zu blob%s); nothing else changed: run tandem gc again "
                   "to finish", rep.deleted_states, rep.deleted_states == 1 ? "" : "s", rep.deleted_blobs,
                   rep.deleted_blobs == 1 ? "" : "s");
    if (rep.pinned_lost[0])
        fprintf(j ? stderr : stdout, "%snote: %s was pinned as it was deleted, but its blobs were gone (another "
                "gc's deletion): not put back; remove its pin (tandem pin %s SEQ --remove)\n",
                j ? "tandem gc: " : "", rep.pinned_lost, url);
    if (!rc && !dry) rc = store_sweep_temporaries(st, GC_TEMP_MIN_AGE_S, &ntmp, &tmp_bytes, &e);
    if (!rc && j)
        fprintf(j, ",\"states\":%zu,\"deleted_states\":%zu,\"deleted_blobs\":%zu,\"kept_states\":%zu,"
                "\"pinned\":%zu,\"deleted_temporaries\":%zu,\"temporary_bytes\":%llu", rep.states,
                rep.deleted_states, rep.deleted_blobs, rep.kept, rep.pinned, ntmp, (unsigned long long)tmp_bytes);
    else if (!rc)
        printf("%s: %s %zu of %zu states and %zu blobs; kept %zu states (newest %ld, HEAD's, the "
               "previous verified one, %zu pinned); alpha records untouched\n",
               url, dry ? "would delete" : "deleted", rep.deleted_states, rep.states,
               rep.deleted_blobs, rep.kept, keep, rep.pinned);
    if (!rc && !j && ntmp)
        printf("%s: removed %zu stray temporary file%s (%.1f MB) of writes killed midway\n", url, ntmp,
               ntmp == 1 ? "" : "s", (double)tmp_bytes / 1e6);
    if (st) store_close(st);
    if (rc) fprintf(stderr, "tandem gc: %s\n", e.msg);
    *out = e;
    return rc;
}

static int run_gc(const cli_args *a) {
    const char *url = a->arg[0];
    int json = cli_json(a);
    tdm_err e = {0};
    if (!cli_given(a, "--keep")) {
        fprintf(stderr, "tandem gc: --keep N is required\n");
        cli_usage(a->spec, stderr);
        if (json) json_document(stdout, 2, "--keep N is required", NULL);
        return 2;
    }
    long keep = cli_int(a, "--keep", -1);
    int dry = cli_given(a, "--dry-run") > 0, force = cli_given(a, "--force") > 0;
    /* each deletion's line leaves at once (a log file or pipe got none of them when gc was
     * killed: stdio's buffer died with it), and a stop signal ends gc before its next
     * deletion, said, exit 75 (it died by the signal: a hunt) */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!dry) {
        run_signals_install();
        store_set_stop_check(run_signal_pending);
    }
    if (!json) return gc(url, keep, dry, force, NULL, &e);
    char *body = NULL;
    size_t len = 0;
    FILE *j = open_memstream(&body, &len);
    int rc = j ? gc(url, keep, dry, force, j, &e) : err_set(&e, ERR_INTERNAL, "out of memory");
    if (!j) fprintf(stderr, "tandem gc: %s\n", e.msg);
    if (j) fclose(j);
    json_document(stdout, rc, e.msg, body);
    free(body);
    return rc;
}

int cmd_gc(int argc, char **argv) { return cli_run(&GC_SPEC, run_gc, argc, argv); }

static const cli_opt PIN_OPTS[] = {
    {"--remove", CLI_SWITCH, NULL, "remove the pin: gc may delete the state again", NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec PIN_SPEC = {"pin", "STORE SEQ", 2, 2,
                                  "a STORE and a state number SEQ are required (see tandem status)",
                                  "Keeps state SEQ of STORE (pins/<SEQ>) from tandem gc.", PIN_OPTS, NULL};

static int run_pin(const cli_args *a) {
    const char *url = a->arg[0], *word = a->arg[1];
    int remove = cli_given(a, "--remove") > 0;
    tdm_err e = {0};
    uint64_t seq = 0;
    if (args_parse_u64(word, &seq)) { /* digits only: "-5" is no state number */
        fprintf(stderr, "tandem pin: '%s' is not a state number (see tandem status)\n", word);
        return 2;
    }
    store *st = store_open_existing(url, STORE_OPEN_WRITABLE, &e);
    if (!st) {
        fprintf(stderr, "tandem pin: %s\n", e.msg);
        return e.code;
    }
    char key[64], skey[64];
    ledger_pin_key(key, sizeof key, seq);
    ledger_state_key(skey, sizeof skey, seq);
    int ex = 0, was = 0, rc = run_config_require_run(st, &e);
    if (rc) {
    } else if (remove) {
        rc = store_delete(st, key, &e);
        was = rc != STORE_NOT_FOUND; /* S3 may not say: then it reads as removed */
        if (rc == STORE_NOT_FOUND) rc = 0;
    } else if (!(rc = store_exists(st, skey, &ex, &e)) && !ex) {
        rc = err_set(&e, ERR_USAGE, "%s has no %s", url, skey);
    } else if (!rc) {
        /* a pin keeps a state for a later eval or export: one that does not decode keeps
         * nothing usable, said before it is kept */
        rec_state s;
        tdm_err de;
        if (ledger_read(st, REC_KIND_STATE, skey, NULL, &s, &de) == 0) rec_state_free(&s);
        else fprintf(stderr, "tandem pin: warning: %s (tandem verify names the damage; the pin keeps it from gc "
                     "all the same)\n", de.msg);
        rc = store_put(st, key, "pinned\n", 7, STORE_OVERWRITE, &e);
        /* a gc (or a run's checkpoint.keep) may be deleting the state right now: it checks
         * the pin as it deletes and puts back a state pinned meanwhile; pinned only if the
         * state is there once the pin is */
        for (int tries = 0; !rc && tries < 100; tries++) { /* up to 10 s: a slow store */
            if ((rc = store_exists(st, skey, &ex, &e)) || ex) break;
            nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
        }
        if (!rc && !ex) {
            tdm_err de;
            store_delete(st, key, &de);
            rc = err_set(&e, ERR_STORE, "%s was deleted while it was being pinned (a gc, or a run's "
                         "checkpoint.keep, collected it): not pinned; tandem status lists the states "
                         "there are", skey);
        }
    }
    store_close(st);
    if (rc) fprintf(stderr, "tandem pin: %s\n", e.msg);
    else if (remove && !was) printf("%s was not pinned\n", skey);
    else printf("%s %s\n", remove ? "unpinned" : "pinned", skey);
    return rc;
}

int cmd_pin(int argc, char **argv) { return cli_run(&PIN_SPEC, run_pin, argc, argv); }
