/* corpus_fixture.h — a generated multi-domain corpus for tests and benchmarks. */
#ifndef TANDEM_TESTS_CORPUS_FIXTURE_H
#define TANDEM_TESTS_CORPUS_FIXTURE_H

#include <stdio.h>

#include "data/corpus.h"
#include "data/dataset.h"

/* Writes M domains (train tokens one count for all, or M counts; val; no test split)
 * under dir, silently, and loads the dataset into *ds when ds is not NULL. 0 or an
 * error code with e set. */
static inline int corpus_fixture(const char *dir, int M, const uint64_t *train, int n_train,
                                 uint64_t val, dataset *ds, tdm_err *e) {
    corpus_opts co;
    corpus_opts_init(&co);
    co.out = dir;
    co.n_domains = M;
    co.train_tokens = train;
    co.n_train = n_train;
    co.val_tokens = val;
    co.test_tokens = 0;
    co.report = NULL;
    int rc = corpus_generate(&co, e);
    if (rc || !ds) return rc;
    char path[4200];
    snprintf(path, sizeof path, "%.4096s/dataset.yaml", dir);
    return dataset_load(ds, path, e);
}

#endif
