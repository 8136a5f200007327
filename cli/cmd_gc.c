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
#include "runner/args.h"
#include "cli/cmds.h"

int cmd_gc(int argc, char **argv) {
    const char *url = NULL;
    long keep = -1;
    int dry = 0, force = 0, rc = 0;
    tdm_err e = {0};
    args_iter it;
    args_init(&it, argc, argv, 1);
    while (!rc && args_next(&it)) {
        if (!it.flag[0]) {
            rc = args_positional(&it, &url, "STORE", &e);
        } else if (!strcmp(it.flag, "--help")) {
            printf("usage: tandem gc STORE --keep N [--dry-run] [--force]\n");
            return 0;
        } else if (!strcmp(it.flag, "--keep")) {
            rc = args_int(&it, 1, 1L << 30, &keep, &e);
        } else if (!strcmp(it.flag, "--dry-run")) {
            dry = 1;
        } else if (!strcmp(it.flag, "--force")) {
            force = 1;
        } else {
            rc = err_set(&e, ERR_USAGE, "unknown option %s", it.flag);
        }
    }
    if (!rc && (!url || keep < 0)) rc = err_set(&e, ERR_USAGE, "usage: tandem gc STORE --keep N [--dry-run]");
    store *st = rc ? NULL : store_open_existing(url, STORE_OPEN_WRITABLE, &e);
    if (!rc && !st) rc = e.code;
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

int cmd_pin(int argc, char **argv) {
    int remove = argc == 4 && !strcmp(argv[3], "--remove");
    if (!(argc == 3 || remove)) {
        fprintf(stderr, "usage: tandem pin STORE SEQ [--remove]\n");
        return 2;
    }
    tdm_err e = {0};
    char *end;
    unsigned long long seq = strtoull(argv[2], &end, 10);
    if (*end || end == argv[2]) {
        fprintf(stderr, "tandem pin: '%s' is not a state number (see tandem status)\n", argv[2]);
        return 2;
    }
    store *st = store_open_existing(argv[1], STORE_OPEN_WRITABLE, &e);
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
        rc = err_set(&e, ERR_USAGE, "%s has no %s", argv[1], skey);
    } else if (!rc) {
        rc = store_put(st, key, "pinned\n", 7, STORE_OVERWRITE, &e);
    }
    store_close(st);
    if (rc) fprintf(stderr, "tandem pin: %s\n", e.msg);
    else printf("%s %s\n", remove ? "unpinned" : "pinned", skey);
    return rc;
}
