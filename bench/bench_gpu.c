/* bench_gpu.c — training throughput of the CUDA backend (gpu/), and the TANDEM episode
 * cost against vanilla training on the GPU. `make bench-gpu` runs it through
 * bench/gpu.sh beside bench/gpu_torch.py (PyTorch, same model and batch).
 *
 * Step: forward, backward, gradient clipping (1.0) and AdamW on one fixed batch — the
 * free phase's step, as bench_cpu times it. After --warmup untimed steps, --iters steps
 * are timed (the device is synchronised before each clock read) and one line is printed:
 *
 *   bench_gpu arch=gpt2 precision=bf16 layers=12 channels=768 heads=12 seq=1024 vocab=50257
 *       batch=16 iters=20 params=... ms_per_step=... tokens_per_s=... tflops=...
 *       peak_tflops=989.4 mfu=... device="..."
 *
 * FLOPs per token (nanoGPT's estimate, the same in gpu_torch.py): 6 N + 12 L C T, N the
 * parameters without wpe (the tied head's matmul counts through wte), the attention term
 * for the full T x T products. MFU = achieved / peak, the peak of the device's dense
 * tensor-core bf16 (or plain fp32 for --precision fp32) from its name (H100 SXM and H200:
 * 989.4 and 66.9 TFLOP/s; H100 PCIe: 756 and 51.2), or --peak-tflops.
 *
 * --arch qwen2 times the Llama / Qwen2 family instead (gpu/cuda_hf.cu, fp32: the one
 * precision it runs in), by default in Qwen2-0.5B's shape (24 x 896, 14 query heads on 2
 * key/value heads, SwiGLU 4864, vocabulary 151936, tied); the FLOPs count every parameter
 * (the tied embedding is the head's matmul) and the attention over channels.
 *
 * --episode 1 also times TANDEM episodes (sync, K=5 probe steps of both twins, alpha,
 * E=5 free steps; steps/ on the CUDA backend, a generated 4-domain corpus) against the
 * same number of vanilla free steps, beside the paper's (E + 2K + 2/3) / E:
 *
 *   bench_gpu_episode precision=bf16 ... tandem_s=... vanilla_s=... ratio=... paper=...
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/model.h"
#include "util/args.h"
#include "util/rng.h"
#ifdef TANDEM_HAVE_CUDA
#include "gpu/cuda.h"
#include "steps/steps.h"
#include "tests/corpus_fixture.h"
#endif

#ifdef TANDEM_HAVE_CUDA

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const tdm_err *e) {
    fprintf(stderr, "bench_gpu: %s: %s\n", what, e ? e->msg : "failed");
    exit(1);
}

typedef struct opts {
    const char *arch; /* gpt2, or qwen2: the Llama / Qwen2 family (gpu/cuda_hf.cu) */
    long layers, channels, heads, seq, vocab, batch, iters, warmup, episode;
    long kv_heads, intermediate; /* qwen2 only */
    double peak;
    const char *precision;
    const char *attention; /* model.attention: auto | cudnn | builtin */
    const char *gelu;      /* TANDEM_GELU_EPILOGUE: auto | off */
} opts;

/* Peak dense TFLOP/s of the device for the precision, from its name; 0 when unknown. */
static double device_peak(const char *desc, int bf16) {
    if (strstr(desc, "H100") && strstr(desc, "PCIe")) return bf16 ? 756.0 : 51.2;
    if (strstr(desc, "H100") || strstr(desc, "H200")) return bf16 ? 989.4 : 66.9;
    return 0;
}

/* The model of the options: GPT-2, or a Qwen2 of the given shape (tied head, q/k/v
 * biases, RoPE theta 1e6, RMSNorm eps 1e-6, head_dim = channels / heads: Qwen2-0.5B's
 * choices) for sequences up to --seq. */
