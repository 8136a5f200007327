/* model_source.c — model.init: GPT-2 from the config or a Hugging Face folder; see
 * model_source.h. */
#include "runner/model_source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <unistd.h>

#include "ledger/keys.h"
#include "ledger/read.h"
#include "ledger/records.h"
#include "config/run_config.h"
#include "data/tokenizer.h"
#include "model/gpt2_import.h"
#include "model/hf_config.h"
#include "model/qwen2.h"
#include "storage/sha256.h"
#include "util/buf.h"
#include "util/fileio.h"

#define HF_SCHEME "hf:"

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
        int err = errno;
        free(b.p);
        if (err != ENOENT)
            return err_set(e, ERR_USAGE, "model.init: %s: cannot read: %s", path, fileio_strerror(err));
        fprintf(stderr, "tandem: %s has no tokenizer.json: whether the dataset %s (tokenizer %s) was made with "
                "the model's tokenizer cannot be checked\n", dir, ds->path, ds->tokenizer[0] ? ds->tokenizer : "?");
        return 0;
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

/* A byte-level dataset (token b is byte b: `tandem prep` without --tokenizer) with the
 * folder's tokenizer, for either family: its tokenizer.json must encode each byte b as the
 * one token b (what `tandem export` writes for such a run); a BPE tokenizer (GPT-2's and
 * Qwen2's: byte 'a' is token 64) would read the bytes as other text. No tokenizer.json:
 * refused when vocab.json or tokenizer.model (SentencePiece) says the folder has another
 * tokenizer, else said that it cannot be checked. */
static int byte_tokens_match(const dataset *ds, const char *dir, tdm_err *e) {
    if (!dataset_byte_level(ds)) return 0;
    char path[CONFIG_STR_MAX + 32];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (access(path, F_OK) != 0) {
        static const char *const other[] = {"vocab.json", "tokenizer.model"};
        for (int k = 0; k < 2; k++) {
            char vocab[CONFIG_STR_MAX + 32];
            snprintf(vocab, sizeof vocab, "%s/%s", dir, other[k]);
            if (access(vocab, F_OK) == 0)
                return err_set(e, ERR_USAGE, "data.dataset: %s is byte-level (token b is byte b), but the model of "
                               "%s has a %s tokenizer (%s): it was trained on that tokenizer's ids; prep the corpus "
                               "with the model's tokenizer (tandem prep --tokenizer %s/tokenizer.json, which this folder "
                               "lacks)", ds->path, dir, k ? "SentencePiece" : "BPE", vocab, dir);
        }
        fprintf(stderr, "tandem: %s has no tokenizer.json: whether the byte-level dataset %s suits the model "
                "cannot be checked\n", dir, ds->path);
        return 0;
    }
    tokenizer *tk = NULL;
    tdm_err te = {0};
    if (tokenizer_load(path, NULL, &tk, &te) != 0)
        return err_set(e, ERR_USAGE, "model.init: %s (the model's tokenizer, checked against the byte-level "
                       "dataset %s): %s", path, ds->path, te.msg);
    int rc = 0;
    for (int b = 0; !rc && b < 256; b++) {
        char c = (char)b;
        tok_ids ids = {0};
        rc = tokenizer_encode(tk, &c, 1, &ids, &te) ? err_set(e, ERR_USAGE, "model.init: %s: %s", path, te.msg) : 0;
        if (!rc && (ids.n != 1 || ids.v[0] != (uint32_t)b))
            rc = err_set(e, ERR_USAGE, "data.dataset: %s is byte-level (token b is byte b), but %s encodes byte "
                         "0x%02x as %s %u: the model was trained on another tokenizer's ids (a BPE such as "
                         "GPT-2's or Qwen2's); prep the corpus with the model's tokenizer (tandem prep --tokenizer %s)",
                         ds->path, path, b, ids.n == 1 ? "token" : "tokens starting with",
                         ids.n ? ids.v[0] : 0, path);
        tok_ids_free(&ids);
    }
    tokenizer_free(tk);
    return rc;
}

