/* hex.h — bytes as lowercase hexadecimal: digests, signatures, run ids. */
#ifndef TANDEM_UTIL_HEX_H
#define TANDEM_UTIL_HEX_H

#include <stddef.h>

/* Writes 2n lowercase hex digits of data[0..n) and a NUL into out (2n + 1 bytes). */
void hex_lower(const void *data, size_t n, char *out);

#endif
