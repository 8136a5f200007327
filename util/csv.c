/* csv.c — CSV fields; see csv.h. */
#include "util/csv.h"

#include <string.h>

void csv_field(FILE *f, const char *v) {
    if (!strpbrk(v, ",\"\r\n")) {
        fputs(v, f);
        return;
    }
    fputc('"', f);
    for (; *v; v++) {
        if (*v == '"') fputc('"', f);
        fputc(*v, f);
    }
    fputc('"', f);
}
