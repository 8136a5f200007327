/* hf_config.c — a Hugging Face Llama / Qwen2 folder's config.json and weights; see
 * hf_config.h. */
#include "model/hf_config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json_tree.h"
#include "model/model.h"
#include "util/buf.h"
#include "util/fileio.h"

static int num_key(const tjson *root, const char *path, const char *key, double dflt, double *out, tdm_err *e) {
    const tjson *v = tjson_get(root, key);
    if (!v || v->type == TJ_NULL) {
        *out = dflt;
        return 0;
    }
    if (v->type != TJ_NUM || !(v->u.num > 0) || !isfinite(v->u.num))
        return err_set(e, ERR_USAGE, "%s: \"%s\" must be a positive number", path, key);
    *out = v->u.num;
    return 0;
}

/* A yes/no setting: true, false, or absent (dflt). Anything else (1, "true") is refused
 * naming the key: read as false, tie_word_embeddings: 1 silently made an untied model. */
static int bool_key(const tjson *root, const char *path, const char *key, int dflt, int *out, tdm_err *e) {
    const tjson *v = tjson_get(root, key);
    if (v && v->type != TJ_TRUE && v->type != TJ_FALSE && v->type != TJ_NULL)
        return err_set(e, ERR_USAGE, "%s: \"%s\" must be true or false, not %s", path, key, tjson_type_name(v));
    *out = !v || v->type == TJ_NULL ? dflt : v->type == TJ_TRUE;
    return 0;
}

/* DIR/config.json parsed into *doc / *root (the caller frees *doc); the path into path. */
/* the largest config.json read */
#define HF_CONFIG_MAX (8 << 20)

int hf_config_json_read(const char *dir, char *path, size_t cap, tjson_doc **doc, const tjson **root, tdm_err *e) {
    snprintf(path, cap, "%s/config.json", dir);
    buf_t text = {0};
    if (fileio_read_all(path, &text, HF_CONFIG_MAX)) {
        int err = errno;
        buf_free(&text);
        if (err == EFBIG) /* a config.json is a few KiB: this one is something else */
            return err_set(e, ERR_USAGE, "%s: larger than the %d MiB a config.json may be (a few KiB is usual): "
                           "not a model's config.json", path, HF_CONFIG_MAX >> 20);
        return err_set(e, err == ENOMEM ? ERR_INTERNAL : ERR_USAGE,
                       "%s: cannot read (a Hugging Face model folder holds config.json and "
                       "model.safetensors): %s", path, fileio_strerror(err));
    }
    char why[256];
    *doc = tjson_parse(text.p ? text.p : "", text.n, root, why, sizeof why);
    buf_free(&text);
    if (!*doc) return err_set(e, ERR_USAGE, "%s: not JSON: %s", path, why);
    if ((*root)->type != TJ_OBJ) return err_set(e, ERR_USAGE, "%s: not a JSON object", path);
    return 0;
}

/* value as a JSON id (or list of ids, or null) below vocab into out; 0 when it is one */
static int token_id_value(const tjson *v, int vocab, char *out, size_t cap) {
    if (v->type == TJ_NULL) return snprintf(out, cap, "null"), 0;
    if (v->type == TJ_NUM) {
        double x = v->u.num; /* the range first: (long) of 1e30 is undefined */
        if (!(x >= 0 && x < vocab) || x != floor(x)) return -1;
        return snprintf(out, cap, "%ld", (long)x), 0;
    }
    if (v->type != TJ_ARR || v->n == 0 || v->n > 64) return -1;
    size_t n = (size_t)snprintf(out, cap, "[");
    for (uint32_t i = 0; i < v->n && n < cap; i++) {
        char one[32];
        if (v->u.kids[i].type != TJ_NUM || token_id_value(&v->u.kids[i], vocab, one, sizeof one)) return -1;
        n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? ", " : "", one);
    }
    if (n + 2 > cap) return -1;
    snprintf(out + n, cap - n, "]");
    return 0;
}

