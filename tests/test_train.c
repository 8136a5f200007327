/* test_train.c — `tandem train`, the uniform-mixture baseline, end to end on the CPU: a
 * generated multi-domain corpus trained through the runner lowers every domain's
 * validation loss below ln V, the low-entropy domains most; the alias is exactly
 * `tandem run` with run.mode = fixed (the same final bytes); a second call finds the run
 * finished; a missing --data is a usage error. */
#include <limits.h>
#include <math.h>
#include <sys/wait.h>

#include "tests/corpus_fixture.h"
#include "tests/runner_fixture.h"
#include "tests/test.h"

static void test_train_is_a_fixed_uniform_run(void) {
    char *dir = test_tmpdir("train");
    uint64_t train_tokens = 60000;
    tdm_err e = {0};
    CHECK(corpus_fixture(dir, 3, &train_tokens, 1, 5000, NULL, &e) == 0, "%s", e.msg);
    char cmd[4096], out[16384];
    const char *opts = "--steps 240 --eval-every 40 --batch 6 --seq 32 --channels 32 --threads 1";
    snprintf(cmd, sizeof cmd, "'%s' train --data %s/dataset.yaml --store %s/train %s 2>&1",
             tandem_bin(), dir, dir, opts);
    int rc = test_sh(cmd, out, sizeof out);
    CHECK(rc == 0, "exit %d: %s", rc, out);
    /* every domain learnt, the low-entropy ones most (the fixture's domains are ordered by
     * entropy) */
    const char *names[3] = {"d0", "d1", "d2"};
    double loss[3];
    const char *p = strstr(out, "validation loss per domain");
    CHECK(p, "no losses printed: %s", out);
    for (int m = 0; m < 3; m++) {
        const char *q = strstr(p, names[m]);
        CHECK(q && sscanf(q + strlen(names[m]), "%lf", &loss[m]) == 1, "no loss for %s: %s",
              names[m], p);
        printf("  %s: %.4f (ln 256 = %.4f)\n", names[m], loss[m], log(256.0));
        CHECK(loss[m] < log(256.0) - 1.0, "%s fell only to %g", names[m], loss[m]);
    }
    CHECK(loss[0] < loss[1] && loss[1] < loss[2], "losses do not follow the domains' entropies: "
          "%g %g %g", loss[0], loss[1], loss[2]);
    /* the same run through tandem run and a config: the same bytes */
    char cfg[700], h1[1024], h2[1024];
    snprintf(cfg, sizeof cfg, "%s/fixed.yaml", dir);
    char text[1024];
    snprintf(text, sizeof text,
             "run: {mode: fixed, episodes: 6, seed: 1, threads: 1}\n"
             "data: {dataset: %s/dataset.yaml, mixture: uniform}\n"
             "model: {layers: 2, channels: 32, heads: 2, ctx: 32}\n"
             "train: {batch: 6, seq: 32}\n"
             "tandem: {E: 40}\n"
             "optim: {lr: 3e-3, lr_min: 3e-4, warmup: 10}\n",
             dir);
    CHECK(write_file(cfg, text) == 0, "config");
    snprintf(cmd, sizeof cmd, "'%s' run %s --store %s/run --quiet 2>&1", tandem_bin(), cfg, dir);
    CHECK(test_sh(cmd, out, sizeof out) == 0, "tandem run: %s", out);
    snprintf(cmd, sizeof cmd, "'%s' hash %s/train 2>&1", tandem_bin(), dir);
    CHECK(test_sh(cmd, h1, sizeof h1) == 0, "%s", h1);
    snprintf(cmd, sizeof cmd, "'%s' hash %s/run 2>&1", tandem_bin(), dir);
    CHECK(test_sh(cmd, h2, sizeof h2) == 0, "%s", h2);
    CHECK(strstr(h1, "step done") && strcmp(h1, h2) == 0, "tandem train:\n%s\ntandem run:\n%s", h1, h2);
    /* again: the run is finished, nothing changes, the losses are printed again */
    snprintf(cmd, sizeof cmd, "'%s' train --data %s/dataset.yaml --store %s/train %s 2>&1",
             tandem_bin(), dir, dir, opts);
    CHECK(test_sh(cmd, out, sizeof out) == 0 && strstr(out, "already finished") &&
              strstr(out, "validation loss per domain"),
          "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' hash %s/train 2>&1", tandem_bin(), dir);
    CHECK(test_sh(cmd, h2, sizeof h2) == 0 && strcmp(h1, h2) == 0, "the finished run changed: %s", h2);
    /* the default store reused by another training: the refusal says --store, not
     * --allow-change (a new user's second `tandem train` is a new run, not a resume) */
    char bin[PATH_MAX], cmd2[PATH_MAX + 2048];
    CHECK(realpath(tandem_bin(), bin) != NULL, "realpath %s", tandem_bin());
    const char *tiny = "--steps 4 --eval-every 2 --batch 6 --seq 32 --channels 32 --threads 1";
    snprintf(cmd2, sizeof cmd2, "cd '%s' && '%s' train --data dataset.yaml %s 2>&1", dir, bin, tiny);
    CHECK(test_sh(cmd2, out, sizeof out) == 0, "first default-store training: %s", out);
    snprintf(cmd2, sizeof cmd2, "cd '%s' && '%s' train --data dataset.yaml %s --lr 1e-3 2>&1", dir, bin, tiny);
    CHECK(test_sh(cmd2, out, sizeof out) == 2 && strstr(out, "default store") && strstr(out, "--store URL") &&
              strstr(out, "optim.lr") && !strstr(out, "--allow-change"),
          "a reused default store: %s", out);
    /* usage errors */
    snprintf(cmd, sizeof cmd, "'%s' train --steps 10 2>&1", tandem_bin());
    CHECK(test_sh(cmd, out, sizeof out) == 2 && strstr(out, "--data"), "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' train --data %s/dataset.yaml --bogus 2>&1", tandem_bin(), dir);
    CHECK(test_sh(cmd, out, sizeof out) == 2 && strstr(out, "--bogus"), "%s", out);
    test_rmtree(dir);
    free(dir);
}

int main(void) {
    RUN(test_train_is_a_fixed_uniform_run);
    return test_summary("test_train");
}