static void bench_config(const opts *o, model_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    if (!strcmp(o->arch, "qwen2")) {
        hf_arch a;
        memset(&a, 0, sizeof a);
        snprintf(a.model_type, sizeof a.model_type, "qwen2");
        a.vocab = (int)o->vocab, a.channels = (int)o->channels, a.layers = (int)o->layers;
        a.heads = (int)o->heads, a.kv_heads = (int)o->kv_heads, a.head_dim = (int)(o->channels / o->heads);
        a.intermediate = (int)o->intermediate, a.max_positions = (int)o->seq;
        a.rope_theta = 1e6, a.rms_eps = 1e-6, a.tied = 1, a.qkv_bias = 1;
        model_config_hf(cfg, &a, (int)o->seq);
        return;
    }
    cfg->vocab = (int)o->vocab, cfg->ctx = (int)o->seq, cfg->layers = (int)o->layers;
    cfg->heads = (int)o->heads, cfg->channels = (int)o->channels;
}

/* One training step as step_free makes it: forward, backward, clip and AdamW queued, then
 * one wait for the loss and the norm (model.h's results). wait_each: the peer of the same
 * run, as steps were made before: a wait for the losses after the forward and one for the
 * norm before AdamW. *enqueue_s (one-wait steps) grows by the host's time to queue the
 * step's work, before its wait: where that is well under the step's time the host runs
 * ahead of the GPU, launches are hidden behind kernels, and CUDA graphs could save no more
 * than the one gap after each wait (docs/gpu.md, "CUDA graphs"). */
static int train_step(const model_ops *ops, model_ctx *ctx, float *p, float *g, float *m,
                      float *v, const model_batch *b, long step, int wait_each,
                      double *enqueue_s, tdm_err *e) {
    static const double coef[1] = {1.0};
    double loss[1], norm;
    model_adamw hp = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .weight_decay = 0.01f, .step = step};
    double t0 = now_s();
    if (ops->forward(ctx, p, b, wait_each ? loss : NULL, NULL, e) || ops->backward(ctx, p, coef, g, e) ||
        ops->clip(ctx, g, 1.0, e) || (wait_each && ops->results(ctx, NULL, &norm, e)) ||
        ops->adamw(ctx, p, g, m, v, &hp, e))
        return e->code;
    if (enqueue_s) *enqueue_s += now_s() - t0;
    if (ops->results(ctx, loss, &norm, e)) return e->code;
    return 0;
}

