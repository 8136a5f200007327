/* cmd_inspect.c — `tandem inspect DIR`: what a Hugging Face model folder holds, as tandem
 * reads it (model/hf_config.h, model/gpt2_import.h for a GPT-2, model/safetensors.h): the
 * architecture from config.json,
 * its parameter count, the weights' files, dtypes and bytes, and whether every tensor the
 * architecture needs is there with its shape — before a run is pointed at the folder.
 * Exit 0 when the folder is loadable, 2 naming the file and the problem when not. */
#include <stdio.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "model/gpt2_import.h"
#include "model/hf_config.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "util/json.h"

static const cli_opt OPTS[] = {
    {"--json", CLI_SWITCH, NULL, "one JSON object on stdout", NULL, 0, 0, NULL, NULL},
    CLI_FORMAT_TABLE_JSON,
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"inspect", "DIR", 1, 1, "a model folder DIR is required (config.json, model.safetensors)",
                              "A Hugging Face model folder of the Qwen2 / Llama family or a GPT-2 as tandem reads it:\n"
                              "config.json's architecture, the parameter count, the weights' dtypes and\n"
                              "bytes, and a check that every tensor is present with its shape.",
                              OPTS, NULL};

/* The weights' dtypes of s: per dtype, "F32":{"tensors":N,"bytes":B} (json) or " N F32
 * tensors (G GB), ..." on stdout ("1 F32 tensor"). */
static void print_dtypes(const st_set *s, int json) {
    uint64_t bytes[ST_NDTYPES] = {0}, count[ST_NDTYPES] = {0};
    for (size_t i = 0; i < safetensors_count(s); i++) {
        const st_tensor *t = safetensors_at(s, i);
        bytes[t->dtype] += t->nbytes;
        count[t->dtype]++;
    }
    int first = 1;
    for (int d = 0; d < ST_NDTYPES; d++) {
        if (!count[d]) continue;
        if (json)
            printf("%s\"%s\":{\"tensors\":%llu,\"bytes\":%llu}", first ? "" : ",", safetensors_dtype_name((st_dtype)d),
                   (unsigned long long)count[d], (unsigned long long)bytes[d]);
        else
            printf("%s%llu %s tensor%s (%.2f GB)", first ? " " : ", ", (unsigned long long)count[d],
                   safetensors_dtype_name((st_dtype)d), count[d] == 1 ? "" : "s", bytes[d] / 1e9);
        first = 0;
    }
}

/* Every weight finite, as a load checks them (a NaN was found only by the run): read
 * from the mapped files, no copy. */
static int check_values(const st_set *s, tdm_err *e) {
    int rc = 0;
    for (size_t i = 0; !rc && i < safetensors_count(s); i++) rc = safetensors_check_finite(safetensors_at(s, i), e);
    return rc;
}

/* A GPT-2 folder (model/gpt2_import.h): its config.json, and its weights checked against
 * the GPT-2 of all its n_positions. */
static int inspect_gpt2(const char *dir, int json) {
    tdm_err e = {0};
    gpt2_hf g;
    model_config mc;
    model_layout lay = {0};
    st_set *s = NULL;
    int rc = gpt2_hf_read(dir, &g, &e);
    if (!rc) rc = gpt2_hf_model_config(&g, dir, g.positions, &mc, &e);
    if (!rc) rc = model_layout_init(&lay, &mc, &e);
    if (!rc) rc = gpt2_load(dir, &lay, NULL, &e);
    if (!rc) rc = safetensors_open(dir, &s, &e);
    if (!rc) rc = check_values(s, &e);
    if (rc) {
        fprintf(stderr, "tandem inspect: %s\n", e.msg);
        if (json) json_document(stdout, rc, e.msg, NULL);
        safetensors_close(s); /* open when only the values failed (a NaN weight): a leak, hunt */
        model_layout_free(&lay);
        return rc;
    }
    if (json) {
        printf("{\"dir\":");
        json_str(stdout, dir);
        printf(",\"model_type\":\"gpt2\",\"vocab\":%d,\"channels\":%d,\"layers\":%d,\"heads\":%d,\"max_positions\":%d,"
               "\"tied\":true,\"params\":%zu,\"tensors\":%zu,\"dtypes\":{",
               g.vocab, g.channels, g.layers, g.heads, g.positions, lay.numel, safetensors_count(s));
        print_dtypes(s, 1);
        printf("}}\n");
    } else {
        printf("%s: gpt2, %d layers, n_embd %d, %d heads, MLP %d, vocab %d, tied embeddings\n", dir, g.layers,
               g.channels, g.heads, 4 * g.channels, g.vocab);
        printf("  tanh GELU, LayerNorm eps 1e-05, up to %d positions (learned)\n", g.positions);
        printf("  %zu parameters (%.1fM); weights:", lay.numel, lay.numel / 1e6);
        print_dtypes(s, 0);
        printf("\n  every tensor of the architecture is present with its shape, every value finite (model.init: "
               "hf:%s starts a GPT-2 run)\n", dir);
    }
    safetensors_close(s);
    model_layout_free(&lay);
    return 0;
}