/* The folder's vocab_size against model.vocab (0 or the same) and the dataset's token ids
 * (all below it); `what` names the folder's model in messages. */
static int vocab_fits(const config *cfg, const dataset *ds, const char *dir, const char *what, int vocab, tdm_err *e) {
    if (cfg->model.vocab && cfg->model.vocab != vocab)
        return err_set(e, ERR_USAGE, "model.vocab = %d, but the %s of %s/config.json has vocab_size %d: leave "
                       "model.vocab at 0 (the folder decides)", cfg->model.vocab, what, dir, vocab);
    if (ds->vocab > vocab)
        return err_set(e, ERR_USAGE, "data.dataset: %s has a vocabulary of %d (token ids up to %d), more than the "
                       "vocab_size %d of %s/config.json: the corpus was tokenised for another model; prep it "
                       "with the model's tokenizer (tandem prep --tokenizer %s/tokenizer.json)",
                       ds->path, ds->vocab, ds->vocab - 1, vocab, dir, dir);
    return 0;
}

/* model_source_config for a GPT-2 folder: the folder's shape, model.ctx positions. */
static int gpt2_config(const config *cfg, const dataset *ds, const char *dir, model_config *mc, tdm_err *e) {
    gpt2_hf g;
    int rc = gpt2_hf_read(dir, &g, e);
    if (rc) return err_prefix(e, "model.init: ");
    if ((rc = vocab_fits(cfg, ds, dir, "GPT-2", g.vocab, e))) return rc;
    if ((rc = byte_tokens_match(ds, dir, e))) return rc;
    if ((rc = same_tokenizer(ds, dir, e))) return rc;
    if (cfg->model.layers != g.layers || cfg->model.channels != g.channels || cfg->model.heads != g.heads)
        fprintf(stderr, "tandem: model.init = hf:%s: the model is the folder's GPT-2 (%d layers, n_embd %d, %d "
                "heads); model.layers = %d, model.channels = %d, model.heads = %d are not used\n", dir, g.layers,
                g.channels, g.heads, cfg->model.layers, cfg->model.channels, cfg->model.heads);
    rc = gpt2_hf_model_config(&g, dir, cfg->model.ctx, mc, e);
    model_layout lay; /* the weights' names, shapes and dtypes, before anything is made */
    if (!rc && !(rc = model_layout_init(&lay, mc, e))) {
        rc = gpt2_load(dir, &lay, NULL, e);
        model_layout_free(&lay);
    }
    return rc ? err_prefix(e, "model.init: ") : 0;
}

