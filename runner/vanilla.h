/* vanilla.h — plain training of u on a fixed uniform mixture, without TANDEM.
 *
 * The baseline the TANDEM runner is measured against (episode cost) and, before the
 * runner, what `tandem train` and `make demo` ran: AdamW on the mean of the per-domain
 * train losses (B/M sequences per domain per step), cosine schedule, gradient clipping,
 * and a periodic evaluation of every domain on fixed validation batches.
 */
#ifndef TANDEM_RUNNER_VANILLA_H
#define TANDEM_RUNNER_VANILLA_H

#include <stdint.h>
#include <stdio.h>

#include "data/dataset.h"
#include "model/model.h"
#include "util/err.h"

typedef struct vanilla_opts {
    const dataset *ds;
    model_config model; /* vocab 0: the dataset's */
    int batch, seq;     /* B (a multiple of the domain count), T */
    long steps;
    double lr, lr_min, weight_decay, clip;
    long warmup;
    uint64_t seed;
    int threads;
    long eval_every;  /* 0: only at the start and the end */
    int eval_batches; /* validation batches per domain per evaluation */
    FILE *log;        /* progress lines; NULL: silent */
} vanilla_opts;

/* Defaults for a small CPU model (2 layers, 64 channels, 300 steps...). */
void vanilla_opts_init(vanilla_opts *o);

typedef struct vanilla_result {
    int M;
    double val_first[64]; /* validation loss per domain before training */
    double val_last[64];  /* and after */
    double tokens_per_s;
} vanilla_result;

int vanilla_train(const vanilla_opts *o, vanilla_result *res, tdm_err *e);

#endif
