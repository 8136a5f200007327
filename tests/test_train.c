/* test_train.c — end to end on the CPU: a generated multi-domain corpus, the sampler and
 * the model train together, and every domain's validation loss falls. */
#include <math.h>

#include "runner/vanilla.h"
#include "tests/corpus_fixture.h"
#include "tests/test.h"

static void test_training_lowers_every_domain_loss(void) {
    char *dir = test_tmpdir("train");
    uint64_t train_tokens = 60000;
    dataset ds;
    tdm_err e = {0};
    CHECK(corpus_fixture(dir, 3, &train_tokens, 1, 5000, &ds, &e) == 0, "%s", e.msg);
    vanilla_opts o;
    vanilla_opts_init(&o);
    o.ds = &ds;
    o.batch = 6;
    o.seq = 32;
    o.model.ctx = 32;
    o.model.channels = 32;
    o.steps = 120;
    o.eval_every = 0;
    o.eval_batches = 2;
    o.threads = 1;
    vanilla_result r;
    int rc = vanilla_train(&o, &r, &e);
    CHECK(rc == 0, "%s", e.msg);
    CHECK(r.M == 3, "domains %d", r.M);
    for (int m = 0; m < 3; m++) {
        printf("  %s: %.4f -> %.4f\n", dataset_domain_name(&ds, m), r.val_first[m], r.val_last[m]);
        CHECK(r.val_first[m] > log(256.0) - 0.1, "initial loss %g is not near ln V", r.val_first[m]);
        CHECK(r.val_last[m] < r.val_first[m] - 1.0, "domain %d fell only %g -> %g", m,
              r.val_first[m], r.val_last[m]);
    }
    /* lower-entropy domains are learnt to lower losses */
    CHECK(r.val_last[0] < r.val_last[1] && r.val_last[1] < r.val_last[2],
          "losses do not follow the domains' entropies: %g %g %g", r.val_last[0], r.val_last[1],
          r.val_last[2]);
    /* a batch that does not split evenly over the domains is refused */
    o.batch = 7;
    CHECK(vanilla_train(&o, &r, &e) == ERR_USAGE && strstr(e.msg, "multiple"), "%s", e.msg);
    dataset_free(&ds);
    test_rmtree(dir);
    free(dir);
}

int main(void) {
    RUN(test_training_lowers_every_domain_loss);
    return test_summary("test_train");
}
