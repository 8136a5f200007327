/* csv.h — one CSV field (RFC 4180): as is, or quoted with quotes doubled when it holds a
 * comma, a quote or a line break (domain names and hosts are the user's). */
#ifndef TANDEM_UTIL_CSV_H
#define TANDEM_UTIL_CSV_H

#include <stdio.h>

void csv_field(FILE *f, const char *v);

#endif
