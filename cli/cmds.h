/* cmds.h — the subcommands of the tandem CLI; runner/main.c dispatches to them.
 *
 * Each takes the arguments after the subcommand name (argv[0] is the subcommand) and
 * returns the process exit code (DESIGN.md §6).
 */
#ifndef TANDEM_CLI_CMDS_H
#define TANDEM_CLI_CMDS_H

#include <stdio.h>

/* tandem gen-corpus: writes a synthetic multi-domain corpus (data/corpus.h). */
int cmd_gen_corpus(int argc, char **argv);
int cmd_prep(int argc, char **argv); /* tandem prep: text into a byte-level dataset (data/prep.h) */
/* tandem inspect: a Hugging Face model folder as tandem reads it (model/hf_config.h). */
int cmd_inspect(int argc, char **argv);
/* tandem tokenize: token ids or counts of files with a real tokenizer (data/tokenizer.h). */
int cmd_tokenize(int argc, char **argv);

/* tandem train: uniform-mixture training, an alias of tandem run with run.mode = fixed. */
int cmd_train(int argc, char **argv);

/* tandem run: start or resume a TANDEM run (runner/run.h). */
int cmd_run(int argc, char **argv);

/* tandem hash: the final-state and α-chain digests of a store. */
int cmd_hash(int argc, char **argv);
int cmd_manifest(int argc, char **argv); /* tandem manifest slurm|k8s (deploy/manifest.h) */

/* Audit and retention (ledger/audit.h): alpha, mixture, status, verify, gc, pin. */
int cmd_alpha(int argc, char **argv);
int cmd_metrics(int argc, char **argv); /* what each episode measured (ledger/metrics.h) */
int cmd_mixture(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_results(int argc, char **argv); /* a sweep's points: state, perplexities, alpha* */
int cmd_verify(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_pin(int argc, char **argv);
int cmd_repair(int argc, char **argv); /* what a run cannot heal by itself (--apply) */

/* tandem eval: per-domain loss and perplexity of a run's newest state. */
int cmd_eval(int argc, char **argv);
int cmd_export(int argc, char **argv); /* a run's u as a Hugging Face folder (runner/export.h) */

/* tandem compare: the DMO, then Uniform, Natural and α* final runs, evaluated. */
int cmd_compare(int argc, char **argv);

/* The exit codes of a command that runs training (run, train, compare), for --help. */
void cli_run_exit_codes(FILE *f);

#endif
