/* opts.h — the command line as data: each command declares its positional arguments and
 * options as rows (cli_spec), and one parser (cli_parse) reads argv against them, prints
 * `--help` from the same rows, and says what is wrong with a usage error (exit 2).
 *
 * Options are `--name value`, `--name=value`, or `--name` alone for a switch. An option
 * that holds one value is refused when given twice (which one was meant is a guess); a list
 * option may be given many times (values kept in order); an alias option adds
 * "PREFIX VALUE" to another list option, in the order given (`--precision bf16` is
 * `--set run.precision=bf16`). Values are checked as the row says: one of the choices, an
 * integer or a number in range.
 */
#ifndef TANDEM_CLI_OPTS_H
#define TANDEM_CLI_OPTS_H

#include <stdio.h>

typedef enum {
    CLI_SWITCH, /* no value; counted */
    CLI_STR,    /* a value, given once (twice is a usage error) */
    CLI_INT,    /* an integer in [min, max], given once; min >= 0: digits alone ("-0" refused) */
    CLI_NUM,    /* a finite number in [min, max], given once */
    CLI_LIST,   /* a value, repeatable: every one in order */
    CLI_ALIAS,  /* a value, added as prefix + value to the list option `target` */
} cli_kind;

typedef struct cli_opt {
    const char *name;    /* "--format" */
    cli_kind kind;
    const char *metavar; /* "FILE.svg", "N"; for choices shown as "a|b|c" */
    const char *help;    /* one line (or several, "\n" between) for --help */
    const char *choices; /* CLI_STR: "table|csv|json" (the value must be one); NULL: any */
    double min, max;     /* CLI_INT, CLI_NUM */
    const char *target;  /* CLI_ALIAS: the list option it adds to */
    const char *prefix;  /* CLI_ALIAS: put before the value ("run.precision=") */
} cli_opt;

typedef struct cli_spec {
    const char *name;    /* "alpha": errors say "tandem alpha: ..." */
    const char *args;    /* the positionals as the usage line shows them: "STORE" */
    int min_args, max_args;
    const char *missing; /* the error when fewer than min_args: "a STORE is required" */
    const char *about;   /* printed after the usage line by --help (may be NULL) */
    const cli_opt *opts; /* ends with a row whose name is NULL */
    void (*more_help)(FILE *f); /* printed last by --help (config keys...), may be NULL */
} cli_spec;

#define CLI_MAX_ARGS 1024 /* positional words: tokenize FILE... takes a shell glob (it stopped at 8) */
#define CLI_MAX_OPTS 32

typedef struct cli_args {
    const cli_spec *spec;
    const char *arg[CLI_MAX_ARGS];
    int nargs;
    int count[CLI_MAX_OPTS];       /* times each option was given */
    const char *value[CLI_MAX_OPTS]; /* its last value */
    double num[CLI_MAX_OPTS];      /* CLI_INT / CLI_NUM: the last value, converted */
    char **list[CLI_MAX_OPTS];     /* CLI_LIST: the values in order (owned array) */
    int nlist[CLI_MAX_OPTS];
    char **owned;                  /* strings the parser made (alias values) */
    int nowned;
} cli_args;

/* Parses argv[1..argc) (argv[0] is the command's name) against spec into *a. Returns 0;
 * or -1 after printing --help to stdout (the command exits 0); or 2 after printing
 * "tandem NAME: what is wrong" and the usage line to stderr. Free *a with cli_args_free
 * whatever it returns. */
int cli_parse(const cli_spec *spec, int argc, char **argv, cli_args *a);
void cli_args_free(cli_args *a);

/* A command's entry point in one line: parses argv against spec, runs fn on the result
 * and frees it. Returns fn's exit code, 0 after --help, 2 after a usage error. */
int cli_run(const cli_spec *spec, int (*fn)(const cli_args *a), int argc, char **argv);

/* The whole --help text of a command (usage line, about, one line per option, more_help). */
void cli_help(const cli_spec *spec, FILE *f);
/* The usage line alone: "usage: tandem NAME ARGS [--opt METAVAR] ..." */
void cli_usage(const cli_spec *spec, FILE *f);

/* The --format row of a command whose report is a table or one JSON object: --format
 * json is the same as --json (the parser refuses the two when they disagree). */
#define CLI_FORMAT_TABLE_JSON                                                                         \
    {"--format", CLI_STR, NULL, "table (default) or json; --format json is --json", "table|json", 0, 0, NULL, NULL}

/* Whether the command reports JSON: --json given, or --format json. */
int cli_json(const struct cli_args *a);

/* Lookups by option name (a name not in the spec is a programming error: abort). */
int cli_given(const cli_args *a, const char *name);                 /* times given */
const char *cli_str(const cli_args *a, const char *name, const char *dflt);
long cli_int(const cli_args *a, const char *name, long dflt);
double cli_num(const cli_args *a, const char *name, double dflt);
/* CLI_LIST: the values in order and their count (NULL, 0 when none) */
char **cli_list(const cli_args *a, const char *name, int *n);

#endif
