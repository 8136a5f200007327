/* tokenizer.h — byte-level BPE tokenizers of the GPT-2 / GPT-4 / Llama-3 / Qwen2 kind,
 * loaded from a Hugging Face tokenizer.json or a tiktoken ranks file, in plain C.
 *
 * Encoding is pre-tokenization (data/pretok.h: the family's regex, matched by hand) then
 * BPE merges per piece (data/bpe.h). The result agrees token for token with tiktoken
 * (encode_ordinary) and with Hugging Face tokenizers on the same files
 * (tests/test_tokenizer.c checks both against their JavaScript ports).
 *
 * Contracts:
 *  - Text is UTF-8. An invalid byte is its own character of no class (as U+FFFD would
 *    be) and still encodes to its byte token, so every byte string encodes and decodes
 *    back to itself.
 *  - Ordinary text only: special and added tokens (<|endoftext|>...) written in the text
 *    are NOT matched; they encode as the plain text they are (tiktoken encode_ordinary;
 *    Hugging Face with split_special_tokens). A caller appends tokenizer_eot() itself
 *    between documents. No normalizer, no BOS/post-processor tokens.
 *  - A loaded tokenizer is immutable: any number of threads may encode with it at once.
 */
#ifndef TANDEM_DATA_TOKENIZER_H
#define TANDEM_DATA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "data/bpe.h"
#include "util/buf.h"
#include "util/err.h"

typedef struct tokenizer tokenizer;

/* Loads path: a tokenizer.json (a file whose first non-space byte is '{': model.type
 * "BPE" with vocab and merges; pre_tokenizer ByteLevel with use_regex, or a Sequence of a
 * Split on one of the known regexes (GPT-2, cl100k/Llama-3, Qwen2, o200k) and
 * ByteLevel; normalizer null; added_tokens) or a tiktoken ranks file (lines
 * "base64 rank"). `pattern` names the pre-tokenizer (pretok_from_name: gpt2, r50k,
 * cl100k, llama3, qwen2, o200k): required for a ranks file (it also picks the family's
 * special tokens), for a tokenizer.json NULL or the one its pre_tokenizer says. Returns
 * 0 with *out (free with tokenizer_free), or ERR_USAGE naming the file and the key or
 * line that is wrong. */
int tokenizer_load(const char *path, const char *pattern, tokenizer **out, tdm_err *e);
void tokenizer_free(tokenizer *t);

/* Ids are 0..vocab-1 (added and special tokens included; a few may be unused); files
 * with ids of 2^24 or more are refused. */
uint32_t tokenizer_vocab(const tokenizer *t);
/* The end-of-text token (<|endoftext|>, Llama-3's <|end_of_text|>, or </s>), -1 if none. */
int64_t tokenizer_eot(const tokenizer *t);
/* SHA-256 (hex) of the loaded file's bytes. */
const char *tokenizer_digest(const tokenizer *t);
/* "hf-bpe:gpt2", "tiktoken:cl100k"...: the format and the pre-tokenizer. */
const char *tokenizer_kind(const tokenizer *t);
/* The id of an added/special token's content, or of the token with these bytes; -1. */
int64_t tokenizer_token_id(const tokenizer *t, const char *s, size_t n);
/* Whether id is an added token that is not special: one matched in text (a separator of
 * that id could then stand inside a document too). */
int tokenizer_id_matched(const tokenizer *t, uint32_t id);

/* Appends the ids of text[0..n) to out. 0, or ERR_INTERNAL (no memory; out then holds a
 * prefix of the result). */
int tokenizer_encode(const tokenizer *t, const char *text, size_t n, tok_ids *out, tdm_err *e);

/* The same result as tokenizer_encode, on `threads` threads (<= 0: OpenMP's default).
 * The text is cut only where every pattern starts a new piece (after a '\n' that is
 * followed by a letter or digit), so the ids are identical to one thread's. */
int tokenizer_encode_parallel(const tokenizer *t, const char *text, size_t n, int threads,
                              tok_ids *out, tdm_err *e);

/* Long texts in parts, so that a document need not be held whole: a safe cut c of a
 * text (0 < c < n, just after a '\n' that a letter or digit follows) is a point that no
 * pre-tokenizer piece spans and where NFC composes nothing across, so
 *   encode(T) == encode_head(T, n, c, start 1) ++ encode_head(T + c, n - c, n - c, start 0).
 * tokenizer_safe_cut returns the last safe cut of text[0..n), 0 when there is none (the
 * caller then needs more text, or the whole of it). */
size_t tokenizer_safe_cut(const tokenizer *t, const char *text, size_t n);

/* Appends the ids of the pieces of text[0..n) that start before `cut`, which is n or a
 * safe cut (the rest, text[cut..n), is only looked at, as the patterns' lookahead does),
 * on `threads` threads as tokenizer_encode_parallel. `start`: 1 when text[0] starts the
 * text (a tokenizer.json's add_prefix_space puts its space there), 0 when the text
 * continues one whose earlier part an earlier call encoded. `cache`: NULL, or a
 * bpe_cache_new() the caller keeps for many calls from one thread (a fresh cache per
 * call makes short texts, one after another, several times slower). 0, or ERR_INTERNAL. */
int tokenizer_encode_head(const tokenizer *t, const char *text, size_t n, size_t cut, int start,
                          int threads, bpe_cache *cache, tok_ids *out, tdm_err *e);

/* Many documents at once: outs[i] gets the ids of docs[i][0..lens[i]) appended (each
 * document encoded on its own, as by tokenizer_encode). */
int tokenizer_encode_docs(const tokenizer *t, size_t ndocs, const char *const *docs,
                          const size_t *lens, int threads, tok_ids *outs, tdm_err *e);

/* Appends the bytes of ids[0..n) to out (added tokens as their content). ERR_USAGE for
 * an id that has no token. */
int tokenizer_decode(const tokenizer *t, const uint32_t *ids, size_t n, buf_t *out, tdm_err *e);

#endif