int model_source_config(const config *cfg, const dataset *ds, model_config *mc, tdm_err *e) {
    const char *dir = model_source_hf_dir(cfg);
    memset(mc, 0, sizeof *mc);
    if (!dir) {
        *mc = (model_config){.ctx = cfg->model.ctx, .layers = cfg->model.layers, .heads = cfg->model.heads,
                             .channels = cfg->model.channels};
        return dataset_model_vocab(ds, cfg->model.vocab, &mc->vocab, e);
    }
    if (gpt2_hf_is(dir)) return gpt2_config(cfg, ds, dir, mc, e);
    hf_arch a;
    int rc = hf_arch_read(dir, &a, e);
    if (rc) return err_prefix(e, "model.init: ");
    if ((rc = vocab_fits(cfg, ds, dir, "model", a.vocab, e))) return rc;
    if ((rc = byte_tokens_match(ds, dir, e))) return rc;
    if ((rc = same_tokenizer(ds, dir, e))) return rc;
    if (cfg->model.layers != a.layers || cfg->model.channels != a.channels || cfg->model.heads != a.heads)
        fprintf(stderr, "tandem: model.init = hf:%s: the model is the folder's (%d layer%s, hidden %d, %d head%s); "
                "model.layers = %d, model.channels = %d, model.heads = %d are not used\n", dir, a.layers,
                a.layers == 1 ? "" : "s", a.channels, a.heads, a.heads == 1 ? "" : "s", cfg->model.layers,
                cfg->model.channels, cfg->model.heads);
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
    if (lay->cfg.arch == MODEL_ARCH_GPT2) { /* a GPT2LMHeadModel folder (model_source_config) */
        int rc = gpt2_load(dir, lay, host, e);
        return rc ? err_prefix(e, "model.init: ") : 0;
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

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Adds file `path` to c in pieces (no whole copy of a many-GB file); 0 or errno. */
static int hash_file(sha256_ctx *c, const char *path) {
    /* a FIFO (config.json, any *.safetensors, named or not) blocked here for ever */
    int fd = fileio_open_regular(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        int err = errno;
        if (fd >= 0) close(fd);
        return err;
    }
    static char piece[1 << 20];
    size_t k;
    while ((k = fread(piece, 1, sizeof piece, f)) > 0) sha256_update(c, piece, k);
    int err = ferror(f) ? EIO : 0;
    fclose(f);
    return err;
}

/* hash_file's failure err on path, as the message says it. */
static int hash_fail(const char *path, int err, tdm_err *e) {
    if (err == EINVAL)
        return err_set(e, ERR_USAGE, "model.init: %s is not a regular file (a FIFO, device or folder): a model "
                       "folder holds files; remove or replace it", path);
    err_sys(e, ERR_USAGE, err, "model.init: %s: cannot read", path);
    if (err == ENOENT) /* the folder moved, or a relative one read from elsewhere */
        err_append(e, path[0] == '/' ? " (the run's model folder is gone: restore it where the run found it)"
                                     : " (the run's model.init is relative to the directory the run started in: "
                                       "run this from there, or restore the folder)");
    return e->code;
}

/* The digests model.mp pins: config.json, and the weights' files in name order (each
 * name, a NUL, its bytes). ERR_USAGE naming the file that cannot be read. */
static int folder_digests(const char *dir, sha256_digest *config_sha, sha256_digest *weights_sha, tdm_err *e) {
    char path[CONFIG_STR_MAX + 300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    sha256_ctx *c = sha256_begin();
    int err = hash_file(c, path);
    sha256_end(c, config_sha);
    if (err) return hash_fail(path, err, e);
    DIR *d = opendir(dir);
    if (!d) return err_sys(e, ERR_USAGE, errno, "model.init: %s: cannot list", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        int weights = (len > 12 && !strcmp(de->d_name + len - 12, ".safetensors")) ||
                      !strcmp(de->d_name, "model.safetensors.index.json");
        if (!weights) continue;
        if (n == cap) {
            char **g = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *names);
            if (!g) rc = err_set(e, ERR_INTERNAL, "out of memory");
            else names = g;
        }
        if (!rc && !(names[n++] = strdup(de->d_name))) rc = err_set(e, ERR_INTERNAL, "out of memory");
    }
    closedir(d);
    if (!rc) qsort(names, n, sizeof *names, cmp_names);
    c = sha256_begin();
    for (size_t i = 0; !rc && i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        sha256_update(c, names[i], strlen(names[i]) + 1);
        if ((err = hash_file(c, path))) rc = hash_fail(path, err, e);
    }
    sha256_end(c, weights_sha);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* Writes model.mp (mode STORE_CREATE or STORE_OVERWRITE) once ld's lease is checked. */
static int put_model(store *st, const rec_model *m, int mode, ledger *ld, tdm_err *e) {
    size_t len;
    void *enc = rec_model_encode(m, &len);
    int rc = !enc ? err_set(e, ERR_INTERNAL, "out of memory") : ld ? ledger_check_lease(ld, e) : 0;
    if (!rc) rc = store_put(st, LEDGER_MODEL, enc, len, mode, e);
    free(enc);
    return rc;
}

int model_source_fingerprint(store *st, const config *cfg, pin_mode mode, ledger *ld, tdm_err *e) {
    int write = mode != PIN_READ, dry = mode == PIN_CHECK;
    const char *dir = model_source_hf_dir(cfg);
    if (!dir) return 0;
    rec_model now;
    memset(&now, 0, sizeof now);
    snprintf(now.init, sizeof now.init, "%s", cfg->model.init);
    /* a start judges the folder twice, before the lease (PIN_CHECK) and under it
     * (PIN_WRITE): hashed once (a 7B model's weights are ~14 GB, seconds per pass). Only
     * PIN_WRITE reuses the hash: each start (compare runs several in one process, hours
     * apart) hashes the folder as it is then */
    static struct {
        char init[sizeof now.init];
        sha256_digest config_sha, weights_sha;
        int have;
    } memo;
    int rc = 0;
    if (mode == PIN_WRITE && memo.have && !strcmp(memo.init, now.init)) {
        now.config_sha = memo.config_sha;
        now.weights_sha = memo.weights_sha;
    } else if (!(rc = folder_digests(dir, &now.config_sha, &now.weights_sha, e))) {
        snprintf(memo.init, sizeof memo.init, "%s", now.init);
        memo.config_sha = now.config_sha;
        memo.weights_sha = now.weights_sha;
        memo.have = 1;
    }
    if (rc) return rc;
    for (int attempt = 0; attempt < 2; attempt++) {
        rec_model was;
        tdm_err de;
        rc = ledger_read(st, REC_KIND_MODEL, LEDGER_MODEL, NULL, &was, &de);
        if (rc == 0) {
            int same_config = sha256_equal(&was.config_sha, &now.config_sha);
            if (same_config && sha256_equal(&was.weights_sha, &now.weights_sha)) return 0;
            /* nothing computed from the pinned folder yet (a first start that failed before
             * its first commit, e.g. on a damaged weight, the folder then fixed): the pin
             * follows the folder */
            if (write && run_config_nothing_computed(st)) {
                if (dry) return 0; /* written under the lease */
                fprintf(stderr, "tandem: %s/%s pinned a model.init folder nothing was computed from (no state, "
                        "no alpha record); pinning it as it is now\n", store_url(st), LEDGER_MODEL);
                return put_model(st, &now, STORE_OVERWRITE, ld, e);
            }
            char want[SHA256_HEX_LEN + 1];
            sha256_hex(same_config ? &was.weights_sha : &was.config_sha, want);
            return err_set(e, ERR_USAGE,
                           "model.init: %s is not the model this run started from (%s): its %s changed "
                           "since (%s/%s pins sha256 %.12s... of them). A resume or a replay would compute "
                           "with another model: restore the folder, or point model.init at a copy of the "
                           "original",
                           dir, was.init, same_config ? "weights (*.safetensors)" : "config.json", store_url(st),
                           LEDGER_MODEL, want);
        }
        if (rc == STORE_CORRUPT) { /* damaged: said, and replaced by the folder's digests when writing */
            if (dry) return 0;
            fprintf(stderr, "tandem: %s/%s could not be read (%s)%s\n", store_url(st), LEDGER_MODEL, de.msg,
                    write ? "; written again from the folder" : "");
            return write ? put_model(st, &now, STORE_OVERWRITE, ld, e) : 0;
        }
        if (rc != STORE_NOT_FOUND) {
            if (e) *e = de;
            return rc;
        }
        if (!write || dry) return 0; /* a run from before model.mp, or not started */
        rc = put_model(st, &now, STORE_CREATE, ld, e);
        if (rc != STORE_EXISTS) return rc; /* written, or an error; else another writer's: compare */
    }
    /* created by another writer and gone again before it could be read (twice): never a
     * store outcome passed up as an exit status */
    return err_set(e, ERR_STORE, "%s/%s: another writer wrote and removed it while this one pinned the model.init "
                   "folder; only one tandem may run on a store: run again", store_url(st), LEDGER_MODEL);
}

