/* pidns.h — what a process id means: the PID namespace it is counted in and the boot of
 * the machine it runs on. A pid recorded by another process (a lease's holder) can be
 * judged with kill(pid, 0) and /proc only by a process of the same namespace on the
 * same boot: from another PID namespace on the same host name (a container sharing the
 * node's host name: docker --network host, k8s hostNetwork, a sidecar) a live holder's
 * pid does not exist, or names another process. */
#ifndef TANDEM_UTIL_PIDNS_H
#define TANDEM_UTIL_PIDNS_H

#include <stddef.h>
#include <stdint.h>

/* The boot id's text: a UUID (36 characters), NUL-terminated. */
#define PIDNS_BOOT_ID_MAX 40

typedef struct pidns_id {
    int has_ns;      /* ns read: the inode of /proc/self/ns/pid */
    uint64_t ns;
    int has_boot;    /* boot read: /proc/sys/kernel/random/boot_id, without its newline */
    char boot[PIDNS_BOOT_ID_MAX];
} pidns_id;

/* This process's namespace and boot; what cannot be read (no /proc) is left unset. */
void pidns_self(pidns_id *out);

/* Whether a pid recorded with `theirs` may be judged by a process with `mine`: both
 * parts read on both sides and equal. */
int pidns_same(const pidns_id *mine, const pidns_id *theirs);

/* Process pid's start, in clock ticks since its machine's boot (/proc/<pid>/stat's
 * starttime; pid 0: this process), and its command name into comm (cap bytes; NULL: not
 * wanted). With the boot id this names one process for good: a pid used again has
 * another start, and no step of the wall clock moves it (the wall-clock start, boot time
 * plus ticks, moves with every step: a live writer read as "another process"). 0, or -1
 * when it cannot be read (no such process, no /proc). */
int pidns_start_ticks(long pid, uint64_t *ticks, char *comm, size_t cap);

#endif
