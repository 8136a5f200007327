/* test_cli_opts.c — the command line as rows (cli/opts.h): every kind of option, the
 * forms a user types, every usage error, and --help drawn from the same rows. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/opts.h"
#include "util/args.h"
#include "deploy/sweep.h"
#include "tests/test.h"

static const cli_opt OPTS[] = {
    {"--format", CLI_STR, NULL, "table, CSV or JSON", "table|csv|json", 0, 0, NULL, NULL},
    {"--verify", CLI_SWITCH, NULL, "check the chain", NULL, 0, 0, NULL, NULL},
    {"--keep", CLI_INT, "N", "states to keep\nsecond line", NULL, 1, 100, NULL, NULL},
    {"--ratio", CLI_NUM, "X", "a number", NULL, 0, 1, NULL, NULL},
    {"--set", CLI_LIST, "key=value", "override a key (repeatable)", NULL, 0, 0, NULL, NULL},
    {"--precision", CLI_ALIAS, "fp32|bf16", "= --set run.precision=", NULL, 0, 0, "--set", "run.precision="},
    {"--a-rather-long-option-name", CLI_STR, "VALUE", "help on the next line", NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static void more(FILE *f) { fprintf(f, "MORE HELP\n"); }
static const cli_spec SPEC = {"demo", "STORE [SEQ]", 1, 2, "a STORE is required", "About it.", OPTS, more};

/* Parses the words (NULL-terminated, after the command name) with stderr captured. */
static int parse(cli_args *a, char *err, size_t cap, ...) {
    char *argv[32] = {"demo"};
    int argc = 1;
    va_list ap;
    va_start(ap, cap);
    for (char *w; (w = va_arg(ap, char *)) && argc < 31;) argv[argc++] = w;
    va_end(ap);
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), 2);
    int rc = cli_parse(&SPEC, argc, argv, a);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(err, 1, cap - 1, tmp);
    err[n] = '\0';
    fclose(tmp);
    return rc;
}

static void test_every_kind_and_form(void) {
    cli_args a;
    char err[1024];
    int rc = parse(&a, err, sizeof err, "s3://b/run", "--format=csv", "--verify", "--keep", "7",
                   "--set", "a=1", "--precision", "bf16", "--set=b=2", "--ratio", "0.25", "12", NULL);
    CHECK(rc == 0, "rc %d: %s", rc, err);
    CHECK(a.nargs == 2 && !strcmp(a.arg[0], "s3://b/run") && !strcmp(a.arg[1], "12"), "positionals");
    CHECK(!strcmp(cli_str(&a, "--format", "table"), "csv"), "--format=csv");
    CHECK(cli_given(&a, "--verify") == 1, "switch");
    CHECK(cli_int(&a, "--keep", 0) == 7 && cli_num(&a, "--ratio", 0) == 0.25, "numbers");
    int n = 0;
    char **l = cli_list(&a, "--set", &n);
    /* the alias keeps its place among the list's values */
    CHECK(n == 3 && !strcmp(l[0], "a=1") && !strcmp(l[1], "run.precision=bf16") && !strcmp(l[2], "b=2"),
          "list order: %d %s %s %s", n, n > 0 ? l[0] : "", n > 1 ? l[1] : "", n > 2 ? l[2] : "");
    CHECK(!strcmp(cli_str(&a, "--a-rather-long-option-name", "dflt"), "dflt"), "default when absent");
    cli_args_free(&a);
    /* "--" ends the options: a store named like an option */
    rc = parse(&a, err, sizeof err, "--", "--verify", NULL);
    CHECK(rc == 0 && a.nargs == 1 && !strcmp(a.arg[0], "--verify") && !cli_given(&a, "--verify"),
          "after --: rc %d", rc);
    cli_args_free(&a);
}

