/* pretok.h — the pre-tokenizers: the regexes that split text into pieces before BPE
 * (GPT-2, cl100k / Llama-3, Qwen2, o200k), each as a hand-written matcher.
 *
 * A matcher returns the length of the leftmost-first regex match starting at byte i, as
 * the regex engines behind tiktoken (Rust fancy-regex) and Hugging Face tokenizers
 * (Oniguruma) find it, backtracking included (`\s+(?!\S)` gives its last whitespace
 * character back when a non-space follows). Every position starts some match, so the
 * pieces tile the text. Character classes come from data/unicode_tables.c (\s is
 * Unicode White_Space). Invalid UTF-8: each bad byte is one character of no class
 * (neither letter, number nor space), as a U+FFFD would be. */
#ifndef TANDEM_DATA_PRETOK_H
#define TANDEM_DATA_PRETOK_H

#include <stddef.h>

typedef enum {
    PRETOK_GPT2,   /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    PRETOK_CL100K, /* case-insensitive contractions, [^\r\n\p{L}\p{N}]?\p{L}+, \p{N}{1,3} ... */
    PRETOK_LLAMA3, /* the same matcher as cl100k (Llama-3 wrote it with (?i:...)) */
    PRETOK_QWEN2,  /* cl100k's with \p{N} (one digit a piece) */
    PRETOK_O200K,  /* o200k_base: case-aware words with trailing contractions */
    PRETOK_COUNT
} pretok_pattern;

/* Bytes of the piece of text[0..n) that starts at i (i < n); never 0. */
size_t pretok_next(pretok_pattern p, const char *text, size_t n, size_t i);

/* "gpt2", "cl100k", "llama3", "qwen2", "o200k". */
const char *pretok_name(pretok_pattern p);

/* The pattern a name gives ("r50k", "p50k" are gpt2; "cl100k_base"/"o200k_base" too);
 * -1 for an unknown name. */
int pretok_from_name(const char *name);

/* The pattern whose regex source (as a tokenizer.json or tiktoken writes it) is re[0..n);
 * -1 when it is none of the known ones. */
int pretok_from_regex(const char *re, size_t n);

/* The regex source of a pattern (the form tiktoken / Hugging Face write). */
const char *pretok_regex(pretok_pattern p);

/* One UTF-8 character at text[i] (i < n): its code point, or 0xFFFFFFFF for an invalid
 * byte (then *len is 1). */
unsigned pretok_utf8(const char *text, size_t n, size_t i, size_t *len);

#endif
