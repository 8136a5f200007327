/* store_arg.c — the argument of the commands that take one STORE and nothing else
 * (hash, status, verify), through the shared option scanner (runner/args.h). */
#include <stdio.h>
#include <string.h>

#include "cli/cmds.h"
#include "runner/args.h"

int cli_one_store(int argc, char **argv, const char *usage, const char **url, int *rc) {
    args_iter it;
    args_init(&it, argc, argv, 1);
    tdm_err e = {0};
    *url = NULL;
    *rc = 0;
    while (!*rc && args_next(&it)) {
        if (!strcmp(it.flag, "--help") || !strcmp(it.flag, "-h")) {
            printf("%s\n", usage);
            return -1;
        }
        if (it.flag[0]) *rc = err_set(&e, ERR_USAGE, "unknown option %s", it.flag);
        else *rc = args_positional(&it, url, "STORE", &e);
    }
    if (!*rc && !*url) *rc = err_set(&e, ERR_USAGE, "a STORE is required");
    if (!*rc) return 0;
    fprintf(stderr, "tandem %s: %s\n%s\n", argv[0], e.msg, usage);
    return -1;
}