static void test_usage_errors_say_what_is_wrong(void) {
    struct {
        const char *words[4];
        const char *says;
    } cases[] = {
        {{"s", "--nope", NULL}, "unknown option --nope (see tandem demo --help)"},
        {{"s", "--format", "xml", NULL}, "--format: 'xml' is not one of table|csv|json"},
        {{"s", "--keep", "0", NULL}, "--keep: '0' is not an integer in 1..100"},
        {{"s", "--keep", "9x", NULL}, "'9x' is not an integer"},
        {{"s", "--keep=99999999999999999999", NULL}, "is not an integer in 1..100"},
        {{"s", "--ratio", "nan", NULL}, "--ratio: 'nan' is not a number in 0..1"},
        {{"s", "--verify=yes", NULL}, "--verify takes no value"},
        {{"s", "--keep", NULL}, "--keep needs a value"},
        {{"s", "1", "2", NULL}, "unexpected argument '2'"},
        {{"--verify", NULL}, "a STORE is required"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cli_args a;
        char err[1024];
        const char **w = cases[i].words;
        int rc = parse(&a, err, sizeof err, w[0], w[1], w[2], w[3], NULL);
        CHECK(rc == 2, "case %zu: rc %d", i, rc);
        CHECK(strstr(err, cases[i].says), "case %zu: stderr lacks '%s':\n%s", i, cases[i].says, err);
        CHECK(strstr(err, "tandem demo: ") == err && strstr(err, "usage: tandem demo STORE [SEQ]"),
              "case %zu: not 'tandem demo: ...' and the usage line:\n%s", i, err);
        cli_args_free(&a);
    }
}

/* An option the positionals name ("STORE --keep N": a required one) shows there alone, not
 * also in brackets as optional (gc, export, prep and tokenize showed "[--keep N]" and the
 * like for options they refuse to go without); a name that merely contains it does not count. */
static void test_required_options_in_the_usage_line(void) {
    cli_spec req = SPEC;
    req.args = "STORE --keep N";
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    cli_usage(&req, f);
    fclose(f);
    CHECK(strstr(text, "usage: tandem demo STORE --keep N [--format table|csv|json] [--verify] [--ratio X]") &&
              !strstr(text, "[--keep"),
          "usage line:\n%s", text);
    free(text);
    req.args = "STORE --keeper";
    f = open_memstream(&text, &n);
    cli_usage(&req, f);
    fclose(f);
    CHECK(strstr(text, "[--keep N]"), "--keeper hid --keep:\n%s", text);
    free(text);
}

static void test_help_comes_from_the_rows(void) {
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    cli_help(&SPEC, f);
    fclose(f);
    CHECK(strstr(text, "usage: tandem demo STORE [SEQ] [--format table|csv|json] [--verify] [--keep N] "
                       "[--ratio X] [--set key=value ...] [--precision fp32|bf16 ...]"),
          "usage line:\n%s", text);
    CHECK(strstr(text, "\nAbout it.\n"), "about");
    for (size_t i = 0; OPTS[i].name; i++)
        CHECK(strstr(text, OPTS[i].name), "--help lacks %s", OPTS[i].name);
    CHECK(strstr(text, "  --keep N                states to keep\n"
                       "                          second line\n"),
          "aligned help with its continuation:\n%s", text);
    CHECK(strstr(text, "  --a-rather-long-option-name VALUE\n                          help on the next line"),
          "a long name puts its help on the next line:\n%s", text);
    CHECK(strstr(text, "MORE HELP"), "more_help");
    free(text);
    /* --help anywhere wins, and prints to stdout (exit 0 for the command) */
    cli_args a;
    char err[256];
    fflush(stdout);
    int saved = dup(1);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), 1);
    int rc = parse(&a, err, sizeof err, "--keep", "0", "--help", NULL);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    fclose(tmp);
    CHECK(rc == 2, "an error before --help still errs (rc %d)", rc);
    cli_args_free(&a);
    saved = dup(1);
    tmp = tmpfile();
    dup2(fileno(tmp), 1);
    rc = parse(&a, err, sizeof err, "--help", "--keep", "0", NULL);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    fclose(tmp);
    CHECK(rc == -1, "--help first: rc %d", rc);
    cli_args_free(&a);
}

