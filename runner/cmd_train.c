/* cmd_train.c — `tandem train`: plain uniform-mixture training (runner/vanilla.h). */
#include <stdio.h>
#include <string.h>

#include "runner/args.h"
#include "runner/cmds.h"
#include "runner/vanilla.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tandem train --data DATASET.yaml [options]\n"
            "Trains a GPT on the CPU with every domain weighted equally (no TANDEM) and\n"
            "prints per-domain train and validation losses.\n"
            "  --steps N        optimizer steps (300)\n"
            "  --batch B        sequences per step, a multiple of the domain count (8)\n"
            "  --seq T          tokens per sequence (64)\n"
            "  --layers L --channels C --heads H   model shape (2, 64, 2)\n"
            "  --lr X --lr-min X --warmup N        AdamW schedule (3e-3, 3e-4, 10)\n"
            "  --seed S --threads N --eval-every N  (1, all cores, 50)\n");
}

int cmd_train(int argc, char **argv) {
    vanilla_opts o;
    vanilla_opts_init(&o);
    o.log = stdout;
    const char *data = NULL;
    tdm_err e = {0};
    args_iter it;
    args_init(&it, argc, argv, 1);
    int rc = 0;
    while (!rc && args_next(&it)) {
        long v;
        const char *f = it.flag;
        if (!*f) rc = err_set(&e, ERR_USAGE, "unexpected argument '%s'", it.value);
        else if (!strcmp(f, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(f, "--data")) rc = args_value(&it, &data, &e);
        else if (!strcmp(f, "--steps")) rc = args_int(&it, 1, 1L << 40, &o.steps, &e);
        else if (!strcmp(f, "--batch")) rc = args_int(&it, 1, 1 << 20, &v, &e), o.batch = (int)v;
        else if (!strcmp(f, "--seq")) rc = args_int(&it, 1, 1 << 16, &v, &e), o.seq = (int)v;
        else if (!strcmp(f, "--layers")) rc = args_int(&it, 1, 1024, &v, &e), o.model.layers = (int)v;
        else if (!strcmp(f, "--channels")) rc = args_int(&it, 1, 1 << 16, &v, &e), o.model.channels = (int)v;
        else if (!strcmp(f, "--heads")) rc = args_int(&it, 1, 1 << 16, &v, &e), o.model.heads = (int)v;
        else if (!strcmp(f, "--lr")) rc = args_double(&it, 0, 10, &o.lr, &e);
        else if (!strcmp(f, "--lr-min")) rc = args_double(&it, 0, 10, &o.lr_min, &e);
        else if (!strcmp(f, "--warmup")) rc = args_int(&it, 0, 1L << 40, &o.warmup, &e);
        else if (!strcmp(f, "--seed")) rc = args_u64(&it, &o.seed, &e);
        else if (!strcmp(f, "--threads")) rc = args_int(&it, 0, 4096, &v, &e), o.threads = (int)v;
        else if (!strcmp(f, "--eval-every")) rc = args_int(&it, 0, 1L << 40, &o.eval_every, &e);
        else rc = err_set(&e, ERR_USAGE, "unknown option %s (see tandem train --help)", f);
    }
    if (!rc && !data) rc = err_set(&e, ERR_USAGE, "--data DATASET.yaml is required");
    dataset ds;
    memset(&ds, 0, sizeof ds);
    if (!rc) rc = dataset_load(&ds, data, &e);
    o.model.ctx = o.seq;
    o.ds = &ds;
    vanilla_result res;
    if (!rc) rc = vanilla_train(&o, &res, &e);
    if (!rc) {
        printf("validation loss per domain (before -> after):\n");
        for (int m = 0; m < res.M; m++)
            printf("  %-12s %.4f -> %.4f\n", dataset_domain_name(&ds, m), res.val_first[m],
                   res.val_last[m]);
        printf("throughput: %.0f tokens/s\n", res.tokens_per_s);
    }
    dataset_free(&ds);
    if (rc) fprintf(stderr, "tandem train: %s\n", e.msg);
    return rc;
}