static int run_inspect(const cli_args *a) {
    const char *dir = a->arg[0];
    int json = cli_json(a);
    if (!dir[0]) { /* "" joined into "/config.json": the root's files were read */
        const char *msg = "DIR is empty: name the model folder (config.json and *.safetensors)";
        fprintf(stderr, "tandem inspect: %s\n", msg);
        if (json) json_document(stdout, ERR_USAGE, msg, NULL);
        return ERR_USAGE;
    }
    if (gpt2_hf_is(dir)) return inspect_gpt2(dir, json);
    tdm_err e = {0};
    hf_arch h;
    st_set *s = NULL;
    int rc = hf_arch_read(dir, &h, &e);
    if (!rc) rc = safetensors_open(dir, &s, &e);
    if (!rc) rc = hf_arch_check_weights(&h, s, &e);
    if (!rc) rc = check_values(s, &e);
    if (rc) {
        fprintf(stderr, "tandem inspect: %s\n", e.msg);
        if (json) json_document(stdout, rc, e.msg, NULL);
        safetensors_close(s);
        return rc;
    }
    uint64_t params = hf_arch_params(&h);
    if (json) {
        printf("{\"dir\":");
        json_str(stdout, dir);
        printf(",\"model_type\":");
        json_str(stdout, h.model_type);
        printf(",\"vocab\":%d,\"channels\":%d,\"layers\":%d,\"heads\":%d,\"kv_heads\":%d,\"head_dim\":%d,"
               "\"intermediate\":%d,\"max_positions\":%d,\"rope_theta\":%.17g,\"rms_eps\":%.17g,\"tied\":%s,"
               "\"qkv_bias\":%s,\"params\":%llu,\"tensors\":%zu,\"dtypes\":{",
               h.vocab, h.channels, h.layers, h.heads, h.kv_heads, h.head_dim, h.intermediate, h.max_positions,
               h.rope_theta, h.rms_eps, h.tied ? "true" : "false", h.qkv_bias ? "true" : "false",
               (unsigned long long)params, safetensors_count(s));
        print_dtypes(s, 1);
        printf("}}\n");
    } else {
        printf("%s: %s, %d layers, hidden %d, %d heads (%d key/value, head_dim %d), MLP %d, vocab %d%s%s\n", dir,
               h.model_type, h.layers, h.channels, h.heads, h.kv_heads, h.head_dim, h.intermediate, h.vocab,
               h.tied ? ", tied embeddings" : "", h.qkv_bias ? ", q/k/v biases" : "");
        printf("  RoPE theta %g, RMSNorm eps %g, up to %d positions\n", h.rope_theta, h.rms_eps, h.max_positions);
        printf("  %llu parameters (%.1fM); weights:", (unsigned long long)params, params / 1e6);
        print_dtypes(s, 0);
        printf("\n  every tensor of the architecture is present with its shape, every value finite\n");
    }
    safetensors_close(s);
    return 0;
}

int cmd_inspect(int argc, char **argv) { return cli_run(&SPEC, run_inspect, argc, argv); }
