/* meminfo.c — memory available and used; see meminfo.h. */
#include "util/meminfo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <unistd.h>

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

double mem_as_limit(void) {
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return 0;
    return (double)as.rlim_cur;
}

double mem_vm_size(void) {
    double v = proc_field("/proc/self/status", "VmSize");
    return v > 0 ? v : 0;
}

double mem_thread_stack(void) {
    double page = (double)sysconf(_SC_PAGESIZE);
    if (!(page > 0)) page = 4096;
    struct rlimit st;
    double size = 2.0 * 1048576; /* glibc's ARCH_STACK_DEFAULT_SIZE on x86-64 and arm64 */
    if (getrlimit(RLIMIT_STACK, &st) == 0 && st.rlim_cur != RLIM_INFINITY) {
        size = (double)st.rlim_cur;
        if (size < 16384) size = 16384; /* PTHREAD_STACK_MIN */
    }
    /* OpenMP's workers take OMP_STACKSIZE when it is set (a number of KiB, or with a B, K,
     * M or G suffix): counted for every thread, the larger of the two */
    const char *omp = getenv("OMP_STACKSIZE");
    if (!omp || !*omp) omp = getenv("GOMP_STACKSIZE");
    if (omp && *omp) {
        size_t n = strlen(omp);
        char buf[64];
        snprintf(buf, sizeof buf, "%s%s", omp, omp[n - 1] >= '0' && omp[n - 1] <= '9' ? "K" : "");
        size_t bl = strlen(buf);
        if (bl && (buf[bl - 1] == 'B' || buf[bl - 1] == 'b')) buf[bl - 1] = '\0';
        double v = buf[0] ? mem_parse_size(buf) : -1;
        if (v > size) size = v;
    }
    return ceil(size / page) * page + page;
}

int mem_arena_max(void) {
    const char *v = getenv("MALLOC_ARENA_MAX");
    if (v && *v) {
        char *end;
        long n = strtol(v, &end, 10);
        if (!*end && n > 0) return n > 100000 ? 100000 : (int)n;
    }
    int cpus = get_nprocs();
    return 8 * (cpus > 0 ? cpus : 1);
}
