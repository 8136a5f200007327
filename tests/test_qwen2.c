/* test_qwen2.c — the Qwen2 / Llama forward pass on the CPU (model/qwen2.h) against
 * PyTorch (tests/models/qwen2_ref.py: the same architecture written as transformers
 * computes it, on the same folder read by its own safetensors reader): logits and the
 * mean cross-entropy of small random models (weights N(0, 0.3^2) in BF16, so that every
 * nonlinearity matters) — a Qwen2 (grouped-query attention 4/2, q/k/v biases, tied
 * embeddings) and a Llama (no biases, an untied lm_head) — equal within float32 rounding;
 * and the gradient of the loss with respect to every weight against autograd's, tensor
 * by tensor.
 * A token at the vocabulary and a sequence past max_position_embeddings are refused. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "model/cpu64.h"
#include "model/model.h"
#include "model/qwen2.h"
#include "tests/test.h"
#include "util/json_tree.h"
#include "util/rng.h"

static char g_dir[500], g_root[500];

typedef struct grad_walk {
    const float *got, *want;
    size_t *off;
    double *worst;
    char *name;
    size_t cap;
} grad_walk;

/* One tensor's gradient: max |got - want| / max |want| (the worst so far kept). */
static int grad_compare(const char *name, int64_t rows, int64_t cols, void *arg) {
    grad_walk *w = arg;
    size_t n = (size_t)rows * (size_t)(cols ? cols : 1);
    double diff = 0, big = 0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)w->got[*w->off + i] - w->want[*w->off + i]));
        big = fmax(big, fabs((double)w->want[*w->off + i]));
    }
    *w->off += n;
    double rel = big > 0 ? diff / big : diff;
    if (rel > *w->worst || !w->name[0]) {
        *w->worst = rel;
        snprintf(w->name, w->cap, "%s", name);
    }
    return 0;
}

/* PyTorch's forward (tests/models/qwen2_ref.py) on folder `dir` for tokens [B][T+1]: the
 * logits into ref[B*T*V] (*got: how many were read) and, when grad_path is not NULL,
 * autograd's gradient written there; its output (the loss) into out. Its exit status. */
static int torch_forward(const char *dir, const uint32_t *tok, int B, int T, float *ref, size_t nl, size_t *got,
                         const char *grad_path, char *out, size_t cap) {
    char toks[700], lpath[700], cmd[4000];
    snprintf(toks, sizeof toks, "%s/tokens.u32", dir);
    snprintf(lpath, sizeof lpath, "%s/ref.f32", dir);
    FILE *f = fopen(toks, "wb");
    if (!f || fwrite(tok, sizeof *tok, (size_t)B * (T + 1), f) != (size_t)B * (T + 1)) {
        if (f) fclose(f);
        return -1;
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/models/qwen2_ref.py' '%s' '%s' %d %d '%s'%s%s%s 2>&1",
             g_root, dir, toks, B, T, lpath, grad_path ? " '" : "", grad_path ? grad_path : "", grad_path ? "'" : "");
    int rc = test_sh(cmd, out, cap);
    f = fopen(lpath, "rb");
    *got = f ? fread(ref, sizeof *ref, nl, f) : 0;
    if (f) fclose(f);
    return rc;
}

/* max |a - b| and max |b| over n values */
static void max_diff(const float *a, const float *b, size_t n, double *diff, double *big) {
    *diff = 0, *big = 0;
    for (size_t i = 0; i < n; i++) {
        *diff = fmax(*diff, fabs((double)a[i] - b[i]));
        *big = fmax(*big, fabs((double)b[i]));
    }
}

static int write_text(const char *path, const char *text) {
    FILE *fp = fopen(path, "w");
    if (!fp) return -1;
    int bad = fputs(text, fp) < 0;
    return fclose(fp) || bad ? -1 : 0;
}

