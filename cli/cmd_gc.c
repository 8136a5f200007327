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
 * (unless --force), except a stale lease whose holder is provably gone (audit.h). gc and
 * pin never create a store: a missing one is exit 3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/audit.h"
#include "ledger/keys.h"
#include "ledger/retain.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "runner/args.h"

static const cli_opt GC_OPTS[] = {
    {"--keep", CLI_INT, "N",
     "keep the newest N states (required); HEAD's state, the\n"
     "newest older one that verifies and pinned ones stay too",
     NULL, 1, 1L << 30, NULL, NULL},
    {"--dry-run", CLI_SWITCH, NULL, "print what would be deleted; delete nothing", NULL, 0, 0, NULL, NULL},
    {"--force", CLI_SWITCH, NULL, "collect although a run holds the lease: only when its\n"
                                  "writer is dead (a live one uploads blobs before their\n"
                                  "manifest)", NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec GC_SPEC = {"gc", "STORE", 1, 1, "a STORE is required",
                                 "Deletes old state manifests, then the blobs no kept manifest references\n"
                                 "(safe to kill at any moment; a re-run finishes the job). Kept: the newest\n"
                                 "N states, the state HEAD names, the newest older state that verifies and\n"
                                 "every pinned state (tandem pin). Alpha records, RUN, HEAD, the lease and\n"
                                 "config changes are never touched.",
                                 GC_OPTS, NULL};

static int run_gc(const cli_args *a) {
    const char *url = a->arg[0];
    if (!cli_given(a, "--keep")) {
        fprintf(stderr, "tandem gc: --keep N is required\n");
        cli_usage(a->spec, stderr);
        return 2;
    }
    long keep = cli_int(a, "--keep", -1);
    int dry = cli_given(a, "--dry-run") > 0, force = cli_given(a, "--force") > 0, rc = 0;
    tdm_err e = {0};
    store *st = store_open_existing(url, STORE_OPEN_WRITABLE, &e);
    if (!st) rc = e.code;
    /* a live writer could be between uploading blobs and writing their manifest; a lease
     * whose holder is provably gone (audit_lease_read) does not stop gc */
    if (!rc && !force && !dry) {
        audit_lease al;
        rc = audit_lease_read(st, &al, &e);
        const rec_lease *l = &al.lease;
        if (!rc && al.state == AUDIT_LEASE_HELD)
            rc = err_set(&e, ERR_USAGE,
                         "%s: a run holds the lease (epoch %llu, host %s, pid %llu; %s): stop it "
                         "first (its commits upload blobs before their manifest), or pass --force "
                         "if it is dead",
                         url, (unsigned long long)l->epoch, l->host, (unsigned long long)l->pid, al.why);
        else if (!rc && al.state == AUDIT_LEASE_STALE)
            printf("note: the lease of writer epoch %llu (host %s, pid %llu) is stale: %s; "
                   "collecting\n",
                   (unsigned long long)l->epoch, l->host, (unsigned long long)l->pid, al.why);
    }
    retain_report rep;
    if (!rc) rc = retain_collect(st, keep, 1, dry, stdout, &rep, &e);
    if (!rc)
        printf("%s: %s %zu of %zu states and %zu blobs; kept %zu states (newest %ld, HEAD's, the "
               "previous verified one, %zu pinned); alpha records untouched\n",
               url, dry ? "would delete" : "deleted", rep.deleted_states, rep.states,
               rep.deleted_blobs, rep.kept, keep, rep.pinned);
    if (st) store_close(st);
    if (rc) fprintf(stderr, "tandem gc: %s\n", e.msg);
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
    int ex = 0, rc = 0;
    if (remove) {
        rc = store_delete(st, key, &e);
        if (rc == STORE_NOT_FOUND) rc = 0;
    } else if (!(rc = store_exists(st, skey, &ex, &e)) && !ex) {
        rc = err_set(&e, ERR_USAGE, "%s has no %s", url, skey);
    } else if (!rc) {
        rc = store_put(st, key, "pinned\n", 7, STORE_OVERWRITE, &e);
    }
    store_close(st);
    if (rc) fprintf(stderr, "tandem pin: %s\n", e.msg);
    else printf("%s %s\n", remove ? "unpinned" : "pinned", skey);
    return rc;
}

int cmd_pin(int argc, char **argv) { return cli_run(&PIN_SPEC, run_pin, argc, argv); }