void hf_token_ids_json(const char *dir, int vocab, char *out, size_t cap) {
    static const char *const keys[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    out[0] = '\0';
    char path[4200];
    tjson_doc *doc = NULL;
    const tjson *root;
    tdm_err ignore;
    if (dir && hf_config_json_read(dir, path, sizeof path, &doc, &root, &ignore) == 0) {
        size_t n = 0;
        for (int k = 0; k < 3; k++) {
            const tjson *v = tjson_get(root, keys[k]);
            char val[1024];
            if (v && token_id_value(v, vocab, val, sizeof val) == 0 && n < cap)
                n += (size_t)snprintf(out + n, cap - n, "  \"%s\": %s,\n", keys[k], val);
        }
        if (n >= cap) out[0] = '\0'; /* cut: none rather than broken JSON */
    }
    tjson_free(doc);
}

/* 2^40 parameters (4 TiB of fp32 weights): past any model tandem can hold */
#define HF_MAX_PARAMS 1099511627776.0

static int count_one_d(const char *name, int64_t rows, int64_t cols, void *arg) {
    (void)name;
    *(double *)arg += (double)rows * (double)(cols ? cols : 1);
    return 0;
}

int hf_arch_read(const char *dir, hf_arch *a, tdm_err *e) {
    memset(a, 0, sizeof *a);
    char path[4200];
    const tjson *root;
    tjson_doc *doc = NULL;
    int rc = hf_config_json_read(dir, path, sizeof path, &doc, &root, e);
    if (rc) {
        tjson_free(doc);
        return rc;
    }
    const tjson *mt = tjson_get(root, "model_type");
    if (!mt || mt->type != TJ_STR)
        rc = err_set(e, ERR_USAGE, "%s: no \"model_type\" string", path);
    else if (strcmp(mt->u.s, "qwen2") && strcmp(mt->u.s, "llama"))
        rc = err_set(e, ERR_USAGE, "%s: model_type \"%.40s\": tandem loads the Qwen2 and Llama families "
                     "(model_type qwen2 or llama) here, and a GPT-2 (gpt2) as model.init of a run", path, mt->u.s);
    if (!rc) snprintf(a->model_type, sizeof a->model_type, "%s", mt->u.s);
    int big = 1 << 30;
    if (!rc) rc = tjson_int(root, path, "vocab_size", -1, 1, MODEL_VOCAB_MAX, &a->vocab, e);
    if (!rc) rc = tjson_int(root, path, "hidden_size", -1, 1, 1 << 20, &a->channels, e);
    if (!rc) rc = tjson_int(root, path, "num_hidden_layers", -1, 1, 4096, &a->layers, e);
    if (!rc) rc = tjson_int(root, path, "num_attention_heads", -1, 1, 4096, &a->heads, e);
    if (!rc) rc = tjson_int(root, path, "num_key_value_heads", a->heads, 1, a->heads, &a->kv_heads, e);
    if (!rc) rc = tjson_int(root, path, "intermediate_size", -1, 1, big, &a->intermediate, e);
    if (!rc) rc = tjson_int(root, path, "max_position_embeddings", 2048, 1, big, &a->max_positions, e);
    if (!rc && a->channels % a->heads && !tjson_get(root, "head_dim"))
        rc = err_set(e, ERR_USAGE, "%s: hidden_size %d is not divisible by num_attention_heads %d", path, a->channels,
                     a->heads);
    if (!rc) rc = tjson_int(root, path, "head_dim", a->channels / a->heads, 2, 1 << 16, &a->head_dim, e);
    if (!rc && a->head_dim % 2) rc = err_set(e, ERR_USAGE, "%s: head_dim %d is odd (RoPE rotates pairs)", path, a->head_dim);
    if (!rc && a->heads % a->kv_heads)
        rc = err_set(e, ERR_USAGE, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path,
                     a->heads, a->kv_heads);
    if (!rc) rc = num_key(root, path, "rope_theta", 10000.0, &a->rope_theta, e);
    /* transformers 5 writes RoPE as "rope_parameters": {"rope_theta", "rope_type", ...} and
     * no top-level rope_theta (read as the default 10000, the wrong model, exit 0; a scaled
     * RoPE there went unseen) */
    const tjson *rp = tjson_get(root, "rope_parameters");
    if (!rc && rp && rp->type != TJ_NULL && rp->type != TJ_OBJ)
        rc = err_set(e, ERR_USAGE, "%s: \"rope_parameters\" must be an object, not %s", path, tjson_type_name(rp));
    if (!rc && rp && rp->type == TJ_OBJ) {
        const tjson *type = tjson_get(rp, "rope_type");
        if (type && type->type != TJ_NULL && (type->type != TJ_STR || strcmp(type->u.s, "default")))
            rc = err_set(e, ERR_USAGE, "%s: rope_parameters.rope_type is %s%.40s%s: scaled RoPE (long-context "
                         "variants) is not implemented; use the base model", path, type->type == TJ_STR ? "\"" : "",
                         type->type == TJ_STR ? type->u.s : tjson_type_name(type), type->type == TJ_STR ? "\"" : "");
        double theta = 0;
        if (!rc && tjson_get(rp, "rope_theta")) rc = num_key(rp, path, "rope_theta", 0, &theta, e);
        if (!rc && theta > 0) {
            const tjson *top = tjson_get(root, "rope_theta");
            if (top && top->type == TJ_NUM && top->u.num != theta)
                rc = err_set(e, ERR_USAGE, "%s: rope_theta %g and rope_parameters.rope_theta %g disagree: keep one",
                             path, top->u.num, theta);
            a->rope_theta = theta;
        }
    }
    if (!rc && a->rope_theta < 1.0) /* the frequencies theta^(-2i/d) blow up below 1: "diverged" later */
        rc = err_set(e, ERR_USAGE, "%s: rope_theta %g is below 1 (Qwen2 and Llama use 10000 to 1e6)", path,
                     a->rope_theta);
    if (!rc) rc = num_key(root, path, "rms_norm_eps", 1e-6, &a->rms_eps, e);
    const tjson *act = tjson_get(root, "hidden_act");
    if (!rc && act && (act->type != TJ_STR || strcmp(act->u.s, "silu")))
        rc = err_set(e, ERR_USAGE, "%s: hidden_act must be \"silu\" (SwiGLU)", path);
    const tjson *scaling = tjson_get(root, "rope_scaling"), *stype = scaling ? tjson_get(scaling, "rope_type") : NULL;
    if (scaling && !stype) stype = tjson_get(scaling, "type");
    int plain = scaling && scaling->type == TJ_OBJ && stype && stype->type == TJ_STR && !strcmp(stype->u.s, "default");
    if (!rc && scaling && scaling->type != TJ_NULL && !plain)
        rc = err_set(e, ERR_USAGE, "%s: rope_scaling is set: scaled RoPE (long-context variants) is not "
                     "implemented; use the base model", path);
    int sliding = 0, tied = 0, bias = 0;
    if (!rc) rc = bool_key(root, path, "use_sliding_window", 0, &sliding, e);
    if (!rc) rc = bool_key(root, path, "tie_word_embeddings", 0, &tied, e);
    if (!rc) rc = bool_key(root, path, "attention_bias", 0, &bias, e);
    if (!rc && sliding)
        rc = err_set(e, ERR_USAGE, "%s: use_sliding_window is true: sliding-window attention is not implemented", path);
    /* Llama's attention_bias puts a bias on o_proj as well, its mlp_bias on the MLP: not
     * in tandem's Llama (the bias tensors were then called no part of the architecture) */
    int mlp_bias = 0;
    if (!rc) rc = bool_key(root, path, "mlp_bias", 0, &mlp_bias, e);
    if (!rc && !strcmp(a->model_type, "llama") && (bias || mlp_bias))
        rc = err_set(e, ERR_USAGE, "%s: %s is true: a Llama with biases (%s) is not implemented", path,
                     bias ? "attention_bias" : "mlp_bias",
                     bias ? "on q, k, v and o_proj" : "on the MLP's projections");
    if (!rc) {
        a->tied = tied;
        a->qkv_bias = !strcmp(a->model_type, "qwen2") || bias;
        const tjson *dt = tjson_get(root, "torch_dtype");
        if (dt && dt->type == TJ_STR) snprintf(a->torch_dtype, sizeof a->torch_dtype, "%.15s", dt->u.s);
    }
    /* every size within its range can still multiply past 2^64 parameters (hf_arch_params
     * would wrap, and memory be sized from the wrapped count): counted in double here */
    double params = 0;
    if (!rc) hf_arch_each_tensor(a, count_one_d, &params);
    if (!rc && params > HF_MAX_PARAMS)
        rc = err_set(e, ERR_USAGE, "%s: the sizes give %.3g parameters, more than tandem holds (%.3g); check "
                     "hidden_size, intermediate_size, num_hidden_layers, head_dim and vocab_size",
                     path, params, HF_MAX_PARAMS);
    tjson_free(doc);
    return rc;
}

int hf_arch_each_tensor(const hf_arch *a, int (*fn)(const char *name, int64_t rows, int64_t cols, void *arg),
                        void *arg) {
    int64_t C = a->channels, D = a->head_dim, Hq = (int64_t)a->heads * D, Hk = (int64_t)a->kv_heads * D;
    int64_t I = a->intermediate, V = a->vocab;
    char name[128];
    int rc = fn("model.embed_tokens.weight", V, C, arg);
    static const char *const proj[3] = {"q", "k", "v"};
    for (int l = 0; !rc && l < a->layers; l++) {
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        rc = fn(name, C, 0, arg);
        for (int p = 0; !rc && p < 3; p++) {
            snprintf(name, sizeof name, "model.layers.%d.self_attn.%s_proj.weight", l, proj[p]);
            rc = fn(name, p ? Hk : Hq, C, arg);
            if (!rc && a->qkv_bias) {
                snprintf(name, sizeof name, "model.layers.%d.self_attn.%s_proj.bias", l, proj[p]);
                rc = fn(name, p ? Hk : Hq, 0, arg);
            }
        }
        if (!rc) snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.weight", l), rc = fn(name, C, Hq, arg);
        if (!rc)
            snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l), rc = fn(name, C, 0, arg);
        if (!rc) snprintf(name, sizeof name, "model.layers.%d.mlp.gate_proj.weight", l), rc = fn(name, I, C, arg);
        if (!rc) snprintf(name, sizeof name, "model.layers.%d.mlp.up_proj.weight", l), rc = fn(name, I, C, arg);
        if (!rc) snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", l), rc = fn(name, C, I, arg);
    }
    if (!rc) rc = fn("model.norm.weight", C, 0, arg);
    if (!rc && !a->tied) rc = fn("lm_head.weight", V, C, arg);
    return rc;
}

