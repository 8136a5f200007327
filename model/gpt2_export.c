/* gpt2_export.c — a GPT-2 layout as a Hugging Face GPT-2 folder; see gpt2_export.h. */
#include "model/gpt2_export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/shard.h"

/* HF's name of our tensor `name` ("wte" -> "transformer.wte.weight", "h.0.ln_1.weight"
 * -> "transformer.h.0.ln_1.weight") */
static void hf_name(const char *name, char *out, size_t cap) {
    if (!strcmp(name, "wte") || !strcmp(name, "wpe")) snprintf(out, cap, "transformer.%s.weight", name);
    else snprintf(out, cap, "transformer.%s", name);
}

/* whether tensor t is a linear weight that HF's Conv1D stores transposed */
static int is_conv1d(const model_tensor *t) {
    return t->ndim == 2 && strcmp(t->name, "wte") && strcmp(t->name, "wpe");
}

static int write_config(const model_layout *lay, const char *dir, st_dtype dtype, int eos, tdm_err *e) {
    const model_config *c = &lay->cfg;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    /* GPT2Config defaults both ids to 50256: outside a smaller vocabulary, generate()
     * would never stop and the model and its tokenizer disagree on the end token */
    char ids[96] = "";
    if (eos >= 0) snprintf(ids, sizeof ids, "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n", eos, eos);
    else if (c->vocab <= 50256) snprintf(ids, sizeof ids, "  \"bos_token_id\": null,\n  \"eos_token_id\": null,\n");
    char text[2048];
    snprintf(text, sizeof text,
            "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
            "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n  \"n_embd\": %d,\n"
            "  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_inner\": null,\n"
            "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": 1e-05,\n"
            "  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n"
            "%s  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"%s\"\n}\n",
            c->vocab, c->ctx, c->ctx, c->channels, c->layers, c->heads, ids, dtype == ST_BF16 ? "bfloat16" : "float32");
    /* replaced whole (a temporary renamed over it): a link there is replaced, not followed */
    return shard_atomic_write(path, text, strlen(text), NULL, 0, e);
}

int gpt2_save(const model_layout *lay, const float *params, const char *dir, st_dtype dtype, int eos, tdm_err *e) {
    if (lay->cfg.arch != MODEL_ARCH_GPT2) return err_set(e, ERR_INTERNAL, "gpt2_save: not a GPT-2 layout");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return err_sys(e, ERR_USAGE, errno, "%s: cannot create", dir);
    int rc = 0;
    size_t n = (size_t)lay->n;
    st_out *t = calloc(n, sizeof *t);
    char (*names)[MODEL_NAME_MAX + 32] = calloc(n, sizeof *names);
    float **owned = calloc(n, sizeof *owned); /* the transposed copies */
    if (!t || !names || !owned) rc = err_set(e, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        const model_tensor *mt = &lay->t[i];
        const float *src = params + mt->offset;
        hf_name(mt->name, names[i], sizeof names[i]);
        t[i] = (st_out){.name = names[i], .dtype = dtype, .ndim = mt->ndim, .shape = {mt->shape[0], mt->shape[1]},
                        .data = src};
        if (mt->ndim == 1) t[i].shape[1] = 0;
        if (!is_conv1d(mt)) continue;
        int rows = mt->shape[0], cols = mt->shape[1];
        float *tr = owned[i] = malloc(mt->numel * sizeof *tr);
        if (!tr) {
            rc = err_set(e, ERR_INTERNAL, "out of memory");
            break;
        }
        for (int r = 0; r < rows; r++) /* [out = rows, in = cols] -> [in, out] */
            for (int c = 0; c < cols; c++) tr[(size_t)c * rows + r] = src[(size_t)r * cols + c];
        t[i].shape[0] = cols, t[i].shape[1] = rows, t[i].data = tr;
    }
    /* config.json before the weights, which come last (export_store removed an earlier
     * model.safetensors first): a folder whose export was cut off has no weights, never
     * new weights beside an old config (or the reverse) that loads as a model */
    if (!rc) rc = write_config(lay, dir, dtype, eos, e);
    if (!rc) {
        char path[4200];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        const char *meta[] = {"format", "pt", "written_by", "tandem"};
        rc = safetensors_write(path, t, n, meta, 2, e);
    }
    for (size_t i = 0; owned && i < n; i++) free(owned[i]);
    free(owned), free(names), free(t);
    return rc;
}
