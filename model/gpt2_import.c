/* gpt2_import.c — a Hugging Face GPT-2 folder into a GPT-2 layout; see gpt2_import.h. */
#include "model/gpt2_import.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/hf_config.h"
#include "model/safetensors.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "util/json_tree.h"


int gpt2_hf_is(const char *dir) {
    char path[4200];
    tjson_doc *doc = NULL;
    const tjson *root = NULL;
    tdm_err e;
    int is = 0;
    if (!hf_config_json_read(dir, path, sizeof path, &doc, &root, &e)) {
        const tjson *mt = tjson_get(root, "model_type");
        is = mt && mt->type == TJ_STR && !strcmp(mt->u.s, "gpt2");
    }
    tjson_free(doc);
    return is;
}

/* A boolean member: 0 or 1, dflt when absent or null, -1 when of another type. */
static int bool_key(const tjson *root, const char *key, int dflt) {
    const tjson *v = tjson_get(root, key);
    if (!v || v->type == TJ_NULL) return dflt;
    return v->type == TJ_TRUE ? 1 : v->type == TJ_FALSE ? 0 : -1;
}

/* The settings of GPT2Config that change what the model computes, checked against what
 * tandem's GPT-2 computes (model/model.h). */
static int check_computation(const tjson *root, const char *path, const gpt2_hf *g, tdm_err *e) {
    const tjson *act = tjson_get(root, "activation_function");
    if (act && act->type != TJ_NULL &&
        (act->type != TJ_STR || (strcmp(act->u.s, "gelu_new") && strcmp(act->u.s, "gelu_pytorch_tanh"))))
        return err_set(e, ERR_USAGE, "%s: activation_function %s%.40s%s: tandem's GPT-2 computes the tanh GELU "
                       "(gelu_new or gelu_pytorch_tanh) only; a model trained with another activation would "
                       "compute something else here", path, act->type == TJ_STR ? "\"" : "",
                       act->type == TJ_STR ? act->u.s : tjson_type_name(act), act->type == TJ_STR ? "\"" : "");
    const tjson *eps = tjson_get(root, "layer_norm_epsilon");
    if (eps && eps->type != TJ_NULL && (eps->type != TJ_NUM || fabs(eps->u.num - 1e-5) > 1e-12))
        return err_set(e, ERR_USAGE, "%s: layer_norm_epsilon must be 1e-05, the LayerNorm eps tandem's GPT-2 "
                       "computes with", path);
    int inner = 0;
    int rc = tjson_int(root, path, "n_inner", 4L * g->channels, 1, 1L << 30, &inner, e);
    if (rc) return rc;
    if (inner != 4 * g->channels)
        return err_set(e, ERR_USAGE, "%s: n_inner %d: tandem's GPT-2 has an MLP of width 4 * n_embd = %d", path,
                       inner, 4 * g->channels);
    static const struct {
        const char *key;
        int want, dflt;
        const char *why;
    } flags[] = {
        {"tie_word_embeddings", 1, 1, "tandem's GPT-2 ties its output head to wte"},
        {"scale_attn_weights", 1, 1, "tandem's GPT-2 scales attention scores by 1/sqrt(head dim)"},
        {"scale_attn_by_inverse_layer_idx", 0, 0, "tandem's GPT-2 does not scale attention by the layer index"},
        {"add_cross_attention", 0, 0, "tandem's GPT-2 is a decoder without cross-attention"},
    };
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        int v = bool_key(root, flags[i].key, flags[i].dflt);
        if (v != flags[i].want)
            return err_set(e, ERR_USAGE, "%s: \"%s\" must be %s: %s", path, flags[i].key,
                           flags[i].want ? "true" : "false", flags[i].why);
    }
    return 0;
}

/* GPT-2's key `key` or transformers' alias of it (GPT2Config's attribute_map: the alias
 * is applied after the named argument, so it wins there): either alone is read; both
 * must agree, else ERR_USAGE naming both (a head count changes no tensor's shape, so a
 * contradiction would compute another model than transformers' with no other sign). */
