/* cmd_mixture.c — `tandem mixture STORE [--last-fraction 0.1] [--format F] [--out FILE]`:
 * the final mixture α* — the mean of α over the last fraction of the episodes, as the
 * paper reports it — in the form another trainer takes (docs/audit.md):
 *   yaml      a YAML file for a fixed-mixture config (data.mixture_file), the default
 *   json      the JSON object of docs/json.md
 *   megatron  Megatron-LM's --data-path value: "W1 PREFIX1 W2 PREFIX2 ..." (--prefix)
 *   hf        the probabilities list of Hugging Face datasets' interleave_datasets, in the
 *             dataset's domain order
 * `--json`: the JSON object on stdout as well (with --out, FILE gets the format). */
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/ydoc.h"
#include "ledger/audit.h"
#include "ledger/keys.h"
#include "ledger/status.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "config/run_config.h"
#include "util/buf.h"
#include "util/json.h"
#include "util/outfile.h"

static const cli_opt OPTS[] = {
    {"--last-fraction", CLI_NUM, "F", "average over the last F of the episodes, 0 < F <= 1 (default 0.1)", NULL,
     1e-9, 1, NULL, NULL},
    {"--format", CLI_STR, NULL,
     "yaml (default: a config's data.mixture_file), json, megatron (--data-path's weights and\n"
     "prefixes) or hf (interleave_datasets' probabilities, in the dataset's domain order)",
     "yaml|json|megatron|hf", 0, 0, NULL, NULL},
    {"--prefix", CLI_STR, "TEMPLATE",
     "--format megatron: each domain's data prefix, {domain} replaced by its name (default {domain})", NULL, 0,
     0, NULL, NULL},
    {"--out", CLI_STR, "FILE", "write FILE instead of standard output", NULL, 0, 0, NULL, NULL},
    {"--json", CLI_SWITCH, NULL, "one JSON object on stdout (docs/json.md)", NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"mixture", "STORE", 1, 1, "a STORE is required",
                              "The mean alpha over the last F (default 0.1) of the episodes: as YAML (a config's\n"
                              "data.mixture_file), JSON, Megatron-LM's --data-path or the probabilities of\n"
                              "Hugging Face datasets' interleave_datasets.",
                              OPTS, NULL};

/* The mixture as one JSON object on stdout (every name through util/json: a domain's name
 * and the store URL are the user's). */
static void print_json(FILE *f, const rec_mixture *x, const rec_run *run, const char *url, const audit_chain *c,
                       double frac, const char *out, const ledger_divergence *dv) {
    fprintf(f, "{\"run_id\":");
    json_str(f, run->run_id);
    fprintf(f, ",\"store\":");
    json_str(f, url);
    fprintf(f, ",\"last_fraction\":");
    json_num(f, frac);
    fprintf(f, ",\"first_episode\":%llu,\"last_episode\":%llu,\"episodes\":%zu,\"mixture\":{",
            (unsigned long long)x->first, (unsigned long long)x->last, c->n);
    for (int m = 0; m < x->M; m++) {
        if (m) fprintf(f, ",");
        json_key(f, m < run->M ? run->domains[m] : "?");
        json_num(f, x->alpha[m]);
    }
    fprintf(f, "},\"out\":");
    json_str(f, out);
    /* a diverged run's mean is of the episodes before it diverged, not its α* */
    fprintf(f, ",\"diverged\":");
    if (dv->state == LEDGER_DIVERGED_YES) {
        fprintf(f, "{\"episode\":%llu,\"step\":", (unsigned long long)dv->d.episode);
        json_str(f, dv->d.step);
        fprintf(f, ",\"seq\":%llu,\"message\":", (unsigned long long)dv->d.seq);
        json_str(f, dv->d.message);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    fprintf(f, "}\n");
}

/* Megatron-LM's --data-path: "W1 PREFIX1 W2 PREFIX2 ..." on one line (Megatron normalises
 * the weights), into *line. A prefix is the template with {domain} replaced, whole however
 * long it gets; a name or a prefix with white space would split into two arguments:
 * ERR_USAGE. Megatron reads --data-path with argparse (nargs='*'), which takes a word that
 * starts with '-' (a domain named -x under the default template) for an option and ends
 * the list there; such a prefix is written as ./PREFIX, the same relative path. */
static int megatron_line(const rec_mixture *x, const rec_run *run, const char *tmpl, buf_t *line,
                         tdm_err *e) {
    /* one path per domain: a template without {domain} gives them all the same one */
    if (x->M > 1 && !strstr(tmpl, "{domain}"))
        return err_set(e, ERR_USAGE, "--format megatron: --prefix '%s' has no {domain}, so every domain would get "
                       "the same data path; e.g. --prefix /data/{domain}_text_document", tmpl);
    if (strlen(tmpl) >= 400)
        return err_set(e, ERR_USAGE, "--format megatron: --prefix is %zu bytes (at most 399)", strlen(tmpl));
    for (int m = 0; m < x->M; m++) {
        const char *name = m < run->M ? run->domains[m] : "?";
        buf_t prefix = {0};
        for (const char *p = tmpl; *p;) {
            if (!strncmp(p, "{domain}", 8)) {
                buf_puts(&prefix, name);
                p += 8;
            } else {
                buf_putc(&prefix, *p++);
            }
        }
        if (prefix.oom) {
            buf_free(&prefix);
            return err_set(e, ERR_INTERNAL, "out of memory");
        }
        const char *pp = prefix.p ? prefix.p : "";
        if (strpbrk(pp, " \t\n\r\v\f")) {
            int rc = err_set(e, ERR_USAGE, "--format megatron: the prefix of domain '%s' ('%.600s') holds white "
                             "space, which Megatron's --data-path would split; give --prefix a template "
                             "without it", name, pp);
            buf_free(&prefix);
            return rc;
        }
        if (!*pp) {
            buf_free(&prefix);
            return err_set(e, ERR_USAGE, "--format megatron: the prefix of domain '%s' is empty", name);
        }
        buf_printf(line, "%s%.17g %s%s", m ? " " : "", x->alpha[m], pp[0] == '-' ? "./" : "", pp);
        buf_free(&prefix);
    }
    return line->oom ? err_set(e, ERR_INTERNAL, "out of memory") : 0;
}

/* interleave_datasets' probabilities: a JSON (and Python) list in the dataset's domain
 * order, scaled to sum to 1 as numpy's sampling requires. */
static void print_hf(FILE *f, const rec_mixture *x) {
    double sum = 0;
    for (int m = 0; m < x->M; m++) sum += x->alpha[m];
    fprintf(f, "[");
    for (int m = 0; m < x->M; m++) fprintf(f, "%s%.17g", m ? ", " : "", sum > 0 ? x->alpha[m] / sum : x->alpha[m]);
    fprintf(f, "]\n");
}

/* run.episodes as RUN pins it (0 when absent): how many α records the finished run has */
static unsigned long long run_episodes(const rec_run *run) {
    for (size_t i = 0; i < run->nconfig; i++)
        if (!strcmp(run->config[i].key, "run.episodes")) return strtoull(run->config[i].value, NULL, 10);
    return 0;
}

static void print_yaml(FILE *f, const rec_mixture *x, const rec_run *run, const char *url, const audit_chain *c,
                       const ledger_divergence *dv) {
    /* the URL in a comment, the names quoted: a path with a line break, or a domain named
     * on, null or 0x10, read otherwise by the YAML 1.1 readers this file is for */
    fprintf(f, "# mixture of run ");
    ydoc_comment(f, run->run_id);
    fprintf(f, " in ");
    ydoc_comment(f, url);
    unsigned long long planned = run_episodes(run);
    fprintf(f, ": mean alpha after episodes %llu..%llu of %zu", (unsigned long long)x->first,
            (unsigned long long)x->last, c->n);
    if (dv->state == LEDGER_DIVERGED_YES)
        fprintf(f, " before it diverged (at episode %llu; not its alpha*: the run has %llu)",
                (unsigned long long)dv->d.episode, planned);
    else if (planned > c->n) fprintf(f, " so far (unfinished: the run has %llu)", planned);
    fprintf(f, "\n");
    fprintf(f, "mixture:\n");
    for (int m = 0; m < x->M; m++) {
        fputs("  ", f);
        ydoc_quote(f, m < run->M ? run->domains[m] : "?");
        fprintf(f, ": %.17g\n", x->alpha[m]);
    }
}

static int run_mixture(const cli_args *a) {
    const char *url = a->arg[0], *out = cli_str(a, "--out", NULL);
    double frac = cli_num(a, "--last-fraction", 0.1);
    const char *format = cli_str(a, "--format", "yaml");
    int json = cli_given(a, "--json") > 0;
    if (json && !out && cli_given(a, "--format") && strcmp(format, "json")) {
        fprintf(stderr, "tandem mixture: --json prints the JSON object on stdout, where --format %s would go: "
                "give --out FILE for the %s, or leave one out\n", format, format);
        return ERR_USAGE;
    }
    tdm_err e = {0};
    /* an s3:// --out is refused before any reading (outfile_open would, after it) */
    int rc = out ? outfile_check_local("--out", out, &e) : 0;
    store *st = rc ? NULL : store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!rc && !st) rc = e.code;
    rec_run run;
    memset(&run, 0, sizeof run);
    audit_chain c;
    memset(&c, 0, sizeof c);
    if (!rc) rc = run_config_read_run(st, &run, &e);
    if (!rc) rc = audit_chain_read(st, &c, &e);
    if (!rc) audit_chain_domains(&c, run.M);
    /* a run that diverged (diverged.mp, the latest word on it): said, whatever else is */
    ledger_divergence dv;
    memset(&dv, 0, sizeof dv);
    if (!rc) rc = ledger_divergence_read(st, &dv, &e);
    char div[1400] = "";
    if (dv.state == LEDGER_DIVERGED_YES)
        snprintf(div, sizeof div, "%s diverged at episode %llu (%s step, run position %llu; exit 5): %s", url,
                 (unsigned long long)dv.d.episode, dv.d.step, (unsigned long long)dv.d.seq, dv.d.message);
    if (!rc && !c.ok)
        rc = err_set(&e, ERR_STORE, "%s: %s (run tandem alpha %s --verify)", url, c.problem, url);
    if (!rc && c.n == 0) {
        int fixed = 0; /* a fixed-mixture run never has any: say so, not "yet" */
        for (size_t i = 0; i < run.nconfig; i++)
            fixed |= !strcmp(run.config[i].key, "run.mode") && !strcmp(run.config[i].value, "fixed");
        rc = fixed ? err_set(&e, ERR_USAGE, "%s is a fixed-mixture run (run.mode: fixed): it learns no alpha; its "
                             "mixture is its data.mixture", url)
                   : div[0] ? err_set(&e, ERR_USAGE, "%s has no alpha records: it %s", url, strstr(div, "diverged at"))
                            : err_set(&e, ERR_USAGE, "%s has no alpha records yet", url);
    }
    if (!rc && cli_given(a, "--prefix") && strcmp(format, "megatron"))
        rc = err_set(&e, ERR_USAGE, "--prefix shapes --format megatron's data paths; --format %s has none", format);
    if (!rc && div[0])
        fprintf(stderr, "tandem mixture: %s\ntandem mixture: this is the mean of its alpha records before it "
                "diverged, not its alpha*: change the key the message names (--allow-change KEY when it is "
                "pinned) and resume it with tandem run\n", div);
    else if (!rc && run_episodes(&run) > c.n) /* useful while a run goes on, but not its α* */
        fprintf(stderr, "tandem mixture: %s is not finished (%zu of %llu episodes): this is the mean of its last "
                "episodes so far, not its alpha*; resume it with tandem run\n", url, c.n, run_episodes(&run));
    if (!rc) {
        rec_mixture x;
        audit_mixture(&c, frac, &x);
        /* the Megatron line first: a refused one leaves no FILE behind */
        buf_t line = {0};
        if (!strcmp(format, "megatron"))
            rc = megatron_line(&x, &run, cli_str(a, "--prefix", "{domain}"), &line, &e);
        /* --json alone: the object replaces the format on stdout (as before --format) */
        outfile o = {0};
        if (!rc && out) rc = outfile_open(&o, "--out", out, &e);
        FILE *f = rc ? NULL : out ? o.f : json ? NULL : stdout;
        if (!rc && f) {
            if (!strcmp(format, "json")) print_json(f, &x, &run, url, &c, frac, out, &dv);
            else if (!strcmp(format, "megatron")) fprintf(f, "%s\n", line.p ? line.p : "");
            else if (!strcmp(format, "hf")) print_hf(f, &x);
            else print_yaml(f, &x, &run, url, &c, &dv);
            if (out) rc = outfile_close(&o, 0, 0, &e);
        }
        if (!rc && json) print_json(stdout, &x, &run, url, &c, frac, out, &dv);
        buf_free(&line);
    }
    audit_chain_free(&c);
    rec_run_free(&run);
    if (st) store_close(st);
    if (rc) fprintf(stderr, "tandem mixture: %s\n", e.msg);
    if (rc && (json || !strcmp(format, "json"))) json_document(stdout, rc, e.msg, NULL);
    return rc;
}

int cmd_mixture(int argc, char **argv) { return cli_run(&SPEC, run_mixture, argc, argv); }
