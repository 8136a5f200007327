/* nfc.h — Unicode Normalization Form C, for tokenizer.json files whose normalizer is NFC
 * (Qwen2's). Tables: data/unicode_tables.c (generated, Unicode 14.0). */
#ifndef TANDEM_DATA_NFC_H
#define TANDEM_DATA_NFC_H

#include <stddef.h>

/* NFC of text[0..n). Returns 0 with *out NULL when the text is NFC as it is (every code
 * point below U+0300: nothing there decomposes, combines or reorders), else 0 with *out
 * (malloc'd, the caller frees) and *outn; -1 when out of memory. Invalid UTF-8 bytes are
 * kept as they are and block composition across them. */
int nfc_normalize(const char *text, size_t n, char **out, size_t *outn);

#endif