static int read_text(const char *path, char *buf, size_t cap) {
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    size_t n = fread(buf, 1, cap - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return 0;
}

/* A folder of `type`, its forward pass here and in PyTorch: the largest logit difference
 * relative to the largest logit, and both losses. */
static void against_torch(const char *type, int tied) {
    enum { B = 3, T = 9 };
    char dir[600], cmd[4000], out[256];
    snprintf(dir, sizeof dir, "%s/%s-%d", g_dir, type, tied);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/models/st_ref.py' hf '%s' %s %d 0.3 2>&1", g_root, dir,
             type, tied);
    CHECK(test_sh(cmd, out, sizeof out) == 0, "st_ref.py hf: %s", out);
    qwen2_model m;
    tdm_err e = {0};
    CHECK(qwen2_load(dir, &m, &e) == 0, "%s", e.msg);
    uint32_t tok[B * (T + 1)];
    rng_stream r;
    rng_stream_init(&r, 17, RNG_TEST, (uint32_t)tied, 0, 0);
    for (int i = 0; i < B * (T + 1); i++) tok[i] = (uint32_t)rng_below(&r, (uint64_t)m.a.vocab);
    size_t nl = (size_t)B * T * m.a.vocab;
    float *lg = malloc(nl * sizeof *lg), *ref = malloc(nl * sizeof *ref);
    double loss = 0, loss2 = 0;
    int rc = qwen2_forward(&m, tok, B, T, lg, &loss, &e);
    float *grad = malloc(m.numel * sizeof *grad), *gref = malloc(m.numel * sizeof *gref);
    int grc = qwen2_forward_backward(&m, tok, B, T, grad, &loss2, &e);
    char gpath[700];
    snprintf(gpath, sizeof gpath, "%s/grad.f32", dir);
    size_t got = 0;
    int prc = torch_forward(dir, tok, B, T, ref, nl, &got, gpath, out, sizeof out);
    double ref_loss = atof(out);
    double maxdiff = 0, maxabs = 0;
    if (got == nl) max_diff(lg, ref, nl, &maxdiff, &maxabs);
    free(lg);
    free(ref);
    /* the gradient, tensor by tensor: the largest difference relative to the tensor's
     * largest gradient */
    FILE *f = fopen(gpath, "rb");
    size_t ggot = f ? fread(gref, sizeof *gref, m.numel, f) : 0;
    if (f) fclose(f);
    double worst = 0;
    char worst_name[128] = "";
    size_t off = 0;
    grad_walk gw = {grad, gref, &off, &worst, worst_name, sizeof worst_name};
    if (ggot == m.numel && grc == 0) hf_arch_each_tensor(&m.a, grad_compare, &gw);
    free(grad);
    free(gref);
    /* refusals */
    uint32_t bad[2 * 3] = {1, 2, 3, 4, 5, (uint32_t)m.a.vocab};
    int rbad = qwen2_forward(&m, bad, 2, 2, NULL, &loss, &e);
    int rlong = qwen2_forward(&m, tok, 1, m.a.max_positions + 1, NULL, &loss, &e);
    size_t m_numel = m.numel;
    qwen2_free(&m);
    CHECK(rc == 0, "forward: %s", e.msg);
    CHECK(prc == 0 && got == nl, "qwen2_ref.py: %s", out);
    printf("  %s%s: logits max |diff| %.3g (largest logit %.3g), loss %.7f vs torch %.7f\n", type,
           tied ? " (tied)" : "", maxdiff, maxabs, loss, ref_loss);
    CHECK(maxabs > 1, "the logits are too small to tell anything (%.3g)", maxabs);
    CHECK(maxdiff <= 2e-5 * maxabs, "logits differ from torch's by %.3g (largest %.3g)", maxdiff, maxabs);
    CHECK(fabs(loss - ref_loss) <= 1e-5 * fabs(ref_loss), "loss %.9f vs torch %.9f", loss, ref_loss);
    CHECK(grc == 0 && ggot == m_numel, "backward: %s (torch gave %zu of %zu values)", e.msg, ggot, m_numel);
    printf("  %s: gradients of all %zu weights: worst relative difference %.3g (%s)\n", type, m_numel, worst,
           worst_name);
    CHECK(loss2 == loss, "the backward pass's loss %.9f differs from the forward's %.9f", loss2, loss);
    CHECK(worst <= 1e-4, "gradient of %s differs from autograd's by %.3g of its largest value", worst_name, worst);
    CHECK(rbad == ERR_USAGE && rlong == ERR_USAGE, "a token at the vocabulary (%d) or too long a sequence (%d) passed",
          rbad, rlong);
}

