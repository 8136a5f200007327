/* fuzz_mem.h — a path that reads given bytes, for the fuzz targets whose readers take a
 * path: a memory file (memfd), so the fuzzer touches no disk. */
#ifndef TANDEM_TESTS_FUZZ_MEM_H
#define TANDEM_TESTS_FUZZ_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* The descriptor (close it when done) with "/proc/self/fd/N" in path, or -1. */
static inline int fuzz_mem_path(const uint8_t *data, size_t n, char *path, size_t cap) {
    int fd = memfd_create("fuzz", 0);
    if (fd < 0) return -1;
    if (n && write(fd, data, n) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