static void bench_step(const opts *o, const char *desc) {
    const model_ops *ops = &model_cuda_ops;
    model_config cfg;
    bench_config(o, &cfg);
    model_layout lay;
    tdm_err e = {0};
    if (model_layout_init(&lay, &cfg, &e)) die("model", &e);
    size_t n = lay.numel;
    int B = (int)o->batch, T = (int)o->seq;
    float *host = malloc(n * sizeof *host);
    uint32_t *tok = malloc((size_t)B * (T + 1) * sizeof *tok);
    int32_t *dom = calloc((size_t)B, sizeof *dom);
    if (!host || !tok || !dom) die("host memory", NULL);
    model_init_params(&lay, 1, host);
    rng_stream s;
    rng_stream_init(&s, 1, RNG_TEST, 0, 0, 0);
    for (size_t i = 0; i < (size_t)B * (T + 1); i++) tok[i] = (uint32_t)rng_below(&s, (uint64_t)o->vocab);
    model_batch batch = {.B = B, .T = T, .tokens = tok, .domain = dom};
    model_ctx *ctx = ops->create(&lay, B, T, 1, 0, &e);
    if (!ctx) die("workspace", &e);
    float *p = ops->alloc(ctx, n), *g = ops->alloc(ctx, n), *m = ops->alloc(ctx, n),
          *v = ops->alloc(ctx, n);
    if (!p || !g || !m || !v) die("buffers", NULL);
    if (ops->upload(ctx, p, host, n, &e)) die("upload", &e);
    long step = 1;
    for (long i = 0; i < o->warmup; i++)
        if (train_step(ops, ctx, p, g, m, v, &batch, step++, 0, NULL, &e)) die("step", &e);
    if (model_cuda_sync(ctx, &e)) die("sync", &e);
    double enqueue = 0, t0 = now_s();
    for (long i = 0; i < o->iters; i++)
        if (train_step(ops, ctx, p, g, m, v, &batch, step++, 0, &enqueue, &e)) die("step", &e);
    if (model_cuda_sync(ctx, &e)) die("sync", &e);
    double dt = now_s() - t0;
    /* the peer: the same steps with three waits each instead of one */
    t0 = now_s();
    for (long i = 0; i < o->iters; i++)
        if (train_step(ops, ctx, p, g, m, v, &batch, step++, 1, NULL, &e)) die("step", &e);
    if (model_cuda_sync(ctx, &e)) die("sync", &e);
    double dt_waits = now_s() - t0;
    model_cuda_mem mem;
    if (model_cuda_memory(ctx, &mem, &e)) die("memory", &e);
    /* GPT-2: N without wpe; Qwen2: every parameter (the tied embedding is the head's
     * matmul); the attention term over the query width H * head_dim = channels */
    const model_tensor *wpe = model_layout_find(&lay, "wpe");
    double N = (double)(n - (wpe ? wpe->numel : 0));
    double flops_tok = 6 * N + 12.0 * o->layers * o->channels * (double)T;
    double tps = (double)B * T * o->iters / dt, tflops = tps * flops_tok / 1e12;
    double peak = o->peak > 0 ? o->peak : device_peak(desc, !strcmp(o->precision, "bf16"));
    printf("bench_gpu arch=%s precision=%s layers=%ld channels=%ld heads=%ld seq=%d vocab=%ld batch=%d "
           "iters=%ld params=%zu ms_per_step=%.3f tokens_per_s=%.1f tflops=%.1f "
           "peak_tflops=%.1f mfu=%.4f peak_mem_gib=%.2f attention_tile=%d attention=%s gelu=%s "
           "ms_per_step_three_waits=%.3f one_wait_speedup=%.4f host_enqueue_ms=%.3f "
           "host_share=%.4f device=\"%s\"\n",
           o->arch, o->precision, o->layers, o->channels, o->heads, T, o->vocab, B, o->iters, n,
           1e3 * dt / o->iters, tps, tflops, peak, peak > 0 ? tflops / peak : NAN,
           mem.backend_peak / (1024.0 * 1024 * 1024), model_cuda_attention_tile(ctx),
           model_cuda_attention(ctx), model_cuda_gelu_epilogue(ctx), 1e3 * dt_waits / o->iters,
           dt > 0 ? dt_waits / dt : NAN, 1e3 * enqueue / o->iters, dt > 0 ? enqueue / dt : NAN,
           desc);
    ops->release(ctx, p);
    ops->release(ctx, g);
    ops->release(ctx, m);
    ops->release(ctx, v);
    ops->destroy(ctx);
    free(host);
    free(tok);
    free(dom);
    model_layout_free(&lay);
}

/* TANDEM episodes against vanilla free steps from the same state (as bench_ckpt on the
 * CPU): 1 warm-up round, 2 timed. */
