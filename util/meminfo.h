/* meminfo.h — how much memory this process may still use, and how much it has used.
 *
 * A run checks its memory estimate against these before it allocates anything, so that a
 * model that cannot fit ends with a message naming the setting to lower instead of an
 * allocation the kernel's OOM killer answers later (in a container: the cgroup's). */
#ifndef TANDEM_UTIL_MEMINFO_H
#define TANDEM_UTIL_MEMINFO_H

#include "util/err.h"

/* Bytes this process may still allocate: the least of /proc/meminfo's MemAvailable and
 * the room left under the cgroup's limit (v2 memory.max - memory.current, v1
 * memory.limit_in_bytes - memory.usage_in_bytes). TANDEM_MEM_AVAILABLE (bytes, or a
 * number with a K, M, G or T suffix, powers of 1024) overrides all of them: for a node
 * shared with other jobs, and for tests. *source (may be NULL) names where the figure came
 * from. 0 when nothing is known. */
double mem_available(const char **source);

/* This process's peak resident set size so far (VmHWM of /proc/self/status), bytes; 0
 * when unknown. */
double mem_peak_rss(void);

/* This process's resident set size now (VmRSS), bytes; 0 when unknown. */
double mem_rss(void);

/* Resets the peak that mem_peak_rss reports to the current RSS (/proc/self/clear_refs,
 * "5"), so that a benchmark can measure the peak of one phase. 0 on success. */
int mem_reset_peak(void);

/* Parses "12345", "64M", "1.5G" (powers of 1024) into bytes; -1 when it is not one. */
double mem_parse_size(const char *s);

/* 0, or ERR_USAGE with e set when TANDEM_MEM_AVAILABLE is set but not a size (which
 * mem_available would pass over for what the machine says: "24 G" was taken for nothing
 * and the run planned with the whole node's memory). A run checks it before it creates
 * its store. */
int mem_env_check(tdm_err *e);

/* The address-space limit (RLIMIT_AS's soft limit: ulimit -v, Grid Engine's h_vmem), bytes;
 * 0 when there is none. */
double mem_as_limit(void);

/* This process's mapped address space now (VmSize of /proc/self/status), bytes; 0 when
 * unknown. Every mapping counts against RLIMIT_AS, reserved or touched. */
double mem_vm_size(void);

/* The address space each new thread's stack takes: glibc gives a thread RLIMIT_STACK's soft
 * limit (ulimit -s, as it was when the process started), 2 MiB where that is unlimited,
 * plus a guard page. */
double mem_thread_stack(void);

/* Bytes glibc reserves for one malloc arena (a thread's own heap: 64 MiB on 64-bit, mapped
 * PROT_NONE and counted by RLIMIT_AS all the same), and how many it makes at most
 * (MALLOC_ARENA_MAX, else 8 per CPU online). */
#define MEM_ARENA_BYTES (64.0 * 1048576.0)
int mem_arena_max(void);

#endif