/* An option that holds one value, given twice, is a usage error naming it and both values
 * (last-wins ran `run --store a --store b` into b); lists, aliases and switches repeat. */
static void test_once_options(void) {
    static const char *const twice[][5] = {
        {"--format", "csv", "--format", "json", "--format"},
        {"--keep", "2", "--keep", "3", "--keep"},
        {"--keep=2", "--keep", "2", NULL, "--keep"},
        {"--ratio", "0.5", "--ratio=0.5", NULL, "--ratio"},
        {"--a-rather-long-option-name", "x", "--a-rather-long-option-name", "y", "--a-rather-long-option-name"},
    };
    for (size_t i = 0; i < sizeof twice / sizeof *twice; i++) {
        cli_args a;
        char err[1024], want[128];
        int rc = parse(&a, err, sizeof err, "st", twice[i][0], twice[i][1], twice[i][2], twice[i][3], NULL);
        snprintf(want, sizeof want, "tandem demo: %s given twice", twice[i][4]);
        CHECK(rc == 2 && strstr(err, want) && strstr(err, "give it once") && strstr(err, "usage:"),
              "%s twice: rc %d: %s", twice[i][4], rc, err);
        cli_args_free(&a);
    }
    cli_args a;
    char err[1024];
    int rc = parse(&a, err, sizeof err, "st", "--set", "a=1", "--set", "a=2", "--precision", "bf16",
                   "--precision", "fp32", "--verify", "--verify", NULL);
    int n = 0;
    char **l = cli_list(&a, "--set", &n);
    CHECK(rc == 0 && n == 4 && !strcmp(l[3], "run.precision=fp32") && cli_given(&a, "--verify") == 2,
          "lists repeat: rc %d n %d: %s", rc, n, err);
    cli_args_free(&a);
}

/* A range from 0 takes digits alone, as pin and --final-seed do: run --point -0 was read
 * as point 0 (args_parse_long takes a sign); a range below 0 still takes "-0". */
