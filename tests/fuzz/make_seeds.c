/* make_seeds.c — writes one valid encoding of each record type into DIR/<type>/seed,
 * the starting corpus of `make fuzz`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ledger/records.h"
#include "tests/parquet_seeds.h"

static void put(const char *dir, const char *type, void *data, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, type);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/%s/seed", dir, type);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) {
        perror(path);
        exit(1);
    }
    free(data);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    mkdir(dir, 0777);
    size_t n;
    rec_head h = {.seq = 12, .epoch = 2, .time = 1.7e9, .commits = 3};
    snprintf(h.state, sizeof h.state, "states/12.mp");
    put(dir, "head", rec_head_encode(&h, &n), n);
    rec_kv kv[2] = {{"optim.lr", "0.0005"}, {"tandem.K", "5"}};
    rec_run run = {.created = 1, .nconfig = 2, .config = kv, .M = 2};
    snprintf(run.domains[0], REC_NAME_MAX, "web");
    snprintf(run.domains[1], REC_NAME_MAX, "code");
    snprintf(run.run_id, sizeof run.run_id, "run-1");
    rec_config_hash(kv, 2, &run.config_sha);
    put(dir, "run", rec_run_encode(&run, &n), n);
    rec_state s = {.seq = 7, .episode = 1, .index = 1, .free_steps = 3, .M = 2};
    snprintf(s.step, sizeof s.step, "free");
    s.alpha[0] = s.alpha[1] = 0.5;
    rec_view v = {.rows = 4, .cols = 2, .offset = 0};
    snprintf(v.name, sizeof v.name, "wte");
    s.nviews = 1;
    s.views = &v;
    sha256_digest chunks[2];
    rec_tensor t = {.ndim = 1, .shape = {300}, .chunk_bytes = 1024, .nchunks = 2, .chunks = chunks};
    snprintf(t.name, sizeof t.name, "params");
    snprintf(t.dtype, sizeof t.dtype, "f32");
    s.ntensors = 1;
    s.tensors = &t;
    put(dir, "state", rec_state_encode(&s, &n), n);
    rec_alpha a = {.t = 3, .M = 2, .lr_alpha = 0.1, .gamma = 1, .seq = 9, .time = 1, .attempt = 1};
    a.alpha[0] = a.alpha[1] = a.alpha_next[0] = a.alpha_next[1] = 0.5;
    snprintf(a.host, sizeof a.host, "h");
    put(dir, "alpha", rec_alpha_encode(&a, &n), n);
    rec_lease l = {.epoch = 3, .pid = 4, .attempt = 1, .time = 2};
    snprintf(l.host, sizeof l.host, "h");
    put(dir, "lease", rec_lease_encode(&l, &n), n);
    rec_kv o[1] = {{"tandem.K", "5"}}, w[1] = {{"tandem.K", "3"}};
    rec_change c = {.seq = 4, .created = 5, .n = 1, .old_values = o, .new_values = w};
    put(dir, "change", rec_change_encode(&c, &n), n);
    rec_mixture x = {.M = 2, .first = 9, .last = 9};
    x.alpha[0] = 0.3, x.alpha[1] = 0.7;
    snprintf(x.names[0], REC_NAME_MAX, "a");
    snprintf(x.names[1], REC_NAME_MAX, "b");
    put(dir, "mixture", rec_mixture_encode(&x, &n), n);
    static rec_sweep sw = {.n = 1, .points = 2};
    snprintf(sw.text[0], REC_SWEEP_TEXT_MAX, "run.seed=1,2");
    put(dir, "sweep", rec_sweep_encode(&sw, &n), n);
    char path[1024];
    snprintf(path, sizeof path, "%s/parquet", dir);
    mkdir(path, 0777);
    for (size_t i = 0; i < sizeof PQSEEDS / sizeof *PQSEEDS; i++) {
        snprintf(path, sizeof path, "%s/parquet/%s", dir, PQSEEDS[i].name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(PQSEEDS[i].p, 1, PQSEEDS[i].n, f) != PQSEEDS[i].n || fclose(f)) {
            perror(path);
            exit(1);
        }
    }
    return 0;
}
