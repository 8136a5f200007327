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

#endif
