/* fuzz_config.c — libFuzzer target for the config loader (util/ydoc.c, config/config.c):
 * the input is a config file. Every input must give a clean result: ERR_USAGE with a
 * message, or a config that survives both of its written forms — the canonical form a run
 * pins (config_canonical → config_from_canonical gives no differing key) and the YAML
 * `tandem manifest` embeds (config_print_yaml → config_load gives no key but store differing). ASan and
 * UBSan report anything else. Built and run by `make fuzz` (target "config"), seeded with
 * the shipped configs and presets. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "tests/fuzz/fuzz_mem.h"

/* No key differs between a and b. */
static int same(const config *a, const config *b) {
    const char **keys = NULL;
    size_t nk = 0;
    tdm_err e = {0};
    int rc = config_diff(a, b, &keys, &nk, &e);
    free(keys);
    return rc == 0 && nk == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char path[64];
    int fd = fuzz_mem_path(data, n, path, sizeof path);
    if (fd < 0) return 0;
    static char *sets[] = {"data.dataset=/corpus/dataset.yaml"};
    config *c = malloc(sizeof *c), *back = malloc(sizeof *back);
    tdm_err e = {0};
    int rc = c && back ? config_load(c, path, sets, 1, &e) : -1;
    close(fd);
    if (rc == ERR_USAGE && !e.msg[0]) abort(); /* an error that says nothing */
    if (rc && rc != ERR_USAGE) abort();        /* only the file is wrong: ERR_USAGE */
    if (rc == 0) {
        config_kv *kv = NULL;
        size_t nkv = 0;
        if (config_canonical(c, &kv, &nkv, &e) || config_from_canonical(back, kv, nkv, &e) || !same(c, back))
            abort(); /* the pinned form must read back */
        free(kv);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f) abort();
        config_print_yaml(f, c, "");
        fclose(f);
        int pfd = fuzz_mem_path((const uint8_t *)text, len, path, sizeof path);
        free(text);
        if (pfd >= 0) {
            if (config_load(back, path, NULL, 0, &e)) abort(); /* printed must load */
            memcpy(back->store, c->store, sizeof back->store); /* not printed: where, not what */
            if (!same(c, back)) abort();
            close(pfd);
        }
    }
    free(c);
    free(back);
    return 0;
}
