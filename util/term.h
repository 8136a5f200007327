/* term.h — text from files and stores, printed on a terminal.
 *
 * A host name, a file name or a sweep label comes from outside: printed as is, its escape
 * sequences would recolour the terminal, set its title or forge log lines. The --json
 * forms escape such text already; these are for the lines meant for people. */
#ifndef TANDEM_UTIL_TERM_H
#define TANDEM_UTIL_TERM_H

#include <stddef.h>
#include <stdio.h>

/* Writes s with every control character — C0, DEL, and the C1 controls (U+0080..U+009F,
 * as UTF-8) — as '?'. */
void term_text(FILE *f, const char *s);
/* The same into out (cap bytes, cut to fit), for a column printed with a width. */
void term_copy(char *out, size_t cap, const char *s);

/* The first character of s that a person cannot see as written, for values that name
 * things (a path, a label): a control — C0, DEL, C1 (U+0080..U+009F, NEL among them) — a
 * line or paragraph separator (U+2028, U+2029), a zero-width or direction-changing
 * character (U+200B..U+200F, U+202A..U+202E, U+2060..U+2064, U+2066..U+2069) or a BOM
 * (U+FEFF). Its byte offset into *at and code point into *cp: 1; 0 when there is none.
 * s is UTF-8 (the config loader refuses other bytes); a stray byte is not judged here. */
int term_hidden_char(const char *s, size_t *at, unsigned *cp);

#endif
