/* main.c — the tandem command line: the table of subcommands (cli/cmds.h) and dispatch.
 *
 * One row per command: its name, the line `tandem --help` shows, its handler, and
 * whether it can be preempted (then the stop handlers go in before anything else, so a
 * SIGTERM from main()'s first line on ends in exit 75, never in death by the signal;
 * before it, the loader's and OpenBLAS's start-up: docs/running.md). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "cli/version.h"
#include "ledger/keys.h"
#include "model/blas_core.h"
#include "runner/run.h"
#include "storage/s3_config.h"
#include "util/outfile.h"

/* Before every shared library's constructor (glibc runs the executable's DT_PREINIT_ARRAY
 * first): OpenBLAS's maps its buffers there and, under an address-space limit too low for
 * them, retried the mmap forever, so that every command hung before main() (model/blas_core.h).
 * Only this program has it: the test programs link OpenBLAS with their own main(). */
__attribute__((section(".preinit_array"), used)) static void (*const main_preinit)(int, char **, char **) =
    blas_core_preinit;

typedef struct command {
    const char *name;
    const char *summary; /* lines of `tandem --help`, "\n" between them */
    int (*handler)(int argc, char **argv);
    int preemptible;
} command;

static const command COMMANDS[] = {
    {"run", "start or resume a TANDEM run (data-mixture optimisation)", cmd_run, 1},
    {"compare", "the paper's protocol: the TANDEM run, then Uniform, Natural and alpha*\n"
                "final runs on the same budget, evaluated per domain (table, JSON, SVG)",
     cmd_compare, 1},
    {"train", "uniform-mixture training, the baseline (tandem run with run.mode=fixed)",
     cmd_train, 1},
    {"hash", "digests of a run's final state and alpha history", cmd_hash, 0},
    {"manifest", "an sbatch script or Kubernetes Job that requeues on preemption", cmd_manifest, 0},
    {"alpha", "the alpha history: table, CSV, JSON, --verify, --plot FILE.svg", cmd_alpha, 0},
    {"metrics", "what each episode measured: table, CSV, JSON lines, --plot, --tensorboard",
     cmd_metrics, 0},
    {"mixture", "the final mixture (mean alpha of the last episodes) as YAML", cmd_mixture, 0},
    {"status", "where a run stands: position, commits, what a resume would lose", cmd_status, 0},
    {"results", "a sweep's points: state, per-domain perplexity, Average and alpha*\n"
                "(table, CSV, JSON, SVG)",
     cmd_results, 0},
    {"verify", "re-hash every state, blob and alpha record of a store", cmd_verify, 0},
    {"gc", "delete old states and unreferenced blobs (--keep N)", cmd_gc, 0},
    {"repair", "what a run cannot heal by itself: a broken alpha chain (dry run;\n--apply)",
     cmd_repair, 0},
    {"pin", "keep a state from gc", cmd_pin, 0},
    {"eval", "per-domain test loss and perplexity, and their Average", cmd_eval, 0},
    {"export", "a run's u as a Hugging Face model folder (safetensors) for transformers", cmd_export, 0},
    {"gen-corpus", "write a synthetic multi-domain corpus and its dataset.yaml", cmd_gen_corpus, 0},
    {"prep", "text, .jsonl, .json (plain, .gz or .zst) and .parquet into byte-level or\n"
             "tokenized shards and dataset.yaml",
     cmd_prep, 0},
    {"inspect", "a Hugging Face model folder (Qwen2, Llama): architecture, weights, checks",
     cmd_inspect, 0},
    {"tokenize", "token ids (or --count) of text files with a tokenizer.json or tiktoken file",
     cmd_tokenize, 0},
    {"version", "the version, git revision and what this build can run on", cmd_version, 0},
};
#define NCOMMANDS (sizeof COMMANDS / sizeof *COMMANDS)