static void test_no_sign_from_zero(void) {
    cli_args a;
    int rc;
    static const cli_opt ZOPTS[] = {
        {"--point", CLI_INT, "I", "from 0", NULL, 0, 9, NULL, NULL},
        {"--shift", CLI_INT, "N", "signed", NULL, -5, 5, NULL, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
    };
    static const cli_spec ZSPEC = {"zero", "", 0, 0, NULL, NULL, ZOPTS, NULL};
    char *bad[][3] = {{"zero", "--point", "-0"}, {"zero", "--point=-0", NULL}};
    for (int i = 0; i < 2; i++) {
        fflush(stderr);
        int saved = dup(2);
        FILE *sink = tmpfile();
        dup2(fileno(sink), 2);
        rc = cli_parse(&ZSPEC, bad[i][2] ? 3 : 2, bad[i], &a);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        fclose(sink);
        CHECK(rc == 2, "%s %s: rc %d", bad[i][1], bad[i][2] ? bad[i][2] : "", rc);
        cli_args_free(&a);
    }
    char *ok[] = {"zero", "--shift", "-0", "--point", "0"};
    rc = cli_parse(&ZSPEC, 5, ok, &a);
    CHECK(rc == 0 && cli_int(&a, "--shift", 9) == 0 && cli_int(&a, "--point", 9) == 0, "signed range: rc %d", rc);
    cli_args_free(&a);
}

/* Counts with suffixes (gen-corpus, prep): the boundaries of uint64 and every suffix. */
static void test_counts(void) {
    struct {
        const char *s;
        int ok;
        uint64_t v;
    } cases[] = {
        {"0", 1, 0}, {"10M", 1, 10000000}, {"1k", 1, 1000}, {"1K", 1, 1000}, {"64Ki", 1, 65536},
        {"3Mi", 1, 3u << 20}, {"2Gi", 1, 2ull << 30}, {"5G", 1, 5000000000ull},
        {"18446744073709551615", 1, UINT64_MAX}, {"18446744073709551616", 0, 0},
        {"18446744073709552G", 0, 0}, {"", 0, 0}, {"-1", 0, 0}, {"+1", 0, 0}, {"1kb", 0, 0},
        {"1Ti", 0, 0}, {"1i", 0, 0}, {"k", 0, 0}, {"1 k", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t v = 12345;
        int ok = args_parse_count(cases[i].s, &v) == 0;
        CHECK(ok == cases[i].ok && (!ok || v == cases[i].v), "'%s': ok %d value %llu", cases[i].s, ok,
              (unsigned long long)v);
    }
}

/* The strict whole-string conversions: a sign is judged after the leading blanks (which
 * strtoull skips, and then takes the sign), so " -1" cannot wrap to 2^64-1; blanks before
 * a number stay allowed (an older pinned config may hold " 2"), after it they do not. */
static void test_strict_numbers(void) {
    uint64_t u = 7;
    long l = 7;
    double d = 7;
    CHECK(args_parse_u64(" -1", &u) && args_parse_u64("\t-1", &u) && args_parse_u64("-1", &u) &&
              args_parse_u64(" +5", &u) && args_parse_u64("+5", &u) && args_parse_u64("", &u) &&
              args_parse_u64("  ", &u) && args_parse_u64("5 ", &u) && args_parse_u64("1.5", &u) &&
              args_parse_u64("18446744073709551616", &u) && u == 7,
          "u64 took a bad string (value %llu)", (unsigned long long)u);
    CHECK(args_parse_u64("18446744073709551615", &u) == 0 && u == UINT64_MAX, "u64 max");
    CHECK(args_parse_u64(" 5", &u) == 0 && u == 5, "u64 after a blank");
    CHECK(args_parse_long(" -", &l) && args_parse_long("-", &l) && args_parse_long("1.5", &l) &&
              args_parse_long("5 ", &l) && l == 7,
          "long took a bad string (value %ld)", l);
    CHECK(args_parse_long("-5", &l) == 0 && l == -5 && args_parse_long("+5", &l) == 0 && l == 5 &&
              args_parse_long("\t-5", &l) == 0 && l == -5, "long");
    CHECK(args_parse_double("inf", &d) && args_parse_double(" -inf", &d) && args_parse_double(".", &d) &&
              args_parse_double("-", &d) && args_parse_double("0x", &d) && args_parse_double("1 ", &d) && d == 7,
          "double took a bad string (value %g)", d);
    CHECK(args_parse_double("0x1p-3", &d) && args_parse_double("0X10", &d) && args_parse_double("1e999", &d),
          "a hex float or an overflow was read as a number");
    CHECK(args_parse_double("1e-320", &d) == 0 && d > 0 && d < 1e-300, "a subnormal was refused");
    CHECK(args_parse_double("-.5", &d) == 0 && d == -0.5 && args_parse_double("1e-3", &d) == 0 &&
              d == 1e-3 && args_parse_double("5.", &d) == 0 && d == 5 && args_parse_double(" 0.05", &d) == 0 &&
              d == 0.05,
          "double: %g", d);
}

/* Sweeps: the product in order (the first key slowest), the labels, the point from the
 * scheduler's environment, and every refusal. */
static void test_sweeps(void) {
    char *texts[] = {"run.seed=1,2,3", "tandem.lr_alpha=2e-3,4e-3"};
    sweep s;
    tdm_err e = {0};
    CHECK(sweep_parse(&s, texts, 2, &e) == 0 && s.npoints == 6, "parse: %s", e.msg);
    char sets[2][512], label[256];
    sweep_point_sets(&s, 3, sets, sizeof sets[0]);
    CHECK(!strcmp(sets[0], "run.seed=2") && !strcmp(sets[1], "tandem.lr_alpha=4e-3"), "point 3: %s %s",
          sets[0], sets[1]);
    sweep_label(&s, 5, label, sizeof label);
    CHECK(!strcmp(label, "run.seed=3,tandem.lr_alpha=4e-3"), "label 5: %s", label);
    size_t at = 99;
    unsetenv("TANDEM_POINT");
    unsetenv("JOB_COMPLETION_INDEX");
    setenv("SLURM_ARRAY_TASK_ID", "4", 1);
    CHECK(sweep_point_index(&s, -1, &at, &e) == 0 && at == 4, "from SLURM_ARRAY_TASK_ID: %zu %s", at, e.msg);
    setenv("TANDEM_POINT", "1", 1);
    CHECK(sweep_point_index(&s, -1, &at, &e) == 0 && at == 1, "TANDEM_POINT first: %zu", at);
    CHECK(sweep_point_index(&s, 2, &at, &e) == 0 && at == 2, "--point wins: %zu", at);
    setenv("TANDEM_POINT", "6", 1);
    CHECK(sweep_point_index(&s, -1, &at, &e) == ERR_USAGE && strstr(e.msg, "0..5"), "out of range: %s", e.msg);
    unsetenv("TANDEM_POINT");
    unsetenv("SLURM_ARRAY_TASK_ID");
    CHECK(sweep_point_index(&s, -1, &at, &e) == ERR_USAGE && strstr(e.msg, "--point"), "none: %s", e.msg);
    sweep_free(&s);
    char *path[] = {"data.dataset=a/b.yaml,c d.yaml"};
    CHECK(sweep_parse(&s, path, 1, &e) == 0, "a path value: %s", e.msg);
    sweep_label(&s, 1, label, sizeof label);
    CHECK(!strcmp(label, "data.dataset=c_d.yaml"), "no '/' or blank in a label: %s", label);
    sweep_label(&s, 0, label, sizeof label);
    CHECK(!strcmp(label, "data.dataset=a_b.yaml"), "label 0: %s", label);
    sweep_free(&s);
    struct {
        char *t[2];
        int n;
        const char *says;
    } bad[] = {
        {{"run.seed"}, 1, "expected key=value1"},    {{"=1,2"}, 1, "expected key=value1"},
        {{"run.seed=1,,2"}, 1, "an empty value"},    {{"run.seed=1,1"}, 1, "the value 1 twice"},
        {{"cluster.nodes=1,2"}, 1, "where a run lives"}, {{"store=a,b"}, 1, "where a run lives"},
        {{"run.seed=1,2", "run.seed=3"}, 2, "swept twice"},
        /* two values one label (one store for two points), a label past a file name */
        {{"data.dataset=c/d.yaml,c_d.yaml"}, 1, "would name the same point store"},
        {{"log.tensorboard=tb/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
          "aaaaaaaa,tb/b"}, 1, "more than 200"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(sweep_parse(&s, bad[i].t, bad[i].n, &e) == ERR_USAGE && strstr(e.msg, bad[i].says),
              "case %zu: %s", i, e.msg);
        sweep_free(&s);
    }
    /* a refused --sweep of a key whose value may hold a pasted secret (cluster.env, store,
     * data.mixture_file) names the key, never the value (the whole text was echoed) */
    char *secret[][1] = {{"cluster.env=AWS_SECRET_ACCESS_KEY=s3cr3t-a"}, {"store=s3://AKIA:s3cr3t-b@bkt/x,y"},
                         {"data.mixture_file=s3cr3t-c,s3cr3t-c"}};
    for (size_t i = 0; i < sizeof secret / sizeof *secret; i++) {
        CHECK(sweep_parse(&s, secret[i], 1, &e) == ERR_USAGE && strstr(e.msg, "=...") && !strstr(e.msg, "s3cr3t"),
              "secret %zu: %s", i, e.msg);
        sweep_free(&s);
    }
}

int main(void) {
    RUN(test_sweeps);
    RUN(test_counts);
    RUN(test_once_options);
    RUN(test_no_sign_from_zero);
    RUN(test_strict_numbers);
    RUN(test_every_kind_and_form);
    RUN(test_usage_errors_say_what_is_wrong);
    RUN(test_help_comes_from_the_rows);
    RUN(test_required_options_in_the_usage_line);
    return test_summary("test_cli_opts");
}