static int alias_int(const tjson *root, const char *path, const char *key, const char *alias, long dflt, long lo,
                     long hi, int *out, tdm_err *e) {
    const tjson *k = tjson_get(root, key), *a = tjson_get(root, alias);
    int has_k = k && k->type != TJ_NULL, has_a = a && a->type != TJ_NULL;
    if (!has_k && has_a) return tjson_int(root, path, alias, -1, lo, hi, out, e);
    int rc = tjson_int(root, path, key, dflt, lo, hi, out, e);
    int v = 0;
    if (rc || !has_a || (rc = tjson_int(root, path, alias, -1, lo, hi, &v, e))) return rc;
    if (v != *out)
        return err_set(e, ERR_USAGE, "%s: %s is %d but %s is %d: transformers reads %s (its alias of %s), so the "
                       "file describes two models; give one of the keys, or the same value in both", path, key,
                       *out, alias, v, alias, key);
    return 0;
}

int gpt2_hf_read(const char *dir, gpt2_hf *g, tdm_err *e) {
    memset(g, 0, sizeof *g);
    char path[4200];
    tjson_doc *doc = NULL;
    const tjson *root = NULL;
    int rc = hf_config_json_read(dir, path, sizeof path, &doc, &root, e);
    const tjson *mt = rc ? NULL : tjson_get(root, "model_type");
    if (!rc && (!mt || mt->type != TJ_STR || strcmp(mt->u.s, "gpt2")))
        rc = err_set(e, ERR_USAGE, "%s: model_type is not \"gpt2\"", path);
    if (!rc) rc = tjson_int(root, path, "vocab_size", -1, 2, MODEL_VOCAB_MAX, &g->vocab, e);
    if (!rc) rc = alias_int(root, path, "n_embd", "hidden_size", -1, 1, 1 << 16, &g->channels, e);
    if (!rc) rc = alias_int(root, path, "n_layer", "num_hidden_layers", -1, 1, 1024, &g->layers, e);
    if (!rc) rc = alias_int(root, path, "n_head", "num_attention_heads", -1, 1, 1 << 16, &g->heads, e);
    int n_ctx = 1024;
    if (!rc) rc = tjson_int(root, path, "n_ctx", 1024, 1, 1 << 16, &n_ctx, e);
    if (!rc)
        rc = alias_int(root, path, "n_positions", "max_position_embeddings", n_ctx, 1, 1 << 16, &g->positions, e);
    if (!rc && g->channels % g->heads)
        rc = err_set(e, ERR_USAGE, "%s: n_embd %d is not divisible by n_head %d", path, g->channels, g->heads);
    if (!rc) rc = check_computation(root, path, g, e);
    tjson_free(doc);
    return rc;
}

int gpt2_hf_model_config(const gpt2_hf *g, const char *dir, int ctx, model_config *mc, tdm_err *e) {
    memset(mc, 0, sizeof *mc);
    if (ctx > g->positions)
        return err_set(e, ERR_USAGE, "model.ctx = %d: the GPT-2 of %s/config.json has n_positions %d (learned "
                       "positions): lower model.ctx (and train.seq) to at most %d", ctx, dir, g->positions,
                       g->positions);
    *mc = (model_config){.arch = MODEL_ARCH_GPT2, .vocab = g->vocab, .ctx = ctx, .layers = g->layers,
                         .heads = g->heads, .channels = g->channels};
    return model_config_check(mc, e);
}

/* HF's name of our tensor `name` under `prefix` ("wte" -> "transformer.wte.weight",
 * "h.0.ln_1.weight" -> "transformer.h.0.ln_1.weight") */
static void hf_name(const char *prefix, const char *name, char *out, size_t cap) {
    int emb = !strcmp(name, "wte") || !strcmp(name, "wpe");
    snprintf(out, cap, "%s%s%s", prefix, name, emb ? ".weight" : "");
}

/* The shape HF stores our tensor mt in, for a file of `positions` rows of wpe: Conv1D
 * weights transposed, wpe all its rows. *transposed says which. */
static void hf_shape(const model_tensor *mt, int positions, int64_t shape[2], int *transposed) {
    *transposed = mt->ndim == 2 && strcmp(mt->name, "wte") && strcmp(mt->name, "wpe");
    shape[0] = *transposed ? mt->shape[1] : mt->shape[0];
    shape[1] = mt->ndim == 1 ? 0 : *transposed ? mt->shape[0] : mt->shape[1];
    if (!strcmp(mt->name, "wpe")) shape[0] = positions;
}

