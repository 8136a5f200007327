/* tok_export.c — the byte-level tokenizer as Hugging Face files; see tok_export.h. */
#include "data/tok_export.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/json.h"

/* GPT-2's bytes_to_unicode: the printable Latin-1 bytes stand for themselves, the others
 * (controls, space, ...) for U+0100 onwards in byte order. The ByteLevel pre-tokenizer
 * maps each byte of the text to this character before the model looks it up. */
static unsigned byte_char(unsigned b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
    unsigned n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    return 256 + n;
}

/* cp (< 0x800) as UTF-8 into out (NUL-terminated). */
static void utf8(unsigned cp, char out[4]) {
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

static int finish(FILE *f, const char *path, tdm_err *e) {
    int bad = ferror(f);
    if (fclose(f) || bad) return err_set(e, ERR_USAGE, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

int tok_export_byte_level(const char *dir, int ctx, tdm_err *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return err_set(e, ERR_USAGE, "cannot write %s: %s", path, strerror(errno));
    static const char byte_level[] = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
                                     "\"use_regex\":true}";
    fprintf(f, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[],\"normalizer\":null,"
               "\"pre_tokenizer\":%s,\"post_processor\":null,\"decoder\":%s,\"model\":{\"type\":\"BPE\","
               "\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
               "\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,\"vocab\":{",
            byte_level, byte_level);
    for (unsigned b = 0; b < 256; b++) {
        char ch[4];
        utf8(byte_char(b), ch);
        if (b) fputc(',', f);
        json_key(f, ch);
        fprintf(f, "%u", b);
    }
    fprintf(f, "},\"merges\":[]}}\n");
    int rc = finish(f, path, e);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (!(f = fopen(path, "w"))) return err_set(e, ERR_USAGE, "cannot write %s: %s", path, strerror(errno));
    char eos[4];
    utf8(byte_char('\n'), eos);
    fprintf(f, "{\"tokenizer_class\":\"PreTrainedTokenizerFast\",\"model_max_length\":%d,\"eos_token\":", ctx);
    json_str(f, eos);
    fprintf(f, ",\"clean_up_tokenization_spaces\":false}\n");
    return finish(f, path, e);
}