static void usage(FILE *f) {
    fprintf(f, "tandem — checkpointable TANDEM data-mixture optimisation for GPT models\n\n"
               "usage: tandem COMMAND [options]   (tandem COMMAND --help for each)\n");
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const char *s = COMMANDS[i].summary;
        fprintf(f, "  %-12s ", COMMANDS[i].name);
        for (const char *nl; (nl = strchr(s, '\n')); s = nl + 1) fprintf(f, "%.*s\n%15s", (int)(nl - s), s, "");
        fprintf(f, "%s\n", s);
    }
}

/* Descriptors 0, 1 and 2 open before anything opens a file. Started with one closed
 * (`tandem run >&-`), the first file opened afterwards (a store object's temporary) would
 * take its number and receive what tandem prints: JSON events inside a state. A closed
 * one is taken by /dev/null opened read-only, so reads see an end of file and writes
 * fail (EBADF): output that goes nowhere is still noticed (main_output_check). */
static void main_hold_std_fds(void) {
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        int got = open("/dev/null", O_RDONLY | O_CLOEXEC); /* the lowest free number: fd */
        if (got != fd) {
            static const char msg[] = "tandem: descriptor 0, 1 or 2 is closed and /dev/null "
                                      "cannot take its place; start tandem with them open\n";
            if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) { /* nothing more to do */ }
            _exit(1);
        }
        fcntl(fd, F_SETFD, 0); /* kept across the BLAS re-exec, as the closed one was */
    }
}

/* A command's exit status, given what became of its standard output: a table, a mixture
 * or a manifest that could not be written whole (a full disk, a closed or broken output)
 * is a failure, said on stderr, never an exit 0. (A reader that went away early, as
 * `| head` does, ends a command by SIGPIPE as for other tools; a run ignores SIGPIPE and
 * says when its events stop: report/progress.c.) */
static int main_output_check(const char *cmd, int rc) {
    int err = outfile_stream_error(stdout);
    if (!err) return rc;
    fprintf(stderr, "tandem %s: standard output could not be written (%s): what it printed is "
                    "incomplete\n",
            cmd, strerror(err));
    return rc ? rc : 1;
}

int main(int argc, char **argv) {
    main_hold_std_fds();
    /* a write past the file-size limit (ulimit -f) fails with EFBIG, said and handled as a
     * store error (exit 3, the lease released), instead of SIGXFSZ ending the process
     * silently (exit 153) with its lease held and a temporary left */
    signal(SIGXFSZ, SIG_IGN);
    blas_core_reexec(argv); /* before any work: OpenBLAS's kernels on CPUs it does not know */
    outfile_keep_stdout(); /* a failed write's reason kept: ENOSPC, EBADF, not EIO */
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        blas_core_reexec_unblock();
        usage(argc < 2 ? stderr : stdout);
        return main_output_check("--help", argc < 2 ? 2 : 0);
    }
    if (!strcmp(argv[1], "--version")) {
        blas_core_reexec_unblock();
        return main_output_check("--version", cmd_version(argc - 1, argv + 1));
    }
    const command *c = NULL;
    for (size_t i = 0; i < NCOMMANDS && !c; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) c = &COMMANDS[i];
    if (!c) {
        blas_core_reexec_unblock();
        fprintf(stderr, "tandem: unknown command '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    /* before anything else: a run can be preempted from its first millisecond (a stop
     * signal held across the BLAS re-exec is delivered to the handler now) */
    if (c->preemptible) run_signals_install();
    blas_core_reexec_unblock();
    /* a secret in the environment is in this process's memory from exec on: no core file
     * may hold it (s3_config_resolve does the same for a secret read from a file) */
    if (s3_config_env_has_secret()) s3_config_no_core_dumps();
    outfile_set_owned(ledger_key_owned); /* no --plot, --svg or --out over a store's objects */
    outfile_guards_enable();              /* temporaries removed on SIGTERM (outfile.h) */
    return main_output_check(c->name, c->handler(argc - 1, argv + 1));
}
