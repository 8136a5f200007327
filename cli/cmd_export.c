/* cmd_export.c — `tandem export STORE --out DIR [--state SEQ] [--dtype f32|bf16]
 * [--json]`: a run's u (its newest verified state, or a kept one) as a Hugging Face
 * model folder (runner/export.h) that transformers and `model.init: hf:DIR` load. */
#include <stdio.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "util/args.h"
#include "runner/export.h"
#include "util/json.h"
#include "util/outfile.h"
#include "util/term.h"

static const cli_opt OPTS[] = {
    {"--out", CLI_STR, "DIR", "the folder to write (created if missing; its config.json and model.safetensors "
                              "are replaced)", NULL, 0, 0, NULL, NULL},
    {"--state", CLI_STR, "SEQ", "export the kept state states/SEQ.mp instead of the newest", NULL, 0, 0, NULL, NULL},
    {"--dtype", CLI_STR, NULL, "how the weights are stored (default f32: exactly u; bf16 halves the size)",
     "f32|bf16", 0, 0, NULL, NULL},
    {"--json", CLI_SWITCH, NULL, "the result as one JSON object on stdout", NULL, 0, 0, NULL, NULL},
    CLI_FORMAT_TABLE_JSON,
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"export", "STORE --out DIR", 1, 1, "a STORE is required",
                              "Writes a run's u (the newest verified state, or --state) as a Hugging Face model\n"
                              "folder: a Llama / Qwen2 run (model.init: hf:DIR) as that family, with the source\n"
                              "folder's tokenizer files; a GPT-2 run as GPT2LMHeadModel. transformers' "
                              "from_pretrained\nand model.init: hf:DIR read it.",
                              OPTS, NULL};

static int run_export(const cli_args *a) {
    const char *url = a->arg[0], *out = cli_str(a, "--out", NULL), *dt = cli_str(a, "--dtype", "f32");
    uint64_t seq = 0;
    int have_state = cli_given(a, "--state") > 0, json = cli_json(a);
    tdm_err e = {0};
    int rc = 0;
    if (!out) rc = err_set(&e, ERR_USAGE, "--out DIR is required: the folder to write");
    else if (!*out) rc = err_set(&e, ERR_USAGE, "--out: an empty path; name the folder to write");
    /* "s3://b/model" was the local folder ./s3:/b/model (export_store makes it): refused */
    else rc = outfile_check_local("--out", out, &e);
    const char *sv = cli_str(a, "--state", NULL);
    if (!rc && sv && args_parse_u64(sv, &seq))
        rc = err_set(&e, ERR_USAGE, "--state: '%s' is not a non-negative integer", sv);
    if (rc) {
        fprintf(stderr, "tandem export: %s\n", e.msg);
        cli_usage(a->spec, stderr);
        if (json) json_document(stdout, rc, e.msg, NULL);
        return rc;
    }
    st_dtype dtype = strcmp(dt, "bf16") ? ST_F32 : ST_BF16;
    store *st = store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!st) rc = e.code;
    export_result r;
    if (!rc) rc = export_store(st, have_state ? &seq : NULL, out, dtype, &r, &e);
    if (!rc && json) {
        printf("{\"run\":");
        json_str(stdout, r.run_id);
        printf(",\"seq\":%llu,\"step\":", (unsigned long long)r.seq);
        json_str(stdout, r.step);
        printf(",\"arch\":");
        json_str(stdout, r.arch);
        printf(",\"params\":%zu,\"dtype\":", r.params);
        json_str(stdout, dtype == ST_BF16 ? "bf16" : "f32");
        printf(",\"out\":");
        json_str(stdout, out);
        printf(",\"tokenizer_files\":%d}\n", r.copied);
    } else if (!rc) {
        printf("%s: u of %s (state %llu, step %s): %s, %zu parameters as %s%s\n", out, r.run_id,
               (unsigned long long)r.seq, r.step, r.arch, r.params, dtype == ST_BF16 ? "BF16" : "F32",
               r.tok_from == EXPORT_TOK_FOLDER  ? ", with the source folder's tokenizer files"
               : r.tok_from == EXPORT_TOK_BYTES ? ", with the byte-level tokenizer of its dataset (tokenizer.json)"
                                                : "");
    }
    if (!rc && r.removed[0])
        fprintf(stderr, "tandem export: removed the earlier export's %s from %s first (this export writes those "
                "it has anew; one it has not would have stayed beside the new weights)\n", r.removed, out);
    if (!rc && strcmp(r.arch, "gpt2") && !r.copied)
        fprintf(stderr, "tandem export: the run's model.init folder has no tokenizer files: copy its tokenizer "
                "into %s before loading it with AutoTokenizer\n", out);
    if (!rc && !strcmp(r.arch, "gpt2") && !r.copied) {
        /* what the dataset records (a synthetic corpus of another vocabulary records none:
         * "made with a tokenizer other than bytes" claimed one, a hunt of round trips) */
        if (r.tokenizer[0]) {
            fprintf(stderr, "tandem export: the dataset's tokens are of the tokenizer '");
            term_text(stderr, r.tokenizer);
            fprintf(stderr, "' (its dataset.yaml), not bytes: copy that tokenizer's files into %s before loading "
                    "it with AutoTokenizer\n", out);
        } else {
            fprintf(stderr, "tandem export: the dataset records no tokenizer (a synthetic corpus, or ids of its own), "
                    "so no tokenizer files were written: the model loads with AutoModelForCausalLM alone\n");
        }
    }
    if (st) store_close(st);
    if (rc) fprintf(stderr, "tandem export: %s\n", e.msg);
    if (rc && json) json_document(stdout, rc, e.msg, NULL); /* docs/json.md: the error object */
    return rc;
}

int cmd_export(int argc, char **argv) { return cli_run(&SPEC, run_export, argc, argv); }
