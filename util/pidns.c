/* pidns.c — see pidns.h. */
#include "util/pidns.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

void pidns_self(pidns_id *out) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0 && st.st_ino != 0) {
        out->has_ns = 1;
        out->ns = (uint64_t)st.st_ino;
    }
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f) {
        char buf[64];
        if (fgets(buf, sizeof buf, f)) {
            buf[strcspn(buf, "\r\n")] = '\0';
            size_t n = strlen(buf);
            if (n > 0 && n < sizeof out->boot) {
                memcpy(out->boot, buf, n + 1);
                out->has_boot = 1;
            }
        }
        fclose(f);
    }
}

int pidns_same(const pidns_id *mine, const pidns_id *theirs) {
    return mine->has_ns && theirs->has_ns && mine->ns == theirs->ns && mine->has_boot && theirs->has_boot &&
           strcmp(mine->boot, theirs->boot) == 0;
}
