/* bytelevel.h — GPT-2's byte-level alphabet (bytes_to_unicode): the printable Latin-1
 * bytes stand for themselves, the others (controls, space, ...) for U+0100 onwards in byte
 * order. Byte-level BPE vocabularies are written in it; tok_load.c reads them, and
 * tok_export.c writes one. */
#ifndef TANDEM_DATA_BYTELEVEL_H
#define TANDEM_DATA_BYTELEVEL_H

#define BYTELEVEL_MAX_CP 324 /* every code point of the alphabet is below this */

/* cp[b] = the code point that stands for byte b. */
void bytelevel_alphabet(unsigned cp[256]);

#endif
