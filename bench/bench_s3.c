/* bench_s3.c — `make bench-s3`: a ~1 GiB training state (parameters + AdamW moments) to
 * and from the loopback S3 server, beside `aws s3 cp` (multipart) of the same bytes to the
 * same server in the same run, and the restore time (store → ready to train).
 *
 * Run through bench/s3.sh, which starts the server (tests/s3/start.sh) and exports its
 * environment. usage: bench_s3 [--layers L] [--channels C] [--repeats N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "ledger/ckpt.h"
#include "runner/ckpt_model.h"
#include "model/model.h"
#include "util/args.h"
#include "storage/store.h"

#define DIE(what, e) bench_die("bench_s3", what, e)
#include "util/rng.h"

int main(int argc, char **argv) {
    ckpt_model_io cio;
    long layers = 12, channels = 768, repeats = 3;
    args_iter it;
    args_init(&it, argc, argv, 1);
    tdm_err e = {0};
    while (args_next(&it)) {
        int rc = 0;
        if (!strcmp(it.flag, "--layers")) rc = args_int(&it, 1, 1000, &layers, &e);
        else if (!strcmp(it.flag, "--channels")) rc = args_int(&it, 12, 1 << 14, &channels, &e);
        else if (!strcmp(it.flag, "--repeats")) rc = args_int(&it, 1, 100, &repeats, &e);
        else rc = err_set(&e, ERR_USAGE, "unknown option %s", it.flag[0] ? it.flag : it.value);
        if (rc) DIE("arguments", &e);
    }
    const char *bucket = getenv("TANDEM_S3_BUCKET"), *endpoint = getenv("TANDEM_S3_ENDPOINT");
    if (!bucket || !endpoint) DIE("run me through bench/s3.sh (no S3 server environment)", NULL);
    model_config mc = {.vocab = 256, .ctx = 64, .layers = (int)layers, .heads = 12, .channels = (int)channels};
    model_layout lay;
    if (model_layout_init(&lay, &mc, &e)) DIE("layout", &e);
    const model_ops *ops = &model_cpu_ops;
    model_ctx *ctx = ops->create(&lay, 1, 8, 1, 0, &e);
    if (!ctx) DIE("model", &e);
    size_t P = lay.numel;
    double bytes = 3.0 * P * 4;
    float *dev[CKPT_TENSORS];
    for (int t = 0; t < CKPT_TENSORS; t++) {
        dev[t] = ops->alloc(ctx, P);
        if (!dev[t]) DIE("alloc", NULL);
        rng_stream s;
        rng_stream_init(&s, 3, RNG_TEST, (uint32_t)t, 0, 0);
        for (size_t i = 0; i < P; i++) dev[t][i] = (float)(rng_u32(&s) >> 8) * 1e-7f;
    }
    /* the same bytes as one file, for aws s3 cp */
    char dir[] = "build/bench-s3-XXXXXX";
    if (!mkdtemp(dir)) DIE("mkdtemp under build/", NULL);
    char file[256], cmd[1024];
    snprintf(file, sizeof file, "%s/state.bin", dir);
    FILE *f = fopen(file, "wb");
    for (int t = 0; f && t < CKPT_TENSORS; t++) fwrite(dev[t], sizeof(float), P, f);
    if (!f || fclose(f)) DIE("write state.bin", NULL);
    printf("state: %zu parameters x 3 tensors = %.2f GB; S3 at %s (through the verifying proxy)\n",
           P, bytes / 1e9, endpoint);
    double *up = calloc((size_t)repeats, sizeof *up), *down = calloc((size_t)repeats, sizeof *down);
    double *aup = calloc((size_t)repeats, sizeof *aup), *adown = calloc((size_t)repeats, sizeof *adown);
    double *restore = calloc((size_t)repeats, sizeof *restore);
    for (int r = 0; r < repeats; r++) {
        char url[256];
        snprintf(url, sizeof url, "s3://%s/bench-%d", bucket, r);
        store *st = store_open(url, &e);
        if (!st) DIE("store", &e);
        ckpt *c = ckpt_model_open(st, &lay, 64u << 20, &e);
        if (!c || ckpt_acquire(c, 0, &e)) DIE("ckpt", &e);
        rec_state rec = {.seq = 1, .M = 1, .alpha = {1.0}};
        snprintf(rec.step, sizeof rec.step, "free");
        if (ckpt_snapshot(c, &rec, ckpt_io_of(&cio, ops, ctx), dev, 1, &e)) DIE("snapshot", &e);
        double t0 = bench_now();
        if (ckpt_wait(c, &e)) DIE("commit", &e);
        up[r] = bytes / (bench_now() - t0);
        ckpt_close(c);
        store_close(st);
        /* restore: open the store, take the lease, load and verify, upload to the model */
        t0 = bench_now();
        st = store_open(url, &e);
        c = st ? ckpt_model_open(st, &lay, 64u << 20, &e) : NULL;
        if (!c || ckpt_acquire(c, 1, &e)) DIE("reopen", &e);
        rec_state got;
        int found = 0;
        double tl = bench_now();
        if (ckpt_load(c, &got, &found, &e) || !found) DIE("load", &e);
        down[r] = bytes / (bench_now() - tl);
        for (int t = 0; t < CKPT_TENSORS; t++)
            if (ops->upload(ctx, dev[t], ckpt_host(c, t), P, &e)) DIE("upload", &e);
        restore[r] = bench_now() - t0;
        rec_state_free(&got);
        ckpt_close(c);
        store_close(st);
        /* the peer */
        t0 = bench_now();
        snprintf(cmd, sizeof cmd, "/usr/bin/aws --endpoint-url '%s' s3 cp --quiet '%s' s3://%s/aws-%d/state.bin",
                 endpoint, file, bucket, r);
        if (system(cmd) != 0) DIE("aws s3 cp up", NULL);
        aup[r] = bytes / (bench_now() - t0);
        t0 = bench_now();
        snprintf(cmd, sizeof cmd, "/usr/bin/aws --endpoint-url '%s' s3 cp --quiet s3://%s/aws-%d/state.bin - > /dev/null",
                 endpoint, bucket, r);
        if (system(cmd) != 0) DIE("aws s3 cp down", NULL);
        adown[r] = bytes / (bench_now() - t0);
        printf("  round %d: up %.0f MB/s (aws %.0f), down %.0f MB/s (aws %.0f), restore %.2f s\n", r + 1,
               up[r] / 1e6, aup[r] / 1e6, down[r] / 1e6, adown[r] / 1e6, restore[r]);
    }
    double mu = bench_median(up, (int)repeats), md = bench_median(down, (int)repeats);
    double au = bench_median(aup, (int)repeats), ad = bench_median(adown, (int)repeats);
    printf("%-30s %12s %12s %8s %s\n", "S3 (median)", "tandem", "aws s3 cp", "ratio", "target");
    printf("%-30s %7.0f MB/s %7.0f MB/s %8.2f %s\n", "upload (commit)", mu / 1e6, au / 1e6, mu / au,
           mu / au >= 1.0 ? ">= 1.0 met" : ">= 1.0 MISSED");
    printf("%-30s %7.0f MB/s %7.0f MB/s %8.2f %s\n", "download (verified load)", md / 1e6, ad / 1e6,
           md / ad, md / ad >= 1.0 ? ">= 1.0 met" : ">= 1.0 MISSED");
    printf("%-30s %10.2f s\n", "restore (store -> ready)", bench_median(restore, (int)repeats));
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "bench_s3: cleanup failed\n");
    return 0;
}