static void test_qwen2_against_torch(void) { against_torch("qwen2", 1); }
static void test_llama_against_torch(void) { against_torch("llama", 0); }

/* Export: weights after one SGD step (as a trained u would be) written as a folder, F32:
 * qwen2_load reads back the same bits, and PyTorch's forward on the written folder gives
 * the logits this forward gives on those weights. BF16 export of the original (BF16)
 * weights is lossless: the same bits again. */
static void test_export_round_trip(void) {
    enum { B = 2, T = 6 };
    char src[600], out[600], res[256];
    snprintf(src, sizeof src, "%s/llama-0", g_dir);
    qwen2_model m, back;
    tdm_err e = {0};
    CHECK(qwen2_load(src, &m, &e) == 0, "%s", e.msg);
    uint32_t tok[B * (T + 1)];
    for (int i = 0; i < B * (T + 1); i++) tok[i] = (uint32_t)((i * 37 + 11) % m.a.vocab);
    float *grad = malloc(m.numel * sizeof *grad);
    double loss;
    CHECK(qwen2_forward_backward(&m, tok, B, T, grad, &loss, &e) == 0, "%s", e.msg);
    for (size_t i = 0; i < m.numel; i++) m.params[i] -= 0.5f * grad[i];
    free(grad);
    snprintf(out, sizeof out, "%s/export-f32", g_dir);
    CHECK(qwen2_save(&m, m.params, out, ST_F32, NULL, &e) == 0, "%s", e.msg);
    CHECK(qwen2_load(out, &back, &e) == 0, "reading the export back: %s", e.msg);
    int same = back.numel == m.numel && !memcmp(back.params, m.params, m.numel * sizeof *m.params) && back.a.tied == m.a.tied &&
               back.a.kv_heads == m.a.kv_heads && back.a.rope_theta == m.a.rope_theta;
    qwen2_free(&back);
    CHECK(same, "the F32 export read back differs");
    size_t nl = (size_t)B * T * m.a.vocab;
    float *lg = malloc(nl * sizeof *lg), *ref = malloc(nl * sizeof *ref);
    CHECK(qwen2_forward(&m, tok, B, T, lg, &loss, &e) == 0, "%s", e.msg);
    size_t got = 0;
    int prc = torch_forward(out, tok, B, T, ref, nl, &got, NULL, res, sizeof res);
    double diff = 0, big = 0;
    if (got == nl) max_diff(lg, ref, nl, &diff, &big);
    free(lg);
    free(ref);
    CHECK(prc == 0 && got == nl, "PyTorch on the export: %s", res);
    CHECK(diff <= 2e-5 * big && big > 1, "PyTorch's logits on the export differ by %.3g (largest %.3g)", diff, big);
    qwen2_free(&m);
    /* BF16 of BF16 weights: lossless */
    CHECK(qwen2_load(src, &m, &e) == 0, "%s", e.msg);
    snprintf(out, sizeof out, "%s/export-bf16", g_dir);
    CHECK(qwen2_save(&m, m.params, out, ST_BF16, NULL, &e) == 0, "%s", e.msg);
    CHECK(qwen2_load(out, &back, &e) == 0, "%s", e.msg);
    same = !memcmp(back.params, m.params, m.numel * sizeof *m.params);
    qwen2_free(&back);
    qwen2_free(&m);
    CHECK(same, "the BF16 export of BF16 weights read back differs");
    /* the source's special token ids go on (generate() stops at eos); one out of the
     * vocabulary or of another type is left out, and the file stays JSON */
    char ids_src[700], cfg[800], text[8192];
    snprintf(ids_src, sizeof ids_src, "%s/ids-src", g_dir);
    snprintf(cfg, sizeof cfg, "%s/config.json", ids_src);
    CHECK(mkdir(ids_src, 0755) == 0 || errno == EEXIST, "mkdir");
    CHECK(write_text(cfg, "{\"bos_token_id\": 1, \"eos_token_id\": [2, 3], \"pad_token_id\": null}") == 0, "cfg");
    CHECK(qwen2_load(src, &m, &e) == 0, "%s", e.msg);
    snprintf(out, sizeof out, "%s/export-ids", g_dir);
    CHECK(qwen2_save(&m, m.params, out, ST_BF16, ids_src, &e) == 0, "%s", e.msg);
    snprintf(cfg, sizeof cfg, "%s/config.json", out);
    CHECK(read_text(cfg, text, sizeof text) == 0, "read %s", cfg);
    const tjson *root;
    char why[200];
    tjson_doc *doc = tjson_parse(text, strlen(text), &root, why, sizeof why);
    const tjson *bos = doc ? tjson_get(root, "bos_token_id") : NULL, *eos = doc ? tjson_get(root, "eos_token_id") : NULL,
                *pad = doc ? tjson_get(root, "pad_token_id") : NULL;
    CHECK(doc && bos && bos->type == TJ_NUM && bos->u.num == 1 && eos && eos->type == TJ_ARR && eos->n == 2 &&
              eos->u.kids[1].u.num == 3 && pad && pad->type == TJ_NULL,
          "the export's token ids: %s", text);
    tjson_free(doc);
    snprintf(cfg, sizeof cfg, "%s/config.json", ids_src);
    char bad[200];
    snprintf(bad, sizeof bad, "{\"bos_token_id\": \"1\", \"eos_token_id\": %d, \"pad_token_id\": 1.5}", m.a.vocab);
    CHECK(write_text(cfg, bad) == 0, "cfg");
    CHECK(qwen2_save(&m, m.params, out, ST_BF16, ids_src, &e) == 0, "%s", e.msg);
    snprintf(cfg, sizeof cfg, "%s/config.json", out);
    CHECK(read_text(cfg, text, sizeof text) == 0, "read %s", cfg);
    doc = tjson_parse(text, strlen(text), &root, why, sizeof why);
    CHECK(doc && !tjson_get(root, "bos_token_id") && !tjson_get(root, "eos_token_id") && !tjson_get(root, "pad_token_id"),
          "ids that are no ids of this vocabulary written: %s", text);
    tjson_free(doc);
    CHECK(qwen2_load(out, &back, &e) == 0, "the export with the source's ids: %s", e.msg);
    qwen2_free(&back);
    qwen2_free(&m);
    printf("  export: F32 after an SGD step read back bit for bit, PyTorch's logits on it within %.2g; BF16 lossless\n",
           diff);
}

