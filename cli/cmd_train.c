/* cmd_train.c — `tandem train`: training on the uniform mixture, the baseline.
 *
 * An alias of `tandem run` with run.mode = fixed and data.mixture = uniform, the options
 * below turned into --set values: it commits, resumes after a preemption and is audited
 * like every run (it replaced a separate trainer, runner/vanilla.c, whose steps were not
 * the runner's). At the end it prints the final state's validation loss per domain. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "model/blas_core.h"
#include "runner/evaluate.h"
#include "report/progress.h"
#include "runner/run.h"
#include "storage/store.h"

/* The options below that are config keys (--data ... --threads) stay CLI_STR rows, not
 * CLI_ALIAS rows of --set: they are applied with their defaults before every --set value,
 * whatever the order on the command line (a --set of the same key wins), and --seq also
 * sets model.ctx. */
static const cli_opt OPTS[] = {
    {"--data", CLI_STR, "DATASET.yaml", "the dataset (required; data.dataset)", NULL, 0, 0, NULL, NULL},
    {"--store", CLI_STR, "URL", "where the run lives (default file://./runs/train)", NULL, 0, 0, NULL, NULL},
    {"--steps", CLI_INT, "N", "AdamW steps (300; rounded up to a multiple of --eval-every)", NULL, 1, 1099511627776.0,
     NULL, NULL},
    {"--eval-every", CLI_INT, "N", "steps per episode: a progress line each (50)", NULL, 1, 1099511627776.0, NULL,
     NULL},
    {"--batch", CLI_STR, "B", "sequences per step (8)", NULL, 0, 0, NULL, NULL},
    {"--seq", CLI_STR, "T", "tokens per sequence, and the model's context (64)", NULL, 0, 0, NULL, NULL},
    {"--layers", CLI_STR, "L", "model shape: transformer blocks (2)", NULL, 0, 0, NULL, NULL},
    {"--channels", CLI_STR, "C", "model shape: width (64)", NULL, 0, 0, NULL, NULL},
    {"--heads", CLI_STR, "H", "model shape: attention heads (2)", NULL, 0, 0, NULL, NULL},
    {"--lr", CLI_STR, "X", "AdamW schedule: peak learning rate (3e-3)", NULL, 0, 0, NULL, NULL},
    {"--lr-min", CLI_STR, "X", "AdamW schedule: final learning rate (3e-4)", NULL, 0, 0, NULL, NULL},
    {"--warmup", CLI_STR, "N", "AdamW schedule: steps of linear warm-up (10)", NULL, 0, 0, NULL, NULL},
    {"--seed", CLI_STR, "S", "run.seed (1)", NULL, 0, 0, NULL, NULL},
    {"--threads", CLI_STR, "N", "CPU threads (all cores)", NULL, 0, 0, NULL, NULL},
    {"--set", CLI_LIST, "key=value", "any other config key (repeatable; see tandem run --help)", NULL, 0, 0, NULL,
     NULL},
    {"--quiet", CLI_SWITCH, NULL, "no progress lines", NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"train", NULL, 0, 0, NULL,
                              "Trains a GPT with every domain weighted equally (no TANDEM) and prints the\n"
                              "validation loss per domain. The same as `tandem run` with run.mode=fixed and\n"
                              "data.mixture=uniform: it resumes where it stopped when run again.\n"
                              "--data DATASET.yaml is required.",
                              OPTS, cli_run_exit_codes};

/* The options as "key=value" strings, in the order tandem run applies --set values. */
typedef struct train_sets {
    char *kv[64];
    const char *from[64]; /* the option it came from, for messages (NULL: the user's --set) */
    int n;
} train_sets;

static int add(train_sets *s, tdm_err *e, const char *fmt, const char *v) {
    if (s->n >= (int)(sizeof s->kv / sizeof *s->kv))
        return err_set(e, ERR_USAGE, "too many options");
    size_t len = strlen(fmt) + strlen(v) + 1;
    if (!(s->kv[s->n] = malloc(len))) return err_set(e, ERR_INTERNAL, "out of memory");
    s->from[s->n] = NULL;
    snprintf(s->kv[s->n++], len, fmt, v);
    return 0;
}

/* A message about "--set key=value" that train made from an option names the option: the
 * user typed --lr abc, not --set optim.lr=abc. */
static void name_the_option(const train_sets *s, tdm_err *e) {
    for (int i = 0; i < s->n; i++) {
        char head[600];
        int n = snprintf(head, sizeof head, "--set %s:", s->kv[i]);
        if (!s->from[i] || n <= 0 || (size_t)n >= sizeof head || strncmp(e->msg, head, (size_t)n)) continue;
        char out[2 * sizeof e->msg];
        const char *eq = strchr(s->kv[i], '=');
        int k = snprintf(out, sizeof out, "%s (%.*s = %s):%s", s->from[i], (int)(eq - s->kv[i]), s->kv[i], eq + 1,
                         e->msg + n);
        size_t len = k < 0 ? 0 : (size_t)k < sizeof e->msg ? (size_t)k : sizeof e->msg - 1;
        memcpy(e->msg, out, len);
        e->msg[len] = '\0';
        return;
    }
}

static int run_train(const cli_args *a) {
    /* option, config key, default (NULL: the config's) */
    static const struct {
        const char *flag, *key, *def;
    } map[] = {
        {"--data", "data.dataset", NULL},   {"--batch", "train.batch", "8"},
        {"--seq", "train.seq", "64"},       {"--layers", "model.layers", "2"},
        {"--channels", "model.channels", "64"}, {"--heads", "model.heads", "2"},
        {"--lr", "optim.lr", "3e-3"},       {"--lr-min", "optim.lr_min", "3e-4"},
        {"--warmup", "optim.warmup", "10"}, {"--seed", "run.seed", "1"},
        {"--threads", "run.threads", NULL},
    };
    enum { NMAP = sizeof map / sizeof *map };
    const char *store_url = cli_str(a, "--store", "file://./runs/train");
    long steps = cli_int(a, "--steps", 300), every = cli_int(a, "--eval-every", 50);
    int nuser = 0;
    char **user = cli_list(a, "--set", &nuser);
    train_sets sets = {0};
    run_opts o = {.progress = cli_given(a, "--quiet") ? PROGRESS_QUIET : PROGRESS_TEXT};
    tdm_err e = {0};
    int rc = 0;
    if (!cli_str(a, "--data", NULL)) {
        fprintf(stderr, "tandem train: --data DATASET.yaml is required\n");
        cli_usage(a->spec, stderr);
        return ERR_USAGE;
    }
    /* steps = episodes x E: E = --eval-every, the episodes rounded up */
    long E = every < steps ? every : steps, episodes = (steps + E - 1) / E;
    char num[32];
    if (!rc) rc = add(&sets, &e, "%s", "run.mode=fixed");
    if (!rc) rc = add(&sets, &e, "%s", "data.mixture=uniform");
    snprintf(num, sizeof num, "%ld", E);
    if (!rc && !(rc = add(&sets, &e, "tandem.E=%s", num))) sets.from[sets.n - 1] = "--eval-every";
    snprintf(num, sizeof num, "%ld", episodes);
    if (!rc && !(rc = add(&sets, &e, "run.episodes=%s", num))) sets.from[sets.n - 1] = "--steps / --eval-every";
    for (int i = 0; !rc && i < NMAP; i++) {
        const char *v = cli_str(a, map[i].flag, map[i].def);
        char fmt[64];
        snprintf(fmt, sizeof fmt, "%s=%%s", map[i].key);
        if (v && !(rc = add(&sets, &e, fmt, v))) sets.from[sets.n - 1] = map[i].flag;
    }
    /* the context follows the sequence length */
    if (!rc && !(rc = add(&sets, &e, "model.ctx=%s", cli_str(a, "--seq", "64")))) sets.from[sets.n - 1] = "--seq";
    for (int i = 0; !rc && i < nuser; i++) rc = add(&sets, &e, "%s", user[i]);
    if (!rc && episodes * E != steps && o.progress != PROGRESS_QUIET)
        fprintf(stderr, "tandem train: %ld steps rounded up to %ld (%ld episodes of %ld)\n", steps,
                episodes * E, episodes, E);
    if (!rc) {
        o.sets = sets.kv;
        o.nsets = sets.n;
        o.store_url = store_url;
        o.store_defaulted = !cli_given(a, "--store");
        rc = run_main(&o, &e);
        if (rc == ERR_USAGE) name_the_option(&sets, &e);
    }
    if (!rc) {
        store *st = store_open_existing(store_url, STORE_OPEN_READ_ONLY, &e);
        eval_result r;
        rc = st ? eval_store(st, SPLIT_VAL, UINT64_MAX, NULL, BLAS_PIN_NOTE, &r, &e) : e.code;
        if (!rc) {
            printf("validation loss per domain (run position %llu):\n", (unsigned long long)r.seq);
            for (int m = 0; m < r.M; m++) printf("  %-12s %.4f\n", r.names[m], r.loss[m]);
            printf("  Average perplexity %.3f\n", r.average_ppl);
        }
        store_close(st);
    }
    if (rc && rc != 75) fprintf(stderr, "tandem train: %s\n", e.msg);
    for (int i = 0; i < sets.n; i++) free(sets.kv[i]);
    return rc;
}

int cmd_train(int argc, char **argv) { return cli_run(&SPEC, run_train, argc, argv); }
