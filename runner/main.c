/* main.c — the tandem command line: dispatches to the subcommands of runner/cmds.h. */
#include <stdio.h>
#include <string.h>

#include "runner/cmds.h"

static void usage(FILE *f) {
    fprintf(f,
            "tandem — checkpointable TANDEM data-mixture optimisation for GPT models\n"
            "\n"
            "usage: tandem COMMAND [options]   (tandem COMMAND --help for each)\n"
            "  run          start or resume a TANDEM run (data-mixture optimisation)\n"
            "  hash         digests of a run's final state and alpha history\n"
            "  gen-corpus   write a synthetic multi-domain corpus and its dataset.yaml\n"
            "  train        plain uniform-mixture training on the CPU (no TANDEM)\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "gen-corpus")) return cmd_gen_corpus(argc - 1, argv + 1);
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "hash")) return cmd_hash(argc - 1, argv + 1);
    fprintf(stderr, "tandem: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
