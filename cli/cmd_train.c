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
#include "runner/args.h"
#include "cli/cmds.h"
#include "runner/evaluate.h"
#include "runner/progress.h"
#include "runner/run.h"
#include "storage/store.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tandem train --data DATASET.yaml [options]\n"
            "Trains a GPT with every domain weighted equally (no TANDEM) and prints the\n"
            "validation loss per domain. The same as `tandem run` with run.mode=fixed and\n"
            "data.mixture=uniform: it resumes where it stopped when run again.\n"
            "  --store URL      where the run lives (file://runs/train)\n"
            "  --steps N        AdamW steps (300; rounded up to a multiple of --eval-every)\n"
            "  --eval-every N   steps per episode: a progress line each (50)\n"
            "  --batch B        sequences per step (8)\n"
            "  --seq T          tokens per sequence (64)\n"
            "  --layers L --channels C --heads H   model shape (2, 64, 2)\n"
            "  --lr X --lr-min X --warmup N        AdamW schedule (3e-3, 3e-4, 10)\n"
            "  --seed S --threads N                (1, all cores)\n"
            "  --set key=value  any other config key (repeatable; see tandem run --help)\n"
            "  --quiet          no progress lines\n");
}

/* The options as "key=value" strings, in the order tandem run applies --set values. */
typedef struct train_sets {
    char *kv[64];
    int n;
} train_sets;

static int add(train_sets *s, tdm_err *e, const char *fmt, const char *v) {
    if (s->n >= (int)(sizeof s->kv / sizeof *s->kv))
        return err_set(e, ERR_USAGE, "too many options");
    size_t len = strlen(fmt) + strlen(v) + 1;
    if (!(s->kv[s->n] = malloc(len))) return err_set(e, ERR_INTERNAL, "out of memory");
    snprintf(s->kv[s->n++], len, fmt, v);
    return 0;
}

int cmd_train(int argc, char **argv) {
    /* flag, config key, default (NULL: the config's) */
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
    const char *val[NMAP] = {0}, *store_url = "file://runs/train";
    long steps = 300, every = 50;
    train_sets sets = {0}, user = {0};
    run_opts o = {.progress = PROGRESS_TEXT};
    tdm_err e = {0};
    args_iter it;
    args_init(&it, argc, argv, 1);
    int rc = 0;
    while (!rc && args_next(&it)) {
        const char *f = it.flag, *v = NULL;
        int known = 0;
        for (int i = 0; i < NMAP && !known; i++)
            if (!strcmp(f, map[i].flag)) known = 1, rc = args_value(&it, &val[i], &e);
        if (known) continue;
        if (!*f) rc = err_set(&e, ERR_USAGE, "unexpected argument '%s'", it.value);
        else if (!strcmp(f, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(f, "--store")) rc = args_value(&it, &store_url, &e);
        else if (!strcmp(f, "--steps")) rc = args_int(&it, 1, 1L << 40, &steps, &e);
        else if (!strcmp(f, "--eval-every")) rc = args_int(&it, 1, 1L << 40, &every, &e);
        else if (!strcmp(f, "--set")) {
            rc = args_value(&it, &v, &e);
            if (!rc) rc = add(&user, &e, "%s", v);
        }
        else if (!strcmp(f, "--quiet")) o.progress = PROGRESS_QUIET;
        else rc = err_set(&e, ERR_USAGE, "unknown option %s (see tandem train --help)", f);
    }
    if (!rc && !val[0]) rc = err_set(&e, ERR_USAGE, "--data DATASET.yaml is required");
    /* steps = episodes x E: E = --eval-every, the episodes rounded up */
    long E = every < steps ? every : steps, episodes = (steps + E - 1) / E;
    char num[32];
    if (!rc) rc = add(&sets, &e, "%s", "run.mode=fixed");
    if (!rc) rc = add(&sets, &e, "%s", "data.mixture=uniform");
    snprintf(num, sizeof num, "%ld", E);
    if (!rc) rc = add(&sets, &e, "tandem.E=%s", num);
    snprintf(num, sizeof num, "%ld", episodes);
    if (!rc) rc = add(&sets, &e, "run.episodes=%s", num);
    for (int i = 0; !rc && i < NMAP; i++) {
        const char *v = val[i] ? val[i] : map[i].def;
        char fmt[64];
        snprintf(fmt, sizeof fmt, "%s=%%s", map[i].key);
        if (v) rc = add(&sets, &e, fmt, v);
    }
    /* the context follows the sequence length */
    if (!rc) rc = add(&sets, &e, "model.ctx=%s", val[2] ? val[2] : map[2].def);
    for (int i = 0; !rc && i < user.n; i++) rc = add(&sets, &e, "%s", user.kv[i]);
    if (!rc && episodes * E != steps && o.progress != PROGRESS_QUIET)
        fprintf(stderr, "tandem train: %ld steps rounded up to %ld (%ld episodes of %ld)\n", steps,
                episodes * E, episodes, E);
    if (!rc) {
        o.sets = sets.kv;
        o.nsets = sets.n;
        o.store_url = store_url;
        rc = run_main(&o, &e);
    }
    if (!rc) {
        store *st = store_open_existing(store_url, STORE_OPEN_READ_ONLY, &e);
        eval_result r;
        rc = st ? eval_store(st, SPLIT_VAL, UINT64_MAX, NULL, &r, &e) : e.code;
        if (!rc) {
            printf("validation loss per domain (run position %llu):\n", (unsigned long long)r.seq);
            for (int m = 0; m < r.M; m++) printf("  %-12s %.4f\n", r.names[m], r.loss[m]);
            printf("  Average perplexity %.3f\n", r.average_ppl);
        }
        store_close(st);
    }
    if (rc && rc != 75) fprintf(stderr, "tandem train: %s\n", e.msg);
    for (int i = 0; i < sets.n; i++) free(sets.kv[i]);
    for (int i = 0; i < user.n; i++) free(user.kv[i]);
    return rc;
}
