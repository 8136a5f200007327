/* tok_export.c — the byte-level tokenizer as Hugging Face files; see tok_export.h. */
#include "data/tok_export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bytelevel.h"
#include "data/shard.h"
#include "data/utf8.h"
#include "util/json.h"

/* Ends the text built in f (a memory stream) and puts it at path whole: a temporary
 * renamed over it, fsynced (a link there is replaced, not written through; a cut-off
 * export never leaves a half file). */
static int finish(FILE *f, char **text, size_t *len, const char *path, tdm_err *e) {
    int bad = ferror(f);
    if (fclose(f) || bad || !*text) {
        free(*text);
        return err_set(e, ERR_INTERNAL, "out of memory building %s", path);
    }
    int rc = shard_atomic_write(path, *text, *len, NULL, 0, e);
    free(*text);
    *text = NULL;
    return rc;
}

int tok_export_byte_level(const char *dir, int ctx, tdm_err *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return err_set(e, ERR_INTERNAL, "out of memory");
    static const char byte_level[] = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
                                     "\"use_regex\":true}";
    fprintf(f, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[],\"normalizer\":null,"
               "\"pre_tokenizer\":%s,\"post_processor\":null,\"decoder\":%s,\"model\":{\"type\":\"BPE\","
               "\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
               "\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,\"vocab\":{",
            byte_level, byte_level);
    unsigned cp[256];
    bytelevel_alphabet(cp);
    for (unsigned b = 0; b < 256; b++) {
        char ch[5];
        ch[utf8_put(cp[b], ch)] = '\0';
        if (b) fputc(',', f);
        json_key(f, ch);
        fprintf(f, "%u", b);
    }
    fprintf(f, "},\"merges\":[]}}\n");
    int rc = finish(f, &text, &len, path, e);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (!(f = open_memstream(&text, &len))) return err_set(e, ERR_INTERNAL, "out of memory");
    char eos[5];
    eos[utf8_put(cp['\n'], eos)] = '\0';
    fprintf(f, "{\"tokenizer_class\":\"PreTrainedTokenizerFast\",\"model_max_length\":%d,\"eos_token\":", ctx);
    json_str(f, eos);
    fprintf(f, ",\"clean_up_tokenization_spaces\":false}\n");
    return finish(f, &text, &len, path, e);
}