static void bench_episode(const opts *o) {
    char dir[] = "/tmp/tandem-bench-gpu-XXXXXX";
    if (!mkdtemp(dir)) die("mkdtemp", NULL);
    char out[600];
    snprintf(out, sizeof out, "%s/corpus", dir);
    uint64_t tr = 400000;
    tdm_err e = {0};
    dataset ds;
    if (corpus_fixture(out, 4, &tr, 1, 40000, &ds, &e)) die("corpus", &e);
    model_config mc = {.vocab = (int)o->vocab, .ctx = (int)o->seq, .layers = (int)o->layers,
                       .heads = (int)o->heads, .channels = (int)o->channels};
    model_layout lay;
    if (model_layout_init(&lay, &mc, &e)) die("layout", &e);
    int K = 5, E = 5, episodes = 2;
    long B = o->batch >= 4 ? o->batch / 4 * 4 : 4; /* a multiple of the 4 domains */
    step_hparams hp = {.B = (int)B, .T = (int)o->seq, .K = K, .E = E, .V = 4, .gamma = 1,
                       .lr_probe = 1e-2, .lr_alpha = 4e-3, .lr = 5e-4, .lr_min = 5e-5,
                       .total_free = 1000, .cosine = 1, .weight_decay = 0.01, .clip = 1,
                       .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .seed = 1};
    if (step_check(&hp, &ds, &e)) die("hparams", &e);
    step_nets n;
    if (step_nets_create(&n, &model_cuda_ops, &lay, &hp, 4, 0, &e)) die("nets", &e);
    float *host = malloc(lay.numel * sizeof *host);
    model_init_params(&lay, 1, host);
    if (n.ops->upload(n.ctx, n.u, host, lay.numel, &e)) die("upload", &e);
    step_state s;
    step_state_init(&s, &ds, 0);
    double tandem[2] = {0}, vanilla[2] = {0};
    for (int round = 0; round < 3; round++) {
        double t0 = now_s();
        for (int ep = 0; ep < episodes; ep++) {
            if (step_sync(&n, &e) || step_probe(&hp, &ds, &n, &s, NULL, &e) ||
                step_alpha(&hp, &s, NULL, &e))
                die("episode", &e);
            for (int i = 0; i < E; i++)
                if (step_free(&hp, &ds, &n, &s, NULL, &e)) die("free", &e);
        }
        if (model_cuda_sync(n.ctx, &e)) die("sync", &e);
        double t1 = now_s();
        for (int i = 0; i < episodes * E; i++)
            if (step_free(&hp, &ds, &n, &s, NULL, &e)) die("free", &e);
        if (model_cuda_sync(n.ctx, &e)) die("sync", &e);
        double t2 = now_s();
        if (round > 0) tandem[round - 1] = t1 - t0, vanilla[round - 1] = t2 - t1;
    }
    double ts = (tandem[0] + tandem[1]) / 2, vs = (vanilla[0] + vanilla[1]) / 2;
    double paper = (E + 2.0 * K + 2.0 / 3.0) / E;
    printf("bench_gpu_episode precision=%s layers=%ld channels=%ld seq=%ld batch=%ld val=%d "
           "K=%d E=%d episodes=%d tandem_s=%.3f vanilla_s=%.3f ratio=%.3f paper=%.3f\n",
           o->precision, o->layers, o->channels, o->seq, B, hp.V, K, E, episodes, ts, vs,
           ts / vs, paper);
    free(host);
    step_nets_destroy(&n);
    model_layout_free(&lay);
    dataset_free(&ds);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "bench_gpu: cleanup of %s failed\n", dir);
}

