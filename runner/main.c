/* main.c — the tandem command line: dispatches to the subcommands of runner/cmds.h. */
#include <stdio.h>
#include <string.h>

#include "runner/cmds.h"
#include "runner/run.h"
#include "storage/s3_config.h"

static void usage(FILE *f) {
    fprintf(f,
            "tandem — checkpointable TANDEM data-mixture optimisation for GPT models\n"
            "\n"
            "usage: tandem COMMAND [options]   (tandem COMMAND --help for each)\n"
            "  run          start or resume a TANDEM run (data-mixture optimisation)\n"
            "  compare      the paper's protocol: the TANDEM run, then Uniform, Natural and alpha*\n"
            "               final runs on the same budget, evaluated per domain (table, JSON, SVG)\n"
            "  hash         digests of a run's final state and alpha history\n"
            "  manifest     an sbatch script or Kubernetes Job that requeues on preemption\n"
            "  alpha        the alpha history: table, CSV, JSON, --verify, --plot FILE.svg\n"
            "  mixture      the final mixture (mean alpha of the last episodes) as YAML\n"
            "  status       where a run stands: position, commits, what a resume would lose\n"
            "  verify       re-hash every state, blob and alpha record of a store\n"
            "  gc           delete old states and unreferenced blobs (--keep N)\n"
            "  repair       what a run cannot heal by itself: a broken alpha chain (dry run;\n"
            "               --apply)\n"
            "  pin          keep a state from gc\n"
            "  eval         per-domain test loss and perplexity, and their Average\n"
            "  gen-corpus   write a synthetic multi-domain corpus and its dataset.yaml\n"
            "  prep         text files into byte-level train/val/test shards and dataset.yaml\n"
            "  train        plain uniform-mixture training on the CPU (no TANDEM)\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    /* before anything else: a run can be preempted from its first millisecond */
    if (!strcmp(cmd, "run") || !strcmp(cmd, "compare")) run_signals_install();
    /* a secret in the environment is in this process's memory from exec on: no core file
     * may hold it (s3_config_resolve does the same for a secret read from a file) */
    if (s3_config_env_has_secret()) s3_config_no_core_dumps();
    if (!strcmp(cmd, "gen-corpus")) return cmd_gen_corpus(argc - 1, argv + 1);
    if (!strcmp(cmd, "prep")) return cmd_prep(argc - 1, argv + 1);
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "hash")) return cmd_hash(argc - 1, argv + 1);
    if (!strcmp(cmd, "manifest")) return cmd_manifest(argc - 1, argv + 1);
    if (!strcmp(cmd, "alpha")) return cmd_alpha(argc - 1, argv + 1);
    if (!strcmp(cmd, "mixture")) return cmd_mixture(argc - 1, argv + 1);
    if (!strcmp(cmd, "status")) return cmd_status(argc - 1, argv + 1);
    if (!strcmp(cmd, "verify")) return cmd_verify(argc - 1, argv + 1);
    if (!strcmp(cmd, "gc")) return cmd_gc(argc - 1, argv + 1);
    if (!strcmp(cmd, "pin")) return cmd_pin(argc - 1, argv + 1);
    if (!strcmp(cmd, "repair")) return cmd_repair(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "compare")) return cmd_compare(argc - 1, argv + 1);
    fprintf(stderr, "tandem: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