/* ERR_USAGE unless t has shape [want[0]] (want[1] == 0) or [want[0], want[1]]. */
static int check_shape(const st_tensor *t, const int64_t want[2], tdm_err *e) {
    int ok = want[1] ? t->ndim == 2 && t->shape[0] == want[0] && t->shape[1] == want[1]
                     : t->ndim == 1 && t->shape[0] == want[0];
    if (ok) return 0;
    char w[64], got[160] = "";
    snprintf(w, sizeof w, want[1] ? "[%lld, %lld]" : "[%lld]", (long long)want[0], (long long)want[1]);
    for (int k = 0; k < t->ndim; k++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "", (long long)t->shape[k]);
    return err_set(e, ERR_USAGE, "%s: tensor %s has shape [%s], config.json implies %s (GPT-2's Conv1D weights "
                   "are [in, out]): the weights are not the model config.json describes", t->file, t->name, got, w);
}

/* Our tensor mt from s (under prefix), checked, into host + mt->offset (host NULL: only
 * checked); tmp holds positions * C floats, or mt->numel for a Conv1D weight. */
static int load_tensor(const st_set *s, const char *dir, const char *prefix, const model_tensor *mt, int positions,
                       float *host, float *tmp, tdm_err *e) {
    char name[MODEL_NAME_MAX + 32];
    hf_name(prefix, mt->name, name, sizeof name);
    const st_tensor *t = safetensors_find(s, name);
    if (!t)
        return err_set(e, ERR_USAGE, "%s: tensor %s is missing from the weights (*.safetensors; a GPT-2 of "
                       "config.json's n_layer has it): the folder is not a complete GPT2LMHeadModel", dir, name);
    int64_t want[2];
    int tr;
    hf_shape(mt, positions, want, &tr);
    int rc = check_shape(t, want, e);
    if (rc) return rc;
    if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16)
        return err_set(e, ERR_USAGE, "%s: tensor %s is %s; F32, BF16 or F16 weights are loaded", t->file, name,
                       safetensors_dtype_name(t->dtype));
    if (!host) return 0;
    float *dst = host + mt->offset;
    if (!tr && strcmp(mt->name, "wpe")) return safetensors_to_f32(t, dst, e);
    if ((rc = safetensors_to_f32(t, tmp, e))) return rc;
    if (!tr) { /* wpe: the run's first ctx positions */
        memcpy(dst, tmp, mt->numel * sizeof *dst);
        return 0;
    }
    size_t rows = (size_t)mt->shape[0], cols = (size_t)mt->shape[1]; /* ours [out, in]; HF's [in, out] */
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) dst[r * cols + c] = tmp[c * rows + r];
    return 0;
}

/* Whether `rest` (a name after the prefix) is h.N.attn.bias or h.N.attn.masked_bias:
 * the causal mask transformers keeps as a buffer, recomputed here. */
static int is_mask_buffer(const char *rest) {
    if (strncmp(rest, "h.", 2)) return 0;
    const char *p = rest + 2;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return !strcmp(p, ".attn.bias") || !strcmp(p, ".attn.masked_bias");
}

/* Every tensor of s that is not one of lay's (under prefix) must be a mask buffer or an
 * lm_head.weight equal to the loaded wte (its values compared only when host). */
