/* args.h — command-line option scanning shared by the subcommands.
 *
 * Options are `--flag value` or `--flag=value`; `--flag` alone for switches. Values are
 * converted strictly (whole string, range-checked); errors are ERR_USAGE naming the flag.
 */
#ifndef TANDEM_UTIL_ARGS_H
#define TANDEM_UTIL_ARGS_H

#include <stdint.h>

#include "util/err.h"

typedef struct args_iter {
    int argc;
    char **argv;
    int i;             /* next argv index */
    char flag[64];     /* current flag, "--name" */
    const char *value; /* its inline value ("--flag=v"), or NULL */
} args_iter;

/* Starts scanning argv[first..argc). */
void args_init(args_iter *it, int argc, char **argv, int first);

/* Advances to the next argument. Returns 1 with it->flag set for an option, 1 with
 * it->flag = "" and it->value = the word for a positional argument, 0 at the end. */
int args_next(args_iter *it);

/* Stores the current positional argument in *slot, which takes one word: a second one
 * is ERR_USAGE "unexpected argument 'X' (one WHAT only)". */
int args_positional(args_iter *it, const char **slot, const char *what, tdm_err *e);

/* The current option's value: inline, or the next argument (consumed). */
int args_value(args_iter *it, const char **out, tdm_err *e);
int args_int(args_iter *it, long min, long max, long *out, tdm_err *e);
int args_u64(args_iter *it, uint64_t *out, tdm_err *e);
int args_double(args_iter *it, double min, double max, double *out, tdm_err *e);

/* Strict conversions of a whole string; 0 on success, -1 otherwise. */
int args_parse_long(const char *s, long *out);
int args_parse_u64(const char *s, uint64_t *out);
int args_parse_double(const char *s, double *out);
/* A decimal count with an optional suffix: k/K, M, G (1000^n) or Ki, Mi, Gi (1024^n)
 * ("64Ki" = 65536); 0 on success, -1 on anything else or past 2^64 - 1. */
int args_parse_count(const char *s, uint64_t *out);

#endif
