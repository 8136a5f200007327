/* meminfo.c — memory available and used; see meminfo.h. */
#include "util/meminfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int mem_env_check(tdm_err *e) {
    const char *v = getenv("TANDEM_MEM_AVAILABLE");
    if (v && *v && !(mem_parse_size(v) > 0)) /* 0 would turn the memory check off unsaid */
        return err_set(e, ERR_USAGE, "TANDEM_MEM_AVAILABLE = '%.60s' is not a size above 0: write bytes or a "
                       "number with K, M, G or T (24G, 24GiB, 512M), or unset it", v);
    return 0;
}

double mem_parse_size(const char *s) {
    if (!s || !*s) return -1;
    /* digits, with a decimal fraction: strtod would also take " 5", "0x10" (16 bytes) and
     * "1e3" (1000 bytes), none of them what a person writes for a memory size */
    const char *p = s;
    while (*p >= '0' && *p <= '9') p++;
    if (p == s) return -1;
    if (*p == '.') {
        const char *f = ++p;
        while (*p >= '0' && *p <= '9') p++;
        if (p == f) return -1;
    }
    char *end;
    double v = strtod(s, &end);
    if (end != p || !(v >= 0) || v > 1e30) return -1;
    double unit = 1;
    switch (*end) {
    case '\0': break;
    case 'K': case 'k': unit = 1024.0, end++; break;
    case 'M': case 'm': unit = 1048576.0, end++; break;
    case 'G': case 'g': unit = 1073741824.0, end++; break;
    case 'T': case 't': unit = 1099511627776.0, end++; break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'B') end += *end == 'i' && end[1] == 'B' ? 2 : 1; /* 64MiB, 1GB */
    return *end ? -1 : v * unit;
}

/* The first number in `path` (a cgroup file); -1 when unreadable or "max". */
static double read_number(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = "";
    char *ok = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!ok || strncmp(buf, "max", 3) == 0) return -1;
    char *end;
    double v = strtod(buf, &end);
    return end == buf ? -1 : v;
}

/* A "Key:   123 kB" line of a /proc file, in bytes; -1 when absent. */
static double proc_field(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    size_t kl = strlen(key);
    double v = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtod(line + kl + 1, NULL) * 1024.0;
            break;
        }
    fclose(f);
    return v;
}

double mem_available(const char **source) {
    const char *src = "";
    double avail = 0;
    const char *env = getenv("TANDEM_MEM_AVAILABLE");
    double forced = mem_parse_size(env);
    if (forced >= 0) {
        if (source) *source = "TANDEM_MEM_AVAILABLE";
        return forced;
    }
    double m = proc_field("/proc/meminfo", "MemAvailable");
    if (m > 0) avail = m, src = "MemAvailable in /proc/meminfo";
    double lim = read_number("/sys/fs/cgroup/memory.max"), cur = read_number("/sys/fs/cgroup/memory.current");
    if (lim < 0) {
        lim = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
        cur = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
        if (lim > 1e18) lim = -1; /* v1's "unlimited" is a huge number */
    }
    if (lim > 0 && cur >= 0) {
        double room = lim > cur ? lim - cur : 0;
        if (avail <= 0 || room < avail) avail = room, src = "the cgroup's memory limit";
    }
    /* the address-space limit (ulimit -v, Grid Engine's h_vmem): what this process may
     * still map, whatever the node has free; ignored, a run fitting MemAvailable failed
     * later with "out of memory" (exit 1), RUN sometimes written */
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
        double vm = proc_field("/proc/self/status", "VmSize");
        if (vm < 0) vm = 0; /* unreadable: the limit itself bounds what is left */
        /* 1 byte, not 0, when nothing is left: 0 reads as "unknown" and turns the check off */
        double room = (double)as.rlim_cur > vm ? (double)as.rlim_cur - vm : 1;
        if (avail <= 0 || room < avail) avail = room, src = "the address-space limit (ulimit -v, RLIMIT_AS)";
    }
    if (source) *source = src;
    return avail;
}

double mem_peak_rss(void) {
    double v = proc_field("/proc/self/status", "VmHWM");
    return v > 0 ? v : 0;
}

double mem_rss(void) {
    double v = proc_field("/proc/self/status", "VmRSS");
    return v > 0 ? v : 0;
}

int mem_reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}