int main(int argc, char **argv) {
    /* -1: the architecture's default (GPT-2 124M, or Qwen2-0.5B's shape) */
    opts o = {.arch = "gpt2", .layers = -1, .channels = -1, .heads = -1, .seq = 1024, .vocab = -1,
              .batch = 16, .iters = 20, .warmup = 3, .episode = 0, .kv_heads = -1, .intermediate = -1,
              .peak = 0, .precision = NULL, .attention = "auto", .gelu = "auto"};
    args_iter it;
    args_init(&it, argc, argv, 1);
    tdm_err e = {0};
    while (args_next(&it)) {
        int rc = 0;
        if (!strcmp(it.flag, "--arch")) rc = args_value(&it, &o.arch, &e);
        else if (!strcmp(it.flag, "--layers")) rc = args_int(&it, 1, 1024, &o.layers, &e);
        else if (!strcmp(it.flag, "--kv-heads")) rc = args_int(&it, 1, 1024, &o.kv_heads, &e);
        else if (!strcmp(it.flag, "--intermediate")) rc = args_int(&it, 1, 1 << 20, &o.intermediate, &e);
        else if (!strcmp(it.flag, "--channels")) rc = args_int(&it, 1, 65536, &o.channels, &e);
        else if (!strcmp(it.flag, "--heads")) rc = args_int(&it, 1, 1024, &o.heads, &e);
        else if (!strcmp(it.flag, "--seq")) rc = args_int(&it, 1, 65536, &o.seq, &e);
        else if (!strcmp(it.flag, "--vocab")) rc = args_int(&it, 2, MODEL_VOCAB_MAX, &o.vocab, &e);
        else if (!strcmp(it.flag, "--batch")) rc = args_int(&it, 1, 1 << 20, &o.batch, &e);
        else if (!strcmp(it.flag, "--iters")) rc = args_int(&it, 1, 1 << 20, &o.iters, &e);
        else if (!strcmp(it.flag, "--warmup")) rc = args_int(&it, 0, 1 << 20, &o.warmup, &e);
        else if (!strcmp(it.flag, "--episode")) rc = args_int(&it, 0, 1, &o.episode, &e);
        else if (!strcmp(it.flag, "--peak-tflops")) rc = args_double(&it, 0, 1e6, &o.peak, &e);
        else if (!strcmp(it.flag, "--precision")) rc = args_value(&it, &o.precision, &e);
        else if (!strcmp(it.flag, "--attention")) rc = args_value(&it, &o.attention, &e);
        else if (!strcmp(it.flag, "--gelu-epilogue")) rc = args_value(&it, &o.gelu, &e);
        else rc = err_set(&e, ERR_USAGE, "unknown option %s", it.flag[0] ? it.flag : it.value);
        if (rc) {
            fprintf(stderr, "bench_gpu: %s\nusage: bench_gpu [--arch gpt2|qwen2] [--layers L] [--channels C] "
                    "[--heads H] [--kv-heads H] [--intermediate I] [--seq T] [--vocab V] [--batch B] [--iters N] [--warmup N] "
                    "[--precision bf16|fp32] [--attention auto|cudnn|builtin] [--gelu-epilogue auto|off] "
                    "[--peak-tflops X] "
                    "[--episode 0|1]\n", e.msg);
            return 2;
        }
    }
    int qwen2 = !strcmp(o.arch, "qwen2");
    if (!qwen2 && strcmp(o.arch, "gpt2")) {
        fprintf(stderr, "bench_gpu: --arch %s: must be gpt2 or qwen2\n", o.arch);
        return 2;
    }
    /* Qwen2-0.5B: 24 x 896, 14 heads on 2 key/value heads, SwiGLU 4864, vocab 151936;
     * bf16 by default, as GPT-2 */
    if (o.layers < 0) o.layers = qwen2 ? 24 : 12;
    if (o.channels < 0) o.channels = qwen2 ? 896 : 768;
    if (o.heads < 0) o.heads = qwen2 ? 14 : 12;
    if (o.vocab < 0) o.vocab = qwen2 ? 151936 : 50257;
    if (o.kv_heads < 0) o.kv_heads = qwen2 ? 2 : o.heads;
    if (o.intermediate < 0) o.intermediate = qwen2 ? 4864 : 4 * o.channels;
    if (!o.precision) o.precision = "bf16";
    if (qwen2 && o.episode) {
        fprintf(stderr, "bench_gpu: --episode 1 times GPT-2 only\n");
        return 2;
    }
    if (model_cuda_set_precision(o.precision, &e)) die("--precision", &e);
    if (model_cuda_set_attention(o.attention, &e)) die("--attention", &e);
    if (strcmp(o.gelu, "auto") && strcmp(o.gelu, "off")) {
        fprintf(stderr, "bench_gpu: --gelu-epilogue %s: must be auto or off\n", o.gelu);
        return 2;
    }
    setenv("TANDEM_GELU_EPILOGUE", o.gelu, 1); /* read by every workspace created from now */
    char desc[512];
    if (model_cuda_describe(desc, sizeof desc, &e)) {
        fprintf(stderr, "bench_gpu: %s: nothing to measure\n", e.msg);
        return 3;
    }
    bench_step(&o, desc);
    if (o.episode) bench_episode(&o);
    return 0;
}

#else

int main(void) {
    fprintf(stderr, "bench_gpu: this build has no CUDA backend (nvcc was not found)\n");
    return 3;
}

#endif
