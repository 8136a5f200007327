/* model_source.c — model.init: GPT-2 from the config or a Hugging Face folder; see
 * model_source.h. */
#include "runner/model_source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/hf_config.h"
#include "model/qwen2.h"
#include "storage/sha256.h"
#include "util/buf.h"
#include "util/fileio.h"

#define HF_SCHEME "hf:"

bool model_source_check(const char *value, char *why, size_t n) {
    if (!strcmp(value, "random")) return true;
    if (!strncmp(value, HF_SCHEME, strlen(HF_SCHEME)) && value[strlen(HF_SCHEME)]) return true;
    snprintf(why, n, "expected random, or hf:DIR (a Hugging Face model folder), got '%.200s'", value);
    return false;
}

const char *model_source_hf_dir(const config *cfg) {
    const char *v = cfg->model.init;
    return strncmp(v, HF_SCHEME, strlen(HF_SCHEME)) ? NULL : v + strlen(HF_SCHEME);
}

/* When the dataset records its tokenizer's digest and the folder has a tokenizer.json,
 * they must be the same file: token ids of another tokenizer would train the model on
 * garbage that no vocabulary check notices. */
static int same_tokenizer(const dataset *ds, const char *dir, tdm_err *e) {
    if (!ds->tokenizer_sha256[0]) return 0;
    char path[CONFIG_STR_MAX + 32];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    buf_t b = {0};
    if (fileio_read_all(path, &b, (size_t)1 << 30) != 0) {
        free(b.p);
        return errno == ENOENT ? 0 : err_sys(e, ERR_USAGE, errno, "model.init: %s: cannot read", path);
    }
    sha256_digest d;
    char hex[SHA256_HEX_LEN + 1];
    sha256(b.p, b.n, &d);
    sha256_hex(&d, hex);
    free(b.p);
    if (!strcmp(hex, ds->tokenizer_sha256)) return 0;
    return err_set(e, ERR_USAGE,
                   "data.dataset: %s was tokenised with %s (sha256 %.12s...), not with the model's %s "
                   "(sha256 %.12s...): its token ids would mean other text to this model; prep the corpus "
                   "again with `tandem prep --tokenizer %s`",
                   ds->path, ds->tokenizer[0] ? ds->tokenizer : "another tokenizer", ds->tokenizer_sha256, path,
                   hex, path);
}

int model_source_config(const config *cfg, const dataset *ds, model_config *mc, tdm_err *e) {
    const char *dir = model_source_hf_dir(cfg);
    memset(mc, 0, sizeof *mc);
    if (!dir) {
        *mc = (model_config){.ctx = cfg->model.ctx, .layers = cfg->model.layers, .heads = cfg->model.heads,
                             .channels = cfg->model.channels};
        return dataset_model_vocab(ds, cfg->model.vocab, &mc->vocab, e);
    }
    hf_arch a;
    int rc = hf_arch_read(dir, &a, e);
    if (rc) return err_prefix(e, "model.init: ");
    if (cfg->model.vocab && cfg->model.vocab != a.vocab)
        return err_set(e, ERR_USAGE, "model.vocab = %d, but the model of %s/config.json has vocab_size %d: leave "
                       "model.vocab at 0 (the folder decides)", cfg->model.vocab, dir, a.vocab);
    if (ds->vocab > a.vocab)
        return err_set(e, ERR_USAGE, "data.dataset: %s has a vocabulary of %d (token ids up to %d), more than the "
                       "vocab_size %d of %s/config.json: the corpus was tokenised for another model; prep it "
                       "with the model's tokenizer (tandem prep --tokenizer %s/tokenizer.json)",
                       ds->path, ds->vocab, ds->vocab - 1, a.vocab, dir, dir);
    if ((rc = same_tokenizer(ds, dir, e))) return rc;
    model_config_hf(mc, &a, cfg->model.ctx);
    rc = model_config_check(mc, e);
    return rc ? err_prefix(e, "model.init: ") : 0;
}

int model_source_weights(const config *cfg, const model_layout *lay, float *host, tdm_err *e) {
    const char *dir = model_source_hf_dir(cfg);
    if (!dir) {
        model_init_params(lay, cfg->run.seed, host);
        return 0;
    }
    qwen2_model m;
    int rc = qwen2_load(dir, &m, e);
    if (rc) return err_prefix(e, "model.init: ");
    if (m.numel != lay->numel)
        rc = err_set(e, ERR_USAGE, "model.init: %s now holds a model of %zu parameters, not the %zu of its "
                     "config.json when the run began", dir, m.numel, lay->numel);
    else
        memcpy(host, m.params, m.numel * sizeof *host);
    qwen2_free(&m);
    return rc;
}

/* Qwen2-0.5B as its published config.json describes it (the model the paper fine-tunes):
 * for the estimate of what the SFT preset needs before a folder is given. */
static const hf_arch QWEN2_05B = {.model_type = "qwen2", .vocab = 151936, .channels = 896, .layers = 24,
                                  .heads = 14, .kv_heads = 2, .head_dim = 64, .intermediate = 4864,
                                  .max_positions = 131072, .rope_theta = 1e6, .rms_eps = 1e-6, .tied = 1,
                                  .qkv_bias = 1};

int model_source_preset_check(const config *cfg, tdm_err *e) {
    if (cfg->preset != CONFIG_PRESET_SFT_QWEN2_0_5B || model_source_hf_dir(cfg)) return 0;
    int rows = cfg->train.micro_batch ? cfg->train.micro_batch : cfg->train.batch;
    double params = (double)hf_arch_params(&QWEN2_05B);
    double bytes = 9 * 4.0 * params + qwen2_tape_bytes(&QWEN2_05B, rows, cfg->train.seq);
    return err_set(e, ERR_USAGE,
                   "preset sft-qwen2-0.5b fine-tunes a pretrained Qwen2-0.5B: set model.init: hf:DIR, DIR a downloaded "
                   "Qwen2-0.5B folder (config.json, model.safetensors, tokenizer.json; docs/models.md), and a "
                   "dataset prepared with its tokenizer.json. On the CPU it needs about %.0f GiB of memory "
                   "(%.0fM parameters x 9 buffers, and the activations of %d x %d tokens per pass: "
                   "train.micro_batch)",
                   bytes / 1073741824.0, params / 1e6, rows, cfg->train.seq);
}