static int count_one(const char *name, int64_t rows, int64_t cols, void *arg) {
    (void)name;
    *(uint64_t *)arg += (uint64_t)rows * (uint64_t)(cols ? cols : 1);
    return 0;
}

uint64_t hf_arch_params(const hf_arch *a) {
    uint64_t n = 0;
    hf_arch_each_tensor(a, count_one, &n);
    return n;
}

typedef struct check_ctx {
    const st_set *s;
    tdm_err *e;
    size_t found;
    unsigned char *seen; /* per tensor of s (safetensors_at's order): the architecture names it */
} check_ctx;

static int check_one(const char *name, int64_t rows, int64_t cols, void *arg) {
    check_ctx *x = arg;
    const st_tensor *t = safetensors_find(x->s, name);
    if (!t) return err_set(x->e, ERR_USAGE, "tensor %s is missing from the weights (%s)", name, safetensors_source(x->s));
    if (x->seen) x->seen[t - safetensors_at(x->s, 0)] = 1;
    int ok = cols ? t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols : t->ndim == 1 && t->shape[0] == rows;
    if (!ok) {
        char want[64], got[96] = "";
        snprintf(want, sizeof want, cols ? "[%lld, %lld]" : "[%lld]", (long long)rows, (long long)cols);
        for (int k = 0; k < t->ndim; k++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "", (long long)t->shape[k]);
        return err_set(x->e, ERR_USAGE, "%s: tensor %s has shape [%s], config.json implies %s", t->file, name, got,
                       want);
    }
    if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16)
        return err_set(x->e, ERR_USAGE, "%s: tensor %s is %s; F32, BF16 or F16 weights are loaded", t->file, name,
                       safetensors_dtype_name(t->dtype));
    x->found++;
    return 0;
}