static int check_rest(const st_set *s, const char *prefix, const model_layout *lay, const float *host, tdm_err *e) {
    size_t plen = strlen(prefix);
    const model_tensor *wte = model_layout_find(lay, "wte");
    for (size_t i = 0; i < safetensors_count(s); i++) {
        const st_tensor *t = safetensors_at(s, i);
        const char *rest = strncmp(t->name, prefix, plen) ? NULL : t->name + plen;
        if (rest && is_mask_buffer(rest)) continue;
        if (!strcmp(t->name, "lm_head.weight")) {
            int64_t want[2] = {wte->shape[0], wte->shape[1]};
            int rc = check_shape(t, want, e);
            if (!rc && t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16)
                rc = err_set(e, ERR_USAGE, "%s: tensor %s is %s", t->file, t->name, safetensors_dtype_name(t->dtype));
            float *head = !rc && host ? malloc(wte->numel * sizeof *head) : NULL;
            if (!rc && host && !head) rc = err_set(e, ERR_INTERNAL, "out of memory for lm_head.weight");
            if (!rc && host) rc = safetensors_to_f32(t, head, e);
            /* without host (tandem inspect), the two tensors' values in the file */
            char wname[64];
            snprintf(wname, sizeof wname, "%swte.weight", prefix);
            const st_tensor *w = host ? NULL : safetensors_find(s, wname);
            if (!rc && ((host && memcmp(head, host + wte->offset, wte->numel * sizeof *head)) ||
                        (w && !safetensors_same_values(t, w))))
                rc = err_set(e, ERR_USAGE, "%s: lm_head.weight differs from %swte.weight: tandem's GPT-2 ties its "
                             "head to the token embedding, and an untied head cannot be loaded", t->file, prefix);
            free(head);
            if (rc) return rc;
            continue;
        }
        char ours[MODEL_NAME_MAX + 32];
        snprintf(ours, sizeof ours, "%s", rest ? rest : "");
        size_t n = strlen(ours);
        if (n > 7 && (!strcmp(ours, "wte.weight") || !strcmp(ours, "wpe.weight"))) ours[n - 7] = '\0';
        char back[MODEL_NAME_MAX + 32]; /* "wte" alone is not HF's name of wte: the name must map back */
        hf_name("", ours, back, sizeof back);
        if (rest && model_layout_find(lay, ours) && !strcmp(back, rest)) continue;
        return err_set(e, ERR_USAGE, "%s: tensor %s is not part of the GPT-2 config.json describes (%d layers; "
                       "tensor names %s): the weights belong to another model", t->file, t->name, lay->cfg.layers,
                       plen ? "under \"transformer.\"" : "without a prefix, as wte.weight is");
    }
    return 0;
}

int gpt2_load(const char *dir, const model_layout *lay, float *host, tdm_err *e) {
    gpt2_hf g;
    int rc = gpt2_hf_read(dir, &g, e);
    if (rc) return rc;
    const model_config *c = &lay->cfg;
    if (c->arch != MODEL_ARCH_GPT2 || c->vocab != g.vocab || c->channels != g.channels || c->layers != g.layers ||
        c->heads != g.heads || c->ctx > g.positions)
        return err_set(e, ERR_USAGE, "%s/config.json now describes another GPT-2 (vocab %d, n_embd %d, n_layer %d, "
                       "n_head %d, n_positions %d) than the run's (vocab %d, %d, %d, %d, ctx %d)", dir, g.vocab,
                       g.channels, g.layers, g.heads, g.positions, c->vocab, c->channels, c->layers, c->heads, c->ctx);
    st_set *s = NULL;
    if ((rc = safetensors_open(dir, &s, e))) return rc;
    const char *prefix = safetensors_find(s, "transformer.wte.weight") ? "transformer."
                         : safetensors_find(s, "wte.weight")           ? ""
                                                                       : NULL;
    if (!prefix) {
        safetensors_close(s);
        return err_set(e, ERR_USAGE, "%s: the weights hold neither transformer.wte.weight nor wte.weight: not a "
                       "GPT-2 checkpoint", dir);
    }
    size_t big = (size_t)g.positions * (size_t)g.channels; /* wpe, or the largest Conv1D weight */
    for (int i = 0; i < lay->n; i++)
        if (lay->t[i].ndim == 2 && strcmp(lay->t[i].name, "wte") && lay->t[i].numel > big) big = lay->t[i].numel;
    float *tmp = host ? malloc(big * sizeof *tmp) : NULL;
    if (host && !tmp) rc = err_set(e, ERR_INTERNAL, "out of memory for a tensor of %zu values", big);
    for (int i = 0; !rc && i < lay->n; i++) rc = load_tensor(s, dir, prefix, &lay->t[i], g.positions, host, tmp, e);
    if (!rc) rc = check_rest(s, prefix, lay, host, e);
    free(tmp);
    safetensors_close(s);
    return rc;
}
