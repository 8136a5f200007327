/* cmds.h — the subcommands of the tandem CLI; runner/main.c dispatches to them.
 *
 * Each takes the arguments after the subcommand name (argv[0] is the subcommand) and
 * returns the process exit code (DESIGN.md §6).
 */
#ifndef TANDEM_RUNNER_CMDS_H
#define TANDEM_RUNNER_CMDS_H

/* tandem gen-corpus: writes a synthetic multi-domain corpus (data/corpus.h). */
int cmd_gen_corpus(int argc, char **argv);

/* tandem train: plain uniform-mixture training (runner/vanilla.h). */
int cmd_train(int argc, char **argv);

/* tandem run: start or resume a TANDEM run (runner/run.h). */
int cmd_run(int argc, char **argv);

/* tandem hash: the final-state and α-chain digests of a store. */
int cmd_hash(int argc, char **argv);

#endif
