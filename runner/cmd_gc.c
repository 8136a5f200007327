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

#include "runner/args.h"
#include "runner/audit.h"
#include "runner/ckpt.h"
#include "runner/cmds.h"

static int read_state(store *st, uint64_t seq, rec_state *s, tdm_err *e) {
    char key[64];
    snprintf(key, sizeof key, "states/%llu.mp", (unsigned long long)seq);
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(st, key, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND) return err_set(e, ERR_STORE, "%s vanished during gc", key);
    if (rc) return rc;
    rc = rec_state_decode(data, n, key, s, e);
    free(data);
    return rc;
}

/* Every chunk of the state is present and hashes to its name. */
static int state_verifies(store *st, uint64_t seq) {
    rec_state s;
    tdm_err e;
    if (read_state(st, seq, &s, &e)) return 0;
    int ok = 1;
    for (size_t t = 0; ok && t < s.ntensors; t++)
        for (size_t k = 0; ok && k < s.tensors[t].nchunks; k++) {
            char hex[65], key[80];
            sha256_hex(&s.tensors[t].chunks[k], hex);
            snprintf(key, sizeof key, "blobs/%s", hex);
            void *b = NULL;
            size_t n = 0;
            ok = store_get_verified(st, key, &s.tensors[t].chunks[k], &b, &n, &e) == 0;
            free(b);
        }
    rec_state_free(&s);
    return ok;
}

static int contains(const uint64_t *v, size_t n, uint64_t x) {
    for (size_t i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

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
    uint64_t *seqs = NULL, *pins = NULL, *keepv = NULL;
    size_t ns = 0, np = 0, nk = 0;
    if (!rc) rc = audit_state_seqs(st, &seqs, &ns, &e);
    rec_head h;
    rec_state hs;
    int have = 0;
    if (!rc && (rc = audit_head(st, &h, &hs, &have, &e)) == ERR_STORE)
        err_prefix(&e, "refusing to collect garbage: ");
    if (have) rec_state_free(&hs);
    if (!rc) {
        store_list l;
        rc = store_list_prefix(st, "pins/", &l, &e);
        pins = calloc(l.n + 1, sizeof *pins);
        for (size_t i = 0; !rc && i < l.n; i++) {
            char *end;
            unsigned long long v = strtoull(l.keys[i] + 5, &end, 10);
            if (!*end && end != l.keys[i] + 5) pins[np++] = v;
        }
        store_list_free(&l);
    }
    if (!rc) {
        keepv = calloc(ns + np + 2, sizeof *keepv);
        for (size_t i = ns > (size_t)keep ? ns - (size_t)keep : 0; i < ns; i++) keepv[nk++] = seqs[i];
        if (have && !contains(keepv, nk, h.seq)) keepv[nk++] = h.seq;
        for (size_t i = ns; have && i-- > 0;) /* newest verified state older than HEAD's */
            if (seqs[i] < h.seq && state_verifies(st, seqs[i])) {
                if (!contains(keepv, nk, seqs[i])) keepv[nk++] = seqs[i];
                break;
            }
        for (size_t i = 0; i < np; i++)
            if (contains(seqs, ns, pins[i]) && !contains(keepv, nk, pins[i])) keepv[nk++] = pins[i];
    }
    size_t deleted_states = 0, deleted_blobs = 0;
    for (size_t i = 0; !rc && i < ns; i++) {
        if (contains(keepv, nk, seqs[i])) continue;
        char key[64];
        snprintf(key, sizeof key, "states/%llu.mp", (unsigned long long)seqs[i]);
        printf("%s %s\n", dry ? "would delete" : "delete", key);
        if (!dry) {
            ckpt_test_hook("gc");
            int r = store_delete(st, key, &e);
            if (r && r != STORE_NOT_FOUND) rc = r;
        }
        deleted_states++;
    }
    /* blobs referenced by what is kept; if a kept manifest cannot be read, keep all blobs */
    sha256_digest *ref = NULL;
    size_t nref = 0, capref = 0;
    int keep_all_blobs = 0;
    for (size_t i = 0; !rc && i < nk; i++) {
        rec_state s;
        tdm_err se;
        if (read_state(st, keepv[i], &s, &se)) {
            fprintf(stderr, "tandem gc: %s; keeping every blob\n", se.msg);
            keep_all_blobs = 1;
            break;
        }
        for (size_t t = 0; t < s.ntensors; t++)
            for (size_t k = 0; k < s.tensors[t].nchunks; k++) {
                if (nref == capref) {
                    capref = capref ? 2 * capref : 256;
                    ref = realloc(ref, capref * sizeof *ref);
                    if (!ref) {
                        rc = err_set(&e, ERR_INTERNAL, "out of memory");
                        break;
                    }
                }
                ref[nref++] = s.tensors[t].chunks[k];
            }
        rec_state_free(&s);
    }
    if (!rc && !keep_all_blobs) {
        store_list l;
        rc = store_list_prefix(st, "blobs/", &l, &e);
        for (size_t i = 0; !rc && i < l.n; i++) {
            sha256_digest d;
            int used = 0;
            if (sha256_parse_hex(l.keys[i] + 6, &d) == 0)
                for (size_t j = 0; j < nref && !used; j++) used = sha256_equal(&ref[j], &d);
            else used = 1; /* not ours to judge */
            if (used) continue;
            if (dry) printf("would delete %s\n", l.keys[i]);
            else {
                ckpt_test_hook("gc");
                int r = store_delete(st, l.keys[i], &e);
                if (r && r != STORE_NOT_FOUND) rc = r;
            }
            deleted_blobs++;
        }
        store_list_free(&l);
    }
    if (!rc)
        printf("%s: %s %zu of %zu states and %zu blobs; kept %zu states (newest %ld, HEAD's, the "
               "previous verified one, %zu pinned); alpha records untouched\n",
               url, dry ? "would delete" : "deleted", deleted_states, ns, deleted_blobs, nk, keep, np);
    free(ref);
    free(seqs);
    free(pins);
    free(keepv);
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
    snprintf(key, sizeof key, "pins/%llu", seq);
    snprintf(skey, sizeof skey, "states/%llu.mp", seq);
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