/* The CPU backend (model_cpu_ops) on an HF-family layout: per-domain losses equal the
 * reference's mean over each domain's rows, the backward of coef[0] loss[0] + coef[1]
 * loss[1] equals the same combination of the reference's gradients, two passes give the
 * same bits, the layout keeps HF's names (2-D tensors decay, the rest not) and the
 * double build refuses the family. */
static void test_backend_per_domain(void) {
    enum { B = 3, T = 7 };
    char src[600];
    snprintf(src, sizeof src, "%s/qwen2-1", g_dir);
    qwen2_model m;
    tdm_err e = {0};
    CHECK(qwen2_load(src, &m, &e) == 0, "%s", e.msg);
    model_config mc;
    model_config_hf(&mc, &m.a, T);
    model_layout lay;
    CHECK(model_layout_init(&lay, &mc, &e) == 0, "%s", e.msg);
    CHECK(lay.numel == m.numel, "layout of %zu parameters, the folder %zu", lay.numel, m.numel);
    int decay_ok = 1;
    for (int i = 0; i < lay.n; i++) decay_ok &= lay.t[i].decay == (lay.t[i].ndim == 2);
    CHECK(decay_ok && !strcmp(lay.t[0].name, "model.embed_tokens.weight") &&
              model_layout_find(&lay, "model.layers.1.self_attn.k_proj.bias") != NULL,
          "layout names or decay flags");
    uint32_t tok[B * (T + 1)];
    for (int i = 0; i < B * (T + 1); i++) tok[i] = (uint32_t)((i * 53 + 7) % m.a.vocab);
    int32_t dom[B] = {0, 1, 0};
    model_batch batch = {.B = B, .T = T, .tokens = tok, .domain = dom};
    model_ctx *ctx = model_cpu_ops.create(&lay, B, T, 2, 0, &e);
    CHECK(ctx != NULL, "create: %s", e.msg);
    float *grad = malloc(m.numel * sizeof *grad), *grad2 = malloc(m.numel * sizeof *grad2);
    double loss[2], loss2[2], coef[2] = {0.7, 0.3};
    long ntok[2];
    CHECK(model_cpu_ops.forward(ctx, m.params, &batch, loss, ntok, &e) == 0, "%s", e.msg);
    CHECK(model_cpu_ops.backward(ctx, m.params, coef, grad, &e) == 0, "%s", e.msg);
    CHECK(model_cpu_ops.forward(ctx, m.params, &batch, loss2, NULL, &e) == 0 &&
              model_cpu_ops.backward(ctx, m.params, coef, grad2, &e) == 0, "%s", e.msg);
    int same = loss[0] == loss2[0] && loss[1] == loss2[1] && !memcmp(grad, grad2, m.numel * sizeof *grad);
    /* the reference: domain 0 is rows 0 and 2, domain 1 row 1 */
    uint32_t t0[2 * (T + 1)], t1[T + 1];
    memcpy(t0, tok, sizeof t1);
    memcpy(t0 + T + 1, tok + 2 * (T + 1), sizeof t1);
    memcpy(t1, tok + T + 1, sizeof t1);
    double r0, r1;
    float *g0 = malloc(m.numel * sizeof *g0), *g1 = malloc(m.numel * sizeof *g1);
    CHECK(qwen2_forward_backward(&m, t0, 2, T, g0, &r0, &e) == 0 && qwen2_forward_backward(&m, t1, 1, T, g1, &r1, &e) == 0,
          "%s", e.msg);
    double diff = 0, big = 0;
    for (size_t i = 0; i < m.numel; i++) {
        double want = coef[0] * g0[i] + coef[1] * g1[i];
        diff = fmax(diff, fabs(grad[i] - want));
        big = fmax(big, fabs(want));
    }
    printf("  cpu backend, qwen2 layout: domain losses %.7f %.7f (reference %.7f %.7f), gradient of the "
           "0.7/0.3 mix within %.2g of the largest\n", loss[0], loss[1], r0, r1, diff / big);
    CHECK(ntok[0] == 2 * T && ntok[1] == T, "token counts %ld %ld", ntok[0], ntok[1]);
    CHECK(fabs(loss[0] - r0) <= 1e-6 * r0 && fabs(loss[1] - r1) <= 1e-6 * r1, "domain losses differ");
    CHECK(big > 0 && diff <= 1e-5 * big, "the coef-weighted gradient differs by %.3g of %.3g", diff, big);
    CHECK(same, "two passes gave different bits");
    model_cpu_ops.destroy(ctx);
    e.msg[0] = 0;
    CHECK(model_cpu64_ops.create(&lay, B, T, 2, 0, &e) == NULL && strstr(e.msg, "GPT-2"), "cpu64: %s", e.msg);
    free(grad), free(grad2), free(g0), free(g1);
    model_layout_free(&lay);
    qwen2_free(&m);
}

int main(void) {
    const char *root = getenv("TANDEM_ROOT");
    snprintf(g_root, sizeof g_root, "%s", root && *root ? root : ".");
    char *dir = test_tmpdir("qwen2");
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    free(dir);
    RUN(test_qwen2_against_torch);
    RUN(test_llama_against_torch);
    RUN(test_export_round_trip);
    RUN(test_backend_per_domain);
    test_rmtree(g_dir);
    return test_summary("test_qwen2");
}