int hf_arch_check_weights(const hf_arch *a, const st_set *s, tdm_err *e) {
    /* which tensors the architecture named, marked as they are found: the others are
     * found in one pass (asking the architecture again for each other tensor took
     * minutes for a few thousand layers) */
    size_t n = safetensors_count(s);
    check_ctx x = {.s = s, .e = e, .seen = calloc(n ? n : 1, 1)};
    if (!x.seen) return err_set(e, ERR_INTERNAL, "out of memory");
    int rc = hf_arch_each_tensor(a, check_one, &x);
    /* anything else is a tensor the architecture does not have (a sign of another
     * architecture or a config.json that does not belong to the weights) */
    for (size_t i = 0; !rc && x.found != n && i < n; i++) {
        const st_tensor *t = safetensors_at(s, i);
        if (x.seen[i] || strstr(t->name, "rotary_emb.inv_freq")) continue; /* inv_freq: from rope_theta */
        if (a->tied && !strcmp(t->name, "lm_head.weight")) {
            /* a tied model saved with its head as well (transformers ties it and ignores the
             * copy): the same values as the embedding are that model; others would be
             * another (transformers would compute with embed_tokens, not with them) */
            const st_tensor *w = safetensors_find(s, "model.embed_tokens.weight");
            if (w && t->ndim == 2 && t->shape[0] == w->shape[0] && t->shape[1] == w->shape[1] &&
                (t->dtype == ST_F32 || t->dtype == ST_BF16 || t->dtype == ST_F16) && safetensors_same_values(t, w))
                continue;
            rc = err_set(e, ERR_USAGE, "%s: tensor lm_head.weight differs from model.embed_tokens.weight, but "
                         "tie_word_embeddings is true in config.json: the head is the embedding, and transformers "
                         "would ignore these values; set tie_word_embeddings to false to train this head, or drop "
                         "lm_head.weight from the weights", t->file);
            break;
        }
        rc = err_set(e, ERR_USAGE, "%s: tensor %s is not part of the %s architecture config.json describes",
                     t->file, t->name, a->model_type);
    }
    free(x.seen);
    return rc;
}
