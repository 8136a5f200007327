/* model.c — the backend-independent parts of model.h: config checks, the tensor table,
 * GPT-2 initialisation, gradient clipping and the learning-rate schedule. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/rng.h"

void model_config_hf(model_config *c, const hf_arch *a, int ctx) {
    memset(c, 0, sizeof *c);
    c->arch = MODEL_ARCH_HF;
    c->hf = *a;
    c->vocab = a->vocab, c->layers = a->layers, c->heads = a->heads, c->channels = a->channels;
    c->ctx = ctx;
}

int model_config_check(const model_config *c, tdm_err *e) {
    if (c->arch == MODEL_ARCH_HF) {
        /* the architecture was checked when its config.json was read (hf_arch_read) */
        if (c->ctx < 1 || c->ctx > c->hf.max_positions)
            return err_set(e, ERR_USAGE, "model.ctx = %d: the model takes sequences of 1..%d tokens "
                           "(max_position_embeddings of its config.json)", c->ctx, c->hf.max_positions);
        if (c->hf.vocab < 2 || c->hf.vocab > MODEL_VOCAB_MAX)
            return err_set(e, ERR_USAGE, "vocab_size = %d: must be in 2..%d", c->hf.vocab, MODEL_VOCAB_MAX);
        return 0;
    }
    if (c->arch != MODEL_ARCH_GPT2) return err_set(e, ERR_INTERNAL, "model architecture %d is unknown", c->arch);
    if (c->vocab < 2 || c->vocab > MODEL_VOCAB_MAX)
        return err_set(e, ERR_USAGE, "model.vocab = %d: must be in 2..%d", c->vocab, MODEL_VOCAB_MAX);
    if (c->ctx < 1 || c->ctx > 1 << 16)
        return err_set(e, ERR_USAGE, "model.ctx = %d: must be in 1..65536", c->ctx);
    if (c->layers < 1 || c->layers > 1024)
        return err_set(e, ERR_USAGE, "model.layers = %d: must be in 1..1024", c->layers);
    if (c->channels < 1 || c->channels > 1 << 16)
        return err_set(e, ERR_USAGE, "model.channels = %d: must be in 1..65536", c->channels);
    if (c->heads < 1 || c->channels % c->heads != 0)
        return err_set(e, ERR_USAGE, "model.heads = %d: must be >= 1 and divide model.channels = %d",
                       c->heads, c->channels);
    return 0;
}

int model_memory_check(double bytes, const char *what, const char *remedy, tdm_err *e) {
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || psize <= 0) return 0; /* unknown: let the allocation decide */
    double phys = (double)pages * (double)psize;
    if (bytes <= phys) return 0;
    return err_set(e, ERR_USAGE, "%s needs %.1f GiB of memory, more than the %.1f GiB this machine "
                   "has: %s", what, bytes / 1073741824.0, phys / 1073741824.0, remedy);
}

const char *const model_block_tensor_names[MODEL_BLOCK_TENSORS] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
    "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
};

