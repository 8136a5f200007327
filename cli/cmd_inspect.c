/* cmd_inspect.c — `tandem inspect DIR`: what a Hugging Face model folder holds, as tandem
 * reads it (model/hf_config.h, model/safetensors.h): the architecture from config.json,
 * its parameter count, the weights' files, dtypes and bytes, and whether every tensor the
 * architecture needs is there with its shape — before a run is pointed at the folder.
 * Exit 0 when the folder is loadable, 2 naming the file and the problem when not. */
#include <stdio.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "model/hf_config.h"
#include "model/safetensors.h"
#include "util/json.h"

static const cli_opt OPTS[] = {
    {"--json", CLI_SWITCH, NULL, "one JSON object on stdout", NULL, 0, 0, NULL, NULL},
    CLI_FORMAT_TABLE_JSON,
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"inspect", "DIR", 1, 1, "a model folder DIR is required (config.json, model.safetensors)",
                              "A Hugging Face model folder of the Qwen2 / Llama family as tandem reads it:\n"
                              "config.json's architecture, the parameter count, the weights' dtypes and\n"
                              "bytes, and a check that every tensor is present with its shape.",
                              OPTS, NULL};

static int run_inspect(const cli_args *a) {
    const char *dir = a->arg[0];
    int json = cli_json(a);
    tdm_err e = {0};
    hf_arch h;
    st_set *s = NULL;
    int rc = hf_arch_read(dir, &h, &e);
    if (!rc) rc = safetensors_open(dir, &s, &e);
    if (!rc) rc = hf_arch_check_weights(&h, s, &e);
    if (rc) {
        fprintf(stderr, "tandem inspect: %s\n", e.msg);
        if (json) json_document(stdout, rc, e.msg, NULL);
        safetensors_close(s);
        return rc;
    }
    uint64_t params = hf_arch_params(&h), bytes[ST_NDTYPES] = {0}, count[ST_NDTYPES] = {0};
    for (size_t i = 0; i < safetensors_count(s); i++) {
        const st_tensor *t = safetensors_at(s, i);
        bytes[t->dtype] += t->nbytes;
        count[t->dtype]++;
    }
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
        int first = 1;
        for (int d = 0; d < ST_NDTYPES; d++)
            if (count[d]) {
                printf("%s\"%s\":{\"tensors\":%llu,\"bytes\":%llu}", first ? "" : ",", safetensors_dtype_name((st_dtype)d),
                       (unsigned long long)count[d], (unsigned long long)bytes[d]);
                first = 0;
            }
        printf("}}\n");
    } else {
        printf("%s: %s, %d layers, hidden %d, %d heads (%d key/value, head_dim %d), MLP %d, vocab %d%s%s\n", dir,
               h.model_type, h.layers, h.channels, h.heads, h.kv_heads, h.head_dim, h.intermediate, h.vocab,
               h.tied ? ", tied embeddings" : "", h.qkv_bias ? ", q/k/v biases" : "");
        printf("  RoPE theta %g, RMSNorm eps %g, up to %d positions\n", h.rope_theta, h.rms_eps, h.max_positions);
        printf("  %llu parameters (%.1fM); weights:", (unsigned long long)params, params / 1e6);
        for (int d = 0; d < ST_NDTYPES; d++)
            if (count[d])
                printf(" %llu %s tensors (%.2f GB)", (unsigned long long)count[d], safetensors_dtype_name((st_dtype)d),
                       bytes[d] / 1e9);
        printf("\n  every tensor of the architecture is present with its shape\n");
    }
    safetensors_close(s);
    return 0;
}

int cmd_inspect(int argc, char **argv) { return cli_run(&SPEC, run_inspect, argc, argv); }
