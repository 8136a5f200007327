/* record_samples.h — sample records of every kind with every field set, shared by the
 * tests that round-trip them (test_records), pin their bytes (test_records_golden) and
 * mutate them. `full` adds the optional fields a later version wrote (generation,
 * episode losses, tokens seen, probe and validation losses); without it a record is as
 * the first versions wrote it. The values are what tests/records/golden/ was written from:
 * change one and the golden bytes move. */
#ifndef TANDEM_TESTS_RECORD_SAMPLES_H
#define TANDEM_TESTS_RECORD_SAMPLES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/metrics.h"
#include "ledger/records.h"
#include "storage/sha256.h"

static inline void sample_state(rec_state *s, int full, int have_losses) {
    memset(s, 0, sizeof *s);
    s->seq = 17;
    s->episode = 3;
    snprintf(s->step, sizeof s->step, "free");
    s->index = 2;
    s->free_steps = 17;
    s->seed = 12345;
    s->M = 3;
    double a[3] = {0.2, 0.5, 0.3};
    memcpy(s->alpha, a, sizeof a);
    s->have_losses = have_losses;
    for (int m = 0; m < 3; m++) {
        s->loss_u[m] = 2.5 + m;
        s->loss_w[m] = 2.4 + m;
        for (int k = 0; k < 4; k++) s->cursors[m][k] = (uint64_t)(m * 10 + k);
    }
    s->alpha_records = 3;
    sha256("x", 1, &s->alpha_head);
    if (full) {
        s->has_gen = 1, s->gen = 2;
        s->has_episode = 1;
        for (int m = 0; m < 3; m++) {
            s->ep_loss_u[m] = 3.25 + m, s->ep_loss_w[m] = 3.5 + m, s->ep_free_loss[m] = 6.0 + m;
            s->seen[m] = 1000.0 * (m + 1);
        }
        s->ep_grad = 1.75;
        s->ep_free_n = 2;
        s->has_seen = 1;
    }
    s->nviews = 2;
    s->views = calloc(2, sizeof *s->views);
    snprintf(s->views[0].name, REC_NAME_MAX, "wte");
    s->views[0].rows = 256, s->views[0].cols = 64, s->views[0].offset = 0;
    snprintf(s->views[1].name, REC_NAME_MAX, "ln_f.bias");
    s->views[1].rows = 64, s->views[1].cols = 1, s->views[1].offset = 16384;
    s->ntensors = 1;
    s->tensors = calloc(1, sizeof *s->tensors);
    rec_tensor *t = &s->tensors[0];
    snprintf(t->name, REC_NAME_MAX, "params");
    snprintf(t->dtype, sizeof t->dtype, "f32");
    t->ndim = 1;
    t->shape[0] = 1000;
    t->chunk_bytes = 1024; /* 4000 bytes: 4 chunks */
    t->nchunks = 4;
    t->chunks = calloc(4, sizeof *t->chunks);
    for (int c = 0; c < 4; c++) sha256(&c, sizeof c, &t->chunks[c]);
}

static inline void sample_alpha(rec_alpha *a, int full) {
    memset(a, 0, sizeof *a);
    a->t = 4;
    a->M = 2;
    a->alpha[0] = 0.5, a->alpha[1] = 0.5;
    a->alpha_next[0] = 0.6, a->alpha_next[1] = 0.4;
    a->loss_u[0] = 3.0, a->loss_u[1] = 2.0;
    a->loss_w[0] = 2.9, a->loss_w[1] = 2.05;
    a->lr_alpha = 4e-3;
    a->gamma = 1.0;
    a->seq = 99;
    sha256("prev", 4, &a->prev);
    a->time = 1.7e9;
    snprintf(a->host, sizeof a->host, "node-7");
    a->attempt = 2;
    if (full) {
        a->has_gen = 1, a->gen = 1;
        a->has_seen = 1, a->seen[0] = 512, a->seen[1] = 256;
    }
}

static inline void sample_metrics(rec_metrics *m, int full) {
    memset(m, 0, sizeof *m);
    m->t = 3, m->seq = 40, m->gen = 1, m->M = 2;
    m->loss[0] = 2.5, m->loss[1] = 3.5;
    m->has_probe = full;
    m->loss_u[0] = 2.4, m->loss_u[1] = 3.4;
    m->loss_w[0] = 2.6, m->loss_w[1] = 3.6;
    m->alpha[0] = 0.3, m->alpha[1] = 0.7;
    m->lr = 1e-3, m->lr_alpha = full ? 4e-3 : 0, m->grad_norm = 0.75, m->free_steps = 5;
    m->tokens_per_s = 1234.5, m->episode_s = 2.25, m->commit_s = 0.5, m->time = 1.8e9, m->attempt = 2;
    snprintf(m->host, sizeof m->host, "node7");
    if (full) {
        m->has_seen = 1;
        m->seen[0] = 100, m->seen[1] = 200;
        m->epochs[0] = 0.5, m->epochs[1] = 0.25;
        m->n_steps = 3, m->step_first = 13;
        m->step_loss[0] = 3.0, m->step_loss[1] = 2.875, m->step_loss[2] = 2.75;
        m->has_val = 1, m->val[0] = 2.7, m->val[1] = 3.7, m->val_tokens = 4096;
    }
}

#endif
