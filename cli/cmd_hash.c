/* cmd_hash.c — `tandem hash STORE`: the digests that identify a run's result.
 *
 * Prints the SHA-256 of the state manifest HEAD names (it covers u, the AdamW moments
 * through their chunk hashes, α, cursors and counters), its run position, and the hash
 * of the last α record with the record count (the head of the hash chain). Two runs that
 * print the same lines ended in bit-identical states with identical α histories; the
 * chaos tests compare exactly this. `--json`: the same as one JSON object (docs/json.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/keys.h"
#include "ledger/read.h"
#include "ledger/records.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "storage/sha256.h"
#include "storage/store.h"
#include "util/json.h"
#include "config/run_config.h"
#include "util/testhook.h"

static const cli_opt OPTS[] = {
    {"--json", CLI_SWITCH, NULL, "one JSON object on stdout (docs/json.md)", NULL, 0, 0, NULL, NULL},
    CLI_FORMAT_TABLE_JSON,
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"hash", "STORE", 1, 1, "a STORE is required", NULL, OPTS, NULL};

static int run_hash(const cli_args *a) {
    const char *url = a->arg[0];
    int json = cli_json(a);
    tdm_err e = {0};
    store *st = store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!st) {
        fprintf(stderr, "tandem hash: %s\n", e.msg);
        if (json) json_document(stdout, e.code, e.msg, NULL);
        return e.code;
    }
    void *mdata = NULL;
    size_t mn = 0;
    rec_head h;
    rec_state s;
    int rc = 0;
    /* a live run's commit may move HEAD on, and its retention delete the state HEAD named,
     * between the two reads: read HEAD again then (a missing state was reported) */
    for (int attempt = 0; attempt < 3; attempt++) {
        free(mdata);
        mdata = NULL;
        rc = ledger_read(st, REC_KIND_HEAD, LEDGER_HEAD, NULL, &h, &e);
        tdm_err re;
        /* a store with no run at all says so, as every other command does (a hunt) */
        if (rc == STORE_NOT_FOUND && run_config_require_run(st, &re)) rc = re.code, e = re;
        else if (rc == STORE_NOT_FOUND) rc = err_set(&e, ERR_STORE, "%s has no HEAD", url);
        testhook_stop_at("audit"); /* frozen here by the tests: HEAD read, its state not yet */
        if (!rc) rc = store_get(st, h.state, &mdata, &mn, NULL, &e);
        rec_head again;
        tdm_err ae;
        if (rc != STORE_NOT_FOUND || ledger_read(st, REC_KIND_HEAD, LEDGER_HEAD, NULL, &again, &ae) ||
            !strcmp(again.state, h.state))
            break;
    }
    if (rc == STORE_NOT_FOUND) rc = err_set(&e, ERR_STORE, "%s: %s is missing", url, h.state);
    sha256_digest d;
    if (!rc) {
        sha256(mdata, mn, &d);
        if (!sha256_equal(&d, &h.state_sha))
            rc = err_set(&e, ERR_STORE, "%s: %s does not match HEAD's SHA-256", url, h.state);
    }
    if (!rc) rc = ledger_decode(REC_KIND_STATE, mdata, mn, h.state, &s, &e);
    if (rc == STORE_CORRUPT) rc = ERR_STORE; /* e says which record and why */
    if (!rc) {
        char hex[65], ahex[65];
        sha256_hex(&d, hex);
        sha256_hex(&s.alpha_head, ahex);
        if (json) {
            printf("{\"store\":");
            json_str(stdout, url);
            printf(",\"state_key\":");
            json_str(stdout, h.state);
            printf(",\"state_sha256\":\"%s\",\"seq\":%llu,\"step\":", hex, (unsigned long long)h.seq);
            json_str(stdout, s.step);
            printf(",\"alpha_head_sha256\":\"%s\",\"alpha_records\":%llu}\n", ahex,
                   (unsigned long long)s.alpha_records);
        } else {
            printf("state %s\nseq %llu\nstep %s\nalpha %s %llu\n", hex, (unsigned long long)h.seq,
                   s.step, ahex, (unsigned long long)s.alpha_records);
        }
        rec_state_free(&s);
    }
    free(mdata);
    store_close(st);
    if (rc) fprintf(stderr, "tandem hash: %s\n", e.msg);
    if (rc && json) json_document(stdout, rc, e.msg, NULL);
    return rc;
}

int cmd_hash(int argc, char **argv) { return cli_run(&SPEC, run_hash, argc, argv); }
