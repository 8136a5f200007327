/* export.c — a run's u as a Hugging Face folder; see export.h. */
#include "runner/export.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/tok_export.h"
#include "model/gpt2_export.h"
#include "model/model.h"
#include "model/qwen2.h"
#include "config/config.h"
#include "runner/model_source.h"
#include "runner/run_state.h"
#include "storage/url.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "util/testhook.h"
#include "data/shard.h"

/* The tokenizer and generation files of an HF folder, copied when the source has them,
 * so that the export loads with AutoTokenizer as the source did. */
static const char *const SIDE_FILES[] = {"tokenizer.json",         "tokenizer_config.json", "special_tokens_map.json",
                                         "vocab.json",             "merges.txt",            "generation_config.json",
                                         "chat_template.jinja",    "added_tokens.json",     "tokenizer.model",
                                         NULL};

/* Whether the first len bytes of name are a file an export writes (its temporaries are
 * removed when their writer is gone; no other file of the folder is touched). */
static int export_file(const char *name, size_t len) {
    static const char *const own[] = {"model.safetensors", "config.json"};
    for (size_t i = 0; i < 2; i++)
        if (strlen(own[i]) == len && !strncmp(name, own[i], len)) return 1;
    for (size_t i = 0; SIDE_FILES[i]; i++)
        if (strlen(SIDE_FILES[i]) == len && !strncmp(name, SIDE_FILES[i], len)) return 1;
    return 0;
}

/* The most a side file may hold: tandem's tokenizer loader reads no larger (a 5 GB sparse
 * vocab.json was read whole, 1 GiB at a time, before "File too large": hunt). */
#define EXPORT_SIDE_MAX ((size_t)64 << 20)

/* Copies `name` from src to dst when src has it (*copied += 1). ERR_USAGE naming the file. */
static int copy_side_file(const char *src, const char *dst, const char *name, int *copied, tdm_err *e) {
    char from[CONFIG_STR_MAX + 64], to[CONFIG_STR_MAX + 64];
    snprintf(from, sizeof from, "%s/%s", src, name);
    snprintf(to, sizeof to, "%s/%s", dst, name);
    buf_t b = {0};
    if (fileio_read_all(from, &b, EXPORT_SIDE_MAX) != 0) {
        int err = errno;
        free(b.p);
        return err == ENOENT ? 0 : err_set(e, ERR_USAGE, "%s: cannot read: %s", from, fileio_strerror(err));
    }
    /* replaced whole: a link at `to` is replaced, not written through */
    int rc = shard_atomic_write(to, b.p ? b.p : "", b.n, NULL, 0, e);
    free(b.p);
    if (rc) return rc;
    (*copied)++;
    return 0;
}

/* Every side file src has can be read, before anything is written: found unreadable
 * after the weights (a FIFO, no permission), the export left a half-written folder. */
static int side_files_readable(const char *src, tdm_err *e) {
    for (int i = 0; SIDE_FILES[i]; i++) {
        char from[CONFIG_STR_MAX + 64];
        snprintf(from, sizeof from, "%s/%s", src, SIDE_FILES[i]);
        int fd = fileio_open_regular(from);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size > EXPORT_SIDE_MAX) {
            close(fd);
            return err_set(e, ERR_USAGE, "%s: %llu MiB, more than the %zu MiB a tokenizer or generation file may hold "
                           "(nothing was exported): replace it with the model's own file",
                           from, (unsigned long long)(sb.st_size >> 20), EXPORT_SIDE_MAX >> 20);
        }
        if (fd >= 0) close(fd);
        else if (errno != ENOENT)
            return err_set(e, ERR_USAGE, "%s: cannot read: %s (nothing was exported)", from, fileio_strerror(errno));
    }
    return 0;
}

