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

int pidns_start_ticks(long pid, uint64_t *ticks, char *comm, size_t cap) {
    char path[64], buf[1024];
    if (pid > 0) snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    else snprintf(path, sizeof path, "/proc/self/stat");
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* the command name is in parentheses and may hold anything, ')' and spaces included */
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (!open || !close || close < open || close[1] != ' ') return -1;
    if (comm && cap) snprintf(comm, cap, "%.*s", (int)(close - open - 1), open + 1);
    /* after ") ": state is field 3; starttime is field 22 */
    char *p = close + 2;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    unsigned long long t = 0;
    if (!p || sscanf(p, "%llu", &t) != 1) return -1;
    *ticks = (uint64_t)t;
    return 0;
}

int pidns_same(const pidns_id *mine, const pidns_id *theirs) {
    return mine->has_ns && theirs->has_ns && mine->ns == theirs->ns && mine->has_boot && theirs->has_boot &&
           strcmp(mine->boot, theirs->boot) == 0;
}