/* Appends one tensor to the table under construction. */
static void add_tensor(model_layout *lay, const char *name, int rows, int cols) {
    model_tensor *t = &lay->t[lay->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = cols > 0 ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols > 0 ? cols : 1;
    t->numel = (size_t)rows * (size_t)t->shape[1];
    t->offset = lay->numel;
    t->decay = t->ndim == 2;
    lay->numel += t->numel;
}

static int count_tensor(const char *name, int64_t rows, int64_t cols, void *arg) {
    (void)name, (void)rows, (void)cols;
    (*(int *)arg)++;
    return 0;
}

static int add_hf_tensor(const char *name, int64_t rows, int64_t cols, void *arg) {
    add_tensor(arg, name, (int)rows, (int)cols);
    return 0;
}

/* The HF family's table: HF's names, hf_arch_each_tensor's order (what model/qwen2.c
 * reads and qwen2_save writes) */
static int layout_hf(model_layout *lay, tdm_err *e) {
    int n = 0;
    hf_arch_each_tensor(&lay->cfg.hf, count_tensor, &n);
    if (!(lay->t = calloc((size_t)n, sizeof *lay->t)))
        return err_set(e, ERR_INTERNAL, "out of memory for the tensor table");
    hf_arch_each_tensor(&lay->cfg.hf, add_hf_tensor, lay);
    return 0;
}

int model_layout_init(model_layout *lay, const model_config *cfg, tdm_err *e) {
    memset(lay, 0, sizeof *lay);
    if (model_config_check(cfg, e)) return e ? e->code : ERR_USAGE;
    lay->cfg = *cfg;
    if (cfg->arch == MODEL_ARCH_HF) return layout_hf(lay, e);
    int L = cfg->layers, C = cfg->channels;
    lay->t = calloc((size_t)(4 + 12 * L), sizeof *lay->t);
    if (!lay->t) return err_set(e, ERR_INTERNAL, "out of memory for the tensor table");
    add_tensor(lay, "wte", cfg->vocab, C);
    add_tensor(lay, "wpe", cfg->ctx, C);
    /* rows and columns of each block tensor (columns 0: a vector) */
    const int shape[MODEL_BLOCK_TENSORS][2] = {
        [MODEL_LN1_W] = {C, 0},         [MODEL_LN1_B] = {C, 0},
        [MODEL_QKV_W] = {3 * C, C},     [MODEL_QKV_B] = {3 * C, 0},
        [MODEL_ATTPROJ_W] = {C, C},     [MODEL_ATTPROJ_B] = {C, 0},
        [MODEL_LN2_W] = {C, 0},         [MODEL_LN2_B] = {C, 0},
        [MODEL_FC_W] = {4 * C, C},      [MODEL_FC_B] = {4 * C, 0},
        [MODEL_FCPROJ_W] = {C, 4 * C},  [MODEL_FCPROJ_B] = {C, 0},
    };
    char name[MODEL_NAME_MAX];
    for (int l = 0; l < L; l++)
        for (int k = 0; k < MODEL_BLOCK_TENSORS; k++) {
            snprintf(name, sizeof name, "h.%d.%s", l, model_block_tensor_names[k]);
            add_tensor(lay, name, shape[k][0], shape[k][1]);
        }
    add_tensor(lay, "ln_f.weight", C, 0);
    add_tensor(lay, "ln_f.bias", C, 0);
    return 0;
}

void model_layout_free(model_layout *lay) {
    free(lay->t);
    memset(lay, 0, sizeof *lay);
}

const model_tensor *model_layout_find(const model_layout *lay, const char *name) {
    for (int i = 0; i < lay->n; i++)
        if (strcmp(lay->t[i].name, name) == 0) return &lay->t[i];
    return NULL;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* elements a thread draws at a time in model_init_params */
#define INIT_PIECE ((size_t)1 << 20)

void model_init_params(const model_layout *lay, uint64_t seed, float *host) {
    double proj_std = 0.02 / sqrt(2.0 * lay->cfg.layers);
    for (int i = 0; i < lay->n; i++) {
        const model_tensor *t = &lay->t[i];
        float *p = host + t->offset;
        if (t->ndim == 1) {
            /* LayerNorm gains start at 1, every bias and LayerNorm shift at 0. */
            float v = ((strstr(t->name, "ln_") || ends_with(t->name, "norm.weight")) &&
                       ends_with(t->name, ".weight")) ? 1.0f : 0.0f;
            for (size_t j = 0; j < t->numel; j++) p[j] = v;
            continue;
        }
        double std = ends_with(t->name, "c_proj.weight") || ends_with(t->name, "o_proj.weight") ||
                             ends_with(t->name, "down_proj.weight") ? proj_std : 0.02;
        /* value j is the j-th normal of the tensor's stream (one Philox block each), so
         * pieces drawn in parallel give the values of one sequential pass: at 1B this is
         * ~0.9G normals, most of a minute on one core before the first step */
        long pieces = (long)((t->numel + INIT_PIECE - 1) / INIT_PIECE);
#pragma omp parallel for schedule(static) if (pieces > 1)
        for (long k = 0; k < pieces; k++) {
            size_t lo = (size_t)k * INIT_PIECE, hi = lo + INIT_PIECE < t->numel ? lo + INIT_PIECE : t->numel;
            rng_stream s;
            rng_stream_init(&s, seed, RNG_MODEL_INIT, (uint32_t)i, 0, 0);
            rng_stream_seek(&s, (uint32_t)lo);
            for (size_t j = lo; j < hi; j++) p[j] = (float)(std * rng_normal(&s));
        }
    }
}

double model_clip_grads(const model_ops *ops, model_ctx *ctx, float *grads, double max_norm) {
    tdm_err e;
    double norm = NAN;
    if (ops->clip(ctx, grads, max_norm, &e) || ops->results(ctx, NULL, &norm, &e)) return NAN;
    return norm;
}

double model_lr_cosine(long step, long total, long warmup, double lr_max, double lr_min) {
    if (warmup > 0 && step < warmup) return lr_max * (double)(step + 1) / (double)warmup;
    long span = total - warmup - 1;
    if (span <= 0) return lr_max;
    double r = (double)(step - warmup) / (double)span;
    if (r > 1) r = 1;
    return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + cos(3.141592653589793 * r));
}

const model_ops *model_backend(const char *name) {
    if (strcmp(name, "cpu") == 0) return &model_cpu_ops;
    return NULL;
}

/* The offset of tensor `name`; ERR_INTERNAL when the layout lacks it. */
static int tensor_offset(const model_layout *lay, const char *name, size_t *off, tdm_err *e) {
    const model_tensor *t = model_layout_find(lay, name);
    if (!t) return err_set(e, ERR_INTERNAL, "model layout has no tensor %s", name);
    *off = t->offset;
    return 0;
}

int model_layout_offsets(const model_layout *lay, model_offsets *out, tdm_err *e) {
    if (lay->cfg.arch != MODEL_ARCH_GPT2)
        return err_set(e, ERR_USAGE, "model_layout_offsets: a layout of the Llama / Qwen2 family has "
                       "no GPT-2 blocks");
    int rc = tensor_offset(lay, "wte", &out->wte, e);
    if (!rc) rc = tensor_offset(lay, "wpe", &out->wpe, e);
    if (!rc) rc = tensor_offset(lay, "ln_f.weight", &out->lnf_w, e);
    if (!rc) rc = tensor_offset(lay, "ln_f.bias", &out->lnf_b, e);
    for (int l = 0; !rc && l < lay->cfg.layers; l++)
        for (int k = 0; !rc && k < MODEL_BLOCK_TENSORS; k++) {
            char name[MODEL_NAME_MAX];
            snprintf(name, sizeof name, "h.%d.%s", l, model_block_tensor_names[k]);
            rc = tensor_offset(lay, name, &out->block[(size_t)l * MODEL_BLOCK_TENSORS + k], e);
        }
    return rc;
}

int model_workspace_check(const model_config *c, int max_B, int max_T, int n_domains, tdm_err *e) {
    if (max_B >= 1 && max_T >= 1 && max_T <= c->ctx && n_domains >= 1) return 0;
    return err_set(e, ERR_USAGE,
                   "model workspace: batch %d x %d with %d domains is invalid (need B >= 1, "
                   "1 <= T <= ctx = %d, domains >= 1)",
                   max_B, max_T, n_domains, c->ctx);
}

int model_batch_check(const model_batch *b, int max_B, int max_T, int n_domains, int vocab,
                      tdm_err *e) {
    if (b->B < 1 || b->B > max_B || b->T < 1 || b->T > max_T)
        return err_set(e, ERR_USAGE, "batch %d x %d exceeds the workspace %d x %d", b->B, b->T,
                       max_B, max_T);
    for (int i = 0; i < b->B; i++)
        if (b->domain[i] < 0 || b->domain[i] >= n_domains)
            return err_set(e, ERR_USAGE, "batch sequence %d has domain %d, outside 0..%d", i,
                           b->domain[i], n_domains - 1);
    size_t ntokens = (size_t)b->B * (b->T + 1);
    for (size_t i = 0; i < ntokens; i++)
        if (b->tokens[i] >= (uint32_t)vocab)
            return err_set(e, ERR_USAGE, "batch token %lu at %zu is >= vocab %d",
                           (unsigned long)b->tokens[i], i, vocab);
    return 0;
}