int export_store(store *st, const uint64_t *seq, const char *dir, st_dtype dtype, export_result *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    /* on the heap: its config alone is ~95 KB, a crash under a small stack (ulimit -s 128) */
    run_state *rs = calloc(1, sizeof *rs);
    if (!rs) return err_set(e, ERR_INTERNAL, "out of memory");
    int rc = run_state_config(st, rs, e);
    snprintf(out->run_id, sizeof out->run_id, "%s", rs->run_id);
    const char *src = rc ? NULL : model_source_hf_dir(&rs->cfg);
    if (!rc) rc = run_state_load(st, seq, 1, "export", rs, e);
    const float *u = rc ? NULL : ckpt_host(rs->ck, 0);
    char rsrc[PATH_MAX], rdir[PATH_MAX];
    if (!rc && src && realpath(src, rsrc) && realpath(dir, rdir) && !strcmp(rsrc, rdir))
        rc = err_set(e, ERR_USAGE, "--out %s is the run's model.init folder: exporting there would replace the "
                     "pretrained weights the run starts from; export into a new folder", dir);
    /* a folder inside a file store: its files would be objects nobody wrote (verify: orphan
     * blobs under blobs/, unknown keys elsewhere), and gc could delete them */
    store_url_parts sp;
    tdm_err ue;
    char rstore[PATH_MAX];
    if (!rc && store_url_parse(store_url(st), &sp, &ue) == 0 && sp.kind == STORE_URL_FILE &&
        realpath(sp.path, rstore) && fileio_existing_ancestor(dir, rdir)) {
        size_t n = strlen(rstore);
        if (!strncmp(rdir, rstore, n) && (rdir[n] == '\0' || rdir[n] == '/' || (n == 1 && rstore[0] == '/')))
            rc = err_set(e, ERR_USAGE, "--out %s is inside the store %s: the export's files would sit among its "
                         "objects (verify would name them, gc could delete them); export into a folder outside it",
                         dir, store_url(st));
    }
    char index[CONFIG_STR_MAX + 64];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    if (!rc && access(index, F_OK) == 0) /* loaders read the shards it names, not our file */
        rc = err_set(e, ERR_USAGE, "%s holds model.safetensors.index.json (a sharded model): the export's "
                     "model.safetensors would be ignored beside it; export into a new folder", dir);
    if (!rc && src) rc = side_files_readable(src, e);
    if (!rc) fileio_sweep_dead_temporaries(dir, export_file, 60.0); /* what an export killed midway left */
    /* The weights are the mark of a whole folder, as dataset.yaml is of a corpus: an
     * earlier export's go first, then config.json and the tokenizer's files, then the new
     * weights last. Cut off anywhere (a kill, a full disk), the folder has no
     * model.safetensors and loads as nothing, never as new weights beside an old config or
     * tokenizer (before: the weights came first and a kill left such a mix). */
    char weights[CONFIG_STR_MAX + 64];
    snprintf(weights, sizeof weights, "%s/model.safetensors", dir);
    if (!rc && mkdir(dir, 0755) != 0 && errno != EEXIST) rc = err_sys(e, ERR_USAGE, errno, "%s: cannot create", dir);
    struct stat ds;
    if (!rc && (stat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode)))
        rc = err_set(e, ERR_USAGE, "--out %s is not a folder (a file is there): export writes a folder of files "
                     "(config.json, model.safetensors, the tokenizer's); name a new or existing folder", dir);
    if (!rc && unlink(weights) != 0 && errno != ENOENT)
        rc = err_sys(e, ERR_USAGE, errno, "%s: cannot remove the earlier export's weights", weights);
    /* and its tokenizer and generation files: this export writes or copies those it has,
     * and one it has not would stay beside the new weights (another run's tokenizer, an
     * eos id not of this vocabulary) and load with them */
    char gone[512] = "";
    for (int i = 0; !rc && SIDE_FILES[i]; i++) {
        char path[CONFIG_STR_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", dir, SIDE_FILES[i]);
        if (unlink(path) == 0) {
            size_t n = strlen(gone);
            snprintf(gone + n, sizeof gone - n, "%s%s", n ? ", " : "", SIDE_FILES[i]);
        } else if (errno != ENOENT) {
            rc = err_sys(e, ERR_USAGE, errno, "%s: cannot remove the earlier export's file", path);
        }
    }
    if (gone[0]) snprintf(out->removed, sizeof out->removed, "%s", gone);
    if (!rc && rs->mc.arch == MODEL_ARCH_HF) {
        for (int i = 0; !rc && SIDE_FILES[i]; i++) rc = copy_side_file(src, dir, SIDE_FILES[i], &out->copied, e);
        out->tok_from = out->copied ? EXPORT_TOK_FOLDER : EXPORT_TOK_NONE;
        qwen2_model m = {.a = rs->mc.hf}; /* qwen2_save reads the architecture only */
        if (!rc) testhook_kill_at("export"); /* cut off before the weights, for the tests */
        if (!rc) rc = qwen2_save(&m, u, dir, dtype, src, e);
        snprintf(out->arch, sizeof out->arch, "%s", rs->mc.hf.model_type);
    } else if (!rc) {
        /* a byte-level dataset's tokenizer as HF files; a run from a GPT-2 folder (of
         * GPT-2's own tokenizer, say) takes that folder's files; a dataset of another
         * tokenizer records which, not where: its files are the user's to copy */
        int eos = -1;
        if (dataset_byte_level(&rs->ds)) {
            if (!(rc = tok_export_byte_level(dir, rs->cfg.model.ctx, e))) out->copied = 2, out->tok_from = EXPORT_TOK_BYTES;
            eos = '\n'; /* tok_export_byte_level's eos_token */
        } else if (src) {
            for (int i = 0; !rc && SIDE_FILES[i]; i++) rc = copy_side_file(src, dir, SIDE_FILES[i], &out->copied, e);
            if (out->copied) out->tok_from = EXPORT_TOK_FOLDER;
        }
        snprintf(out->tokenizer, sizeof out->tokenizer, "%s", rs->ds.tokenizer);
        /* the dataset's own end of text, for a run from a folder too (its ids were left out:
         * an export of an export read "bos_token_id": null, a hunt of round trips) */
        if (eos < 0 && !dataset_byte_level(&rs->ds) && rs->ds.eot >= 0) eos = rs->ds.eot;
        if (!rc) testhook_kill_at("export"); /* cut off before the weights, for the tests */
        if (!rc) rc = gpt2_save(&rs->lay, u, dir, dtype, eos, e);
        snprintf(out->arch, sizeof out->arch, "gpt2");
    }
    if (!rc) {
        out->seq = rs->rec.seq;
        out->params = rs->lay.numel;
        snprintf(out->step, sizeof out->step, "%s", rs->rec.step);
    }
    run_state_close(rs);
    free(rs);
    return rc;
}
