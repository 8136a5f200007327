/* cmd_verify.c — `tandem verify STORE`: checks the pinned config (RUN and the change
 * records, as `tandem run` reads them), re-hashes every state manifest, every blob they
 * reference and every α record; reports each fault by name and exits 3 when there is
 * any. Blobs no manifest references are listed as orphans (left by an interrupted
 * commit or gc; `tandem gc` removes them), which is not a fault. A store that is not
 * there, or holds no run at all, is an error (exit 3), never "0 faults". `--json`: the
 * same report as one JSON object on stdout (docs/json.md). Metrics rows (metrics/) are
 * not part of the audit trail: one that cannot be read is a note, not a fault (a run
 * writes it again when it passes that episode, `tandem metrics` skips it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "config/run_config.h"
#include "ledger/verify.h"
#include "util/json.h"

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

/* The report as text: its lines in the order the checks ran, then the totals. */
static void print_text(const char *url, const ledger_verify_report *r) {
    for (size_t i = 0; i < r->nlines; i++) {
        const ledger_verify_line *l = &r->lines[i];
        switch (l->kind) {
        case VERIFY_FAULT: printf("FAULT %s\n", l->text); break;
        case VERIFY_OK: printf("%-5s %s\n", "ok", l->text); break;
        case VERIFY_BAD: printf("%-5s %s\n", "BAD", l->text); break;
        case VERIFY_CHAIN: printf("%-5s %s\n", r->alpha_chain_ok ? "ok" : "BAD", l->text); break;
        case VERIFY_NOTE: printf("note  %s\n", l->text); break;
        }
    }
    if (r->chain_read)
        printf("%s: %zu states, %zu blobs (%.3f GB), %zu alpha records verified; %ld faults\n", url, r->states,
               r->blobs, r->blob_bytes / 1e9, r->alpha_records, r->faults);
}

/* The report as the members of --json's object (docs/json.md). */
static void print_json(const json_out *j, const ledger_pin *pin, const ledger_verify_report *r) {
    fprintf(j->body, ",\"run_pin_ok\":%s", pin->ok ? "true" : "false");
    for (size_t i = 0; i < r->nlines; i++) {
        const ledger_verify_line *l = &r->lines[i];
        if (l->kind == VERIFY_FAULT) {
            fputc(',', j->faults);
            json_str(j->faults, l->text);
        } else if (l->state) {
            fprintf(j->states, ",{\"key\":");
            json_str(j->states, l->text);
            fprintf(j->states, ",\"ok\":%s}", l->kind == VERIFY_OK ? "true" : "false");
        }
    }
    if (!r->chain_read) return;
    fprintf(j->body, ",\"alpha_records\":%zu,\"alpha_chain_ok\":%s", r->alpha_records,
            r->alpha_chain_ok ? "true" : "false");
    fprintf(j->body, ",\"mixture_ok\":%s", r->mixture_ok < 0 ? "null" : r->mixture_ok ? "true" : "false");
    fprintf(j->body, ",\"damaged_metrics\":[");
    for (size_t i = 0; i < r->ndamaged; i++) {
        if (i) fputc(',', j->body);
        json_str(j->body, r->damaged_metrics[i]);
    }
    fprintf(j->body, "]");
    if (r->orphan_blobs >= 0) fprintf(j->body, ",\"orphan_blobs\":%ld", r->orphan_blobs);
    else fprintf(j->body, ",\"orphan_blobs\":null");
    fprintf(j->body, ",\"states\":%zu,\"blobs\":%zu,\"blob_bytes\":%llu,\"fault_count\":%ld", r->states, r->blobs,
            (unsigned long long)r->blob_bytes, r->faults);
}

/* The command: the pin read as `tandem run` reads it, the audit (ledger/verify.h), the
 * report printed; with --json to j's streams instead of stdout, and the error left in
 * *out for the caller's document (it is on stderr either way). */
static int verify(const char *url, const json_out *j, tdm_err *out) {
    tdm_err e = {0};
    store *st = store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!st) {
        fprintf(stderr, "tandem verify: %s\n", e.msg);
        *out = e;
        return e.code;
    }
    int health = RUN_CONFIG_OK;
    int rc = run_config_check(st, &health, &e);
    if (!rc && health == RUN_CONFIG_NO_RUN)
        rc = err_set(&e, ERR_STORE, "%s holds no run: no RUN, HEAD, states or alpha records "
                     "(check the store URL)", url);
    char problem[sizeof e.msg];
    snprintf(problem, sizeof problem, "%s", health != RUN_CONFIG_OK ? e.msg : "");
    /* the pinned config, for the checks against it (seed, mode, domain names) */
    config *cfg = calloc(1, sizeof *cfg); /* ~95 KB: off the stack (ulimit -s 128) */
    rec_run run;
    memset(&run, 0, sizeof run);
    ledger_pin pin = {.ok = health == RUN_CONFIG_OK, .problem = problem};
    if (!rc && !cfg) rc = err_set(&e, ERR_INTERNAL, "out of memory");
    if (!rc && pin.ok) {
        tdm_err pe;
        pin.have = run_config_read(st, cfg, NULL, 0, &pe) == 0 && run_config_read_run(st, &run, &pe) == 0;
        if (pin.have) {
            pin.seed = cfg->run.seed;
            pin.fixed = cfg->run.mode == CONFIG_MODE_FIXED;
            pin.M = run.M;
            pin.names = (const char (*)[REC_DOMAIN_MAX])run.domains;
            pin.has_run = run_config_identity(&run, &pin.run) == 0;
        }
    }
    ledger_verify_report r;
    memset(&r, 0, sizeof r);
    if (!rc) {
        rc = ledger_verify(st, url, &pin, &r, &e);
        if (j->body) print_json(j, &pin, &r);
        else print_text(url, &r);
        if (!rc && r.faults)
            rc = err_set(&e, ERR_STORE, "%s: %ld faults (%s)", url, r.faults, j->body ? "listed in faults" : "listed above");
    }
    ledger_verify_free(&r);
    rec_run_free(&run);
    free(cfg);
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
