/* export.c — a run's u as a Hugging Face folder; see export.h. */
#include "runner/export.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "ledger/audit.h"
#include "ledger/ckpt.h"
#include "model/gpt2_export.h"
#include "model/model.h"
#include "model/qwen2.h"
#include "runner/config.h"
#include "runner/model_source.h"
#include "runner/pin.h"
#include "util/buf.h"
#include "util/fileio.h"

/* The tokenizer and generation files of an HF folder, copied when the source has them,
 * so that the export loads with AutoTokenizer as the source did. */
static const char *const SIDE_FILES[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                         "vocab.json", "merges.txt", "generation_config.json", NULL};

/* Copies `name` from src to dst when src has it (*copied += 1). ERR_USAGE naming the file. */
static int copy_side_file(const char *src, const char *dst, const char *name, int *copied, tdm_err *e) {
    char from[CONFIG_STR_MAX + 64], to[CONFIG_STR_MAX + 64];
    snprintf(from, sizeof from, "%s/%s", src, name);
    snprintf(to, sizeof to, "%s/%s", dst, name);
    buf_t b = {0};
    if (fileio_read_all(from, &b, (size_t)1 << 30) != 0) {
        int err = errno;
        free(b.p);
        return err == ENOENT ? 0 : err_sys(e, ERR_USAGE, err, "%s: cannot read", from);
    }
    FILE *f = fopen(to, "wb");
    int ok = f && fwrite(b.p, 1, b.n, f) == b.n;
    if (f && fclose(f) != 0) ok = 0;
    free(b.p);
    if (!ok) return err_sys(e, ERR_USAGE, errno, "%s: cannot write", to);
    (*copied)++;
    return 0;
}

int export_store(store *st, const uint64_t *seq, const char *dir, st_dtype dtype, export_result *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    config cfg;
    dataset ds;
    memset(&ds, 0, sizeof ds);
    model_layout lay;
    memset(&lay, 0, sizeof lay);
    ckpt *ck = NULL;
    rec_state rec;
    memset(&rec, 0, sizeof rec);
    int found = 0;
    int rc = pin_read(st, &cfg, out->run_id, sizeof out->run_id, e);
    if (!rc) rc = model_source_pin(st, &cfg, 0, e); /* the model.init folder is still the run's */
    const char *src = rc ? NULL : model_source_hf_dir(&cfg);
    if (!rc) {
        rc = dataset_load(&ds, cfg.data.dataset, e);
        if (rc == ERR_USAGE && src) { /* the folder alone says an HF model's shape */
            rc = 0;
            memset(&ds, 0, sizeof ds);
            ds.vocab = 2;
        } else if (rc) {
            err_prefix(e, "data.dataset (the GPT-2 run's vocabulary): ");
        }
    }
    model_config mc;
    if (!rc) rc = model_source_config(&cfg, &ds, &mc, e);
    if (!rc) rc = model_layout_init(&lay, &mc, e);
    if (!rc && !(ck = ckpt_open(st, &lay, 64u << 20, e))) rc = e->code;
    /* the run's config generation: states made after an allowed config change carry it */
    uint64_t gen = 0, change_seq = 0;
    if (!rc) rc = audit_generation(st, &gen, &change_seq, e);
    if (!rc) ckpt_set_generation(ck, gen, change_seq);
    if (!rc && seq) rc = ckpt_load_seq(ck, *seq, &rec, e), found = !rc;
    else if (!rc) rc = ckpt_load(ck, &rec, &found, e);
    if (!rc && !found) rc = err_set(e, ERR_USAGE, "%s holds no committed state to export", store_url(st));
    const float *u = rc ? NULL : ckpt_host(ck, 0);
    char rs[PATH_MAX], rd[PATH_MAX];
    if (!rc && src && realpath(src, rs) && realpath(dir, rd) && !strcmp(rs, rd))
        rc = err_set(e, ERR_USAGE, "--out %s is the run's model.init folder: exporting there would replace the "
                     "pretrained weights the run starts from; export into a new folder", dir);
    char index[CONFIG_STR_MAX + 64];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    if (!rc && access(index, F_OK) == 0) /* loaders read the shards it names, not our file */
        rc = err_set(e, ERR_USAGE, "%s holds model.safetensors.index.json (a sharded model): the export's "
                     "model.safetensors would be ignored beside it; export into a new folder", dir);
    if (!rc && mc.arch == MODEL_ARCH_HF) {
        qwen2_model m = {.a = mc.hf}; /* qwen2_save reads the architecture only */
        rc = qwen2_save(&m, u, dir, dtype, e);
        for (int i = 0; !rc && SIDE_FILES[i]; i++) rc = copy_side_file(src, dir, SIDE_FILES[i], &out->copied, e);
        snprintf(out->arch, sizeof out->arch, "%s", mc.hf.model_type);
    } else if (!rc) {
        rc = gpt2_save(&lay, u, dir, dtype, e);
        snprintf(out->arch, sizeof out->arch, "gpt2");
    }
    if (!rc) {
        out->seq = rec.seq;
        out->params = lay.numel;
        snprintf(out->step, sizeof out->step, "%s", rec.step);
    }
    rec_state_free(&rec);
    if (ck) ckpt_close(ck);
    model_layout_free(&lay);
    dataset_free(&ds);
    return rc;
}
