/* bench_cpu.c — training throughput of the CPU backend (model/cpu.c).
 *
 * Times full training steps on one fixed batch: forward, backward, gradient clipping
 * and AdamW, the work of one free-phase step. After --warmup untimed steps, --iters
 * steps are timed with a monotonic clock and one machine-readable line is printed:
 *
 *   bench_cpu layers=4 channels=256 heads=4 seq=128 vocab=256 batch=16 threads=1
 *       iters=10 params=... ms_per_step=... tokens_per_s=...
 *
 * (one line; tokens = batch * seq per step). bench/cpu.sh runs it next to
 * bench/torch_bench.py, which times the same model, batch and thread count in PyTorch.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/blas_core.h"
#include "model/model.h"
#include "util/rng.h"

typedef struct opts {
    int layers, channels, heads, seq, vocab, batch, threads, iters, warmup;
} opts;

static void usage(FILE *f) {
    fprintf(f, "usage: bench_cpu [--layers N] [--channels C] [--heads H] [--seq T] [--vocab V]\n"
               "                 [--batch B] [--threads N] [--iters N] [--warmup N]\n"
               "defaults: 4 layers, C=256, H=4, T=128, V=256, B=16, threads 0 (backend\n"
               "default), 10 timed iterations after 2 warm-up steps\n");
}

/* Parses "--name value" pairs into *o; 0 on success, 2 after printing usage. */
static int parse_args(int argc, char **argv, opts *o) {
    static const struct {
        const char *flag;
        size_t off;
        int min;
    } flags[] = {
        {"--layers", offsetof(opts, layers), 1},   {"--channels", offsetof(opts, channels), 1},
        {"--heads", offsetof(opts, heads), 1},     {"--seq", offsetof(opts, seq), 1},
        {"--vocab", offsetof(opts, vocab), 2},     {"--batch", offsetof(opts, batch), 1},
        {"--threads", offsetof(opts, threads), 0}, {"--iters", offsetof(opts, iters), 1},
        {"--warmup", offsetof(opts, warmup), 0},
    };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            exit(0);
        }
        size_t k = 0, nflags = sizeof flags / sizeof *flags;
        while (k < nflags && strcmp(argv[i], flags[k].flag)) k++;
        if (k == nflags || i + 1 >= argc) {
            fprintf(stderr, "bench_cpu: %s %s\n", k == nflags ? "unknown argument" : "no value for",
                    argv[i]);
            usage(stderr);
            return 2;
        }
        char *end;
        long v = strtol(argv[++i], &end, 10);
        if (*end || end == argv[i] || v < flags[k].min || v > 1 << 20) {
            fprintf(stderr, "bench_cpu: %s %s: expected an integer >= %d\n", flags[k].flag,
                    argv[i], flags[k].min);
            return 2;
        }
        *(int *)((char *)o + flags[k].off) = (int)v;
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One training step as the free phase runs it; 0 or an error in *e. */
static int train_step(const model_ops *ops, model_ctx *ctx, float *params, float *grads,
                      float *m, float *v, const model_batch *batch, long step, tdm_err *e) {
    static const double coef[1] = {1.0};
    double loss[1];
    if (ops->forward(ctx, params, batch, loss, NULL, e)) return e->code;
    if (ops->backward(ctx, params, coef, grads, e)) return e->code;
    model_clip_grads(ops, ctx, grads, 1.0);
    model_adamw hp = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .weight_decay = 0.01f, .step = step};
    return ops->adamw(ctx, params, grads, m, v, &hp, e);
}

int main(int argc, char **argv) {
    blas_core_reexec(argv); /* the kernels tandem itself runs with (model/blas_core.c) */
    blas_core_reexec_unblock(); /* the stop signals it held across its exec: Ctrl-C works again */
    opts o = {.layers = 4, .channels = 256, .heads = 4, .seq = 128, .vocab = 256, .batch = 16,
              .threads = 0, .iters = 10, .warmup = 2};
    if (parse_args(argc, argv, &o)) return 2;

    tdm_err e = {0};
    model_config cfg = {.vocab = o.vocab, .ctx = o.seq, .layers = o.layers, .heads = o.heads,
                        .channels = o.channels};
    model_layout lay;
    if (model_layout_init(&lay, &cfg, &e)) {
        fprintf(stderr, "bench_cpu: %s\n", e.msg);
        return 2;
    }
    size_t n = lay.numel;
    float *host = malloc(n * sizeof *host);
    size_t ntok = (size_t)o.batch * (size_t)(o.seq + 1);
    uint32_t *tokens = malloc(ntok * sizeof *tokens);
    int32_t *domain = calloc((size_t)o.batch, sizeof *domain); /* one domain */
    if (!host || !tokens || !domain) {
        fprintf(stderr, "bench_cpu: out of memory\n");
        return 1;
    }
    model_init_params(&lay, 1, host);
    rng_stream s;
    rng_stream_init(&s, 1, RNG_TEST, 0, 0, 0);
    for (size_t i = 0; i < ntok; i++) tokens[i] = (uint32_t)rng_below(&s, (uint64_t)o.vocab);
    model_batch batch = {.B = o.batch, .T = o.seq, .tokens = tokens, .domain = domain};

    const model_ops *ops = &model_cpu_ops;
    model_ctx *ctx = ops->create(&lay, o.batch, o.seq, 1, o.threads, &e);
    if (!ctx) {
        fprintf(stderr, "bench_cpu: %s\n", e.msg);
        return 1;
    }
    float *params = ops->alloc(ctx, n), *grads = ops->alloc(ctx, n);
    float *m = ops->alloc(ctx, n), *v = ops->alloc(ctx, n);
    if (!params || !grads || !m || !v || ops->upload(ctx, params, host, n, &e)) {
        fprintf(stderr, "bench_cpu: cannot set up buffers: %s\n", e.msg[0] ? e.msg : "alloc");
        return 1;
    }
    long step = 1;
    for (int i = 0; i < o.warmup; i++)
        if (train_step(ops, ctx, params, grads, m, v, &batch, step++, &e)) goto fail;
    double t0 = now_s();
    for (int i = 0; i < o.iters; i++)
        if (train_step(ops, ctx, params, grads, m, v, &batch, step++, &e)) goto fail;
    double dt = now_s() - t0;

    printf("bench_cpu layers=%d channels=%d heads=%d seq=%d vocab=%d batch=%d threads=%d "
           "iters=%d params=%zu ms_per_step=%.3f tokens_per_s=%.1f\n",
           o.layers, o.channels, o.heads, o.seq, o.vocab, o.batch, o.threads, o.iters, n,
           1e3 * dt / o.iters, (double)o.batch * o.seq * o.iters / dt);
    ops->release(ctx, params);
    ops->release(ctx, grads);
    ops->release(ctx, m);
    ops->release(ctx, v);
    ops->destroy(ctx);
    free(host);
    free(tokens);
    free(domain);
    model_layout_free(&lay);
    return 0;
fail:
    fprintf(stderr, "bench_cpu: %s\n", e.msg);
    return 1;
}
