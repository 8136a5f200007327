/* opts.c — the one command-line parser; see opts.h. */
#include "cli/opts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/args.h"

static int nopts(const cli_spec *s) {
    int n = 0;
    while (s->opts && s->opts[n].name) n++;
    return n;
}

static int find(const cli_spec *s, const char *name, size_t len) {
    for (int i = 0; s->opts && s->opts[i].name; i++)
        if (strlen(s->opts[i].name) == len && !strncmp(s->opts[i].name, name, len)) return i;
    return -1;
}

/* The index of a name the command itself asks for: a name not in its spec is a bug. */
static int must_find(const cli_args *a, const char *name) {
    int i = find(a->spec, name, strlen(name));
    if (i < 0) {
        fprintf(stderr, "tandem %s: internal error: no option %s in the command's table\n",
                a->spec->name, name);
        abort();
    }
    return i;
}

static void metavar(const cli_opt *o, FILE *f) {
    if (o->kind == CLI_SWITCH) return;
    fprintf(f, " %s", o->metavar ? o->metavar : o->choices ? o->choices : "VALUE");
}

/* Whether the usage line's positionals (s->args, "STORE --keep N") name the option: a
 * required one, shown there as such rather than in brackets as optional. */
static int required_in_args(const cli_spec *s, const char *name) {
    size_t n = strlen(name);
    for (const char *p = s->args; p && (p = strstr(p, name)); p += n)
        if ((p == s->args || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    return 0;
}

void cli_usage(const cli_spec *s, FILE *f) {
    fprintf(f, "usage: tandem %s", s->name);
    if (s->args && *s->args) fprintf(f, " %s", s->args);
    for (int i = 0; s->opts && s->opts[i].name; i++) {
        if (required_in_args(s, s->opts[i].name)) continue; /* shown in args, without brackets */
        fprintf(f, " [%s", s->opts[i].name);
        metavar(&s->opts[i], f);
        fprintf(f, "%s]", s->opts[i].kind == CLI_LIST || s->opts[i].kind == CLI_ALIAS ? " ..." : "");
    }
    fputc('\n', f);
}

void cli_help(const cli_spec *s, FILE *f) {
    cli_usage(s, f);
    if (s->about) fprintf(f, "\n%s\n", s->about);
    if (nopts(s)) fputc('\n', f);
    for (int i = 0; s->opts && s->opts[i].name; i++) {
        const cli_opt *o = &s->opts[i];
        char head[128];
        FILE *m = fmemopen(head, sizeof head, "w");
        if (m) {
            fprintf(m, "  %s", o->name);
            metavar(o, m);
            fclose(m);
        } else {
            snprintf(head, sizeof head, "  %s", o->name);
        }
        const char *h = o->help ? o->help : "";
        int w = (int)strlen(head);
        /* the help beside the name when it fits, else on the next line; continuation
         * lines under the first */
        if (w > 25) fprintf(f, "%s\n%26s", head, "");
        else fprintf(f, "%-26s", head);
        for (const char *nl; (nl = strchr(h, '\n')); h = nl + 1) fprintf(f, "%.*s\n%26s", (int)(nl - h), h, "");
        fprintf(f, "%s\n", h);
    }
    if (s->more_help) {
        fputc('\n', f);
        s->more_help(f);
    }
}

static int add_owned(cli_args *a, char *str) {
    char **o = realloc(a->owned, (size_t)(a->nowned + 1) * sizeof *o);
    if (!o) return -1;
    a->owned = o;
    o[a->nowned++] = str;
    return 0;
}

static int push(cli_args *a, int i, char *v) {
    char **l = realloc(a->list[i], (size_t)(a->nlist[i] + 1) * sizeof *l);
    if (!l) return -1;
    a->list[i] = l;
    l[a->nlist[i]++] = v;
    return 0;
}

static int is_choice(const char *choices, const char *v) {
    size_t n = strlen(v);
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t k = bar ? (size_t)(bar - c) : strlen(c);
        if (k == n && !strncmp(c, v, n)) return 1;
        if (!bar) break;
        c = bar + 1;
    }
    return 0;
}

/* One option's value into *a; a message into err (cap bytes) when it is not valid. */
static int take(cli_args *a, int i, const char *v, char *err, size_t cap) {
    const cli_opt *o = &a->spec->opts[i];
    /* an option that holds one value, given twice: which one the user meant is a guess
     * (last-wins wrote a run into the second --store); lists, aliases and switches repeat */
    if (a->count[i] && (o->kind == CLI_STR || o->kind == CLI_INT || o->kind == CLI_NUM)) {
        snprintf(err, cap, "%s given twice ('%.200s', then '%.200s'): give it once", o->name, a->value[i], v);
        return -1;
    }
    a->count[i]++;
    a->value[i] = v;
    switch (o->kind) {
    case CLI_SWITCH:
        return 0;
    case CLI_STR:
        if (o->choices && !is_choice(o->choices, v)) {
            snprintf(err, cap, "%s: '%s' is not one of %s", o->name, v, o->choices);
            return -1;
        }
        return 0;
    case CLI_INT: {
        long x = 0;
        /* "-0" is no count, index or seed, as pin and --final-seed say: a range that
         * starts at 0 takes digits alone */
        if (args_parse_long(v, &x) || x < o->min || x > o->max || (o->min >= 0 && v[0] == '-')) {
            snprintf(err, cap, "%s: '%s' is not an integer in %.0f..%.0f", o->name, v, o->min, o->max);
            return -1;
        }
        a->num[i] = (double)x;
        return 0;
    }
    case CLI_NUM: {
        double x = 0;
        if (args_parse_double(v, &x) || x < o->min || x > o->max) {
            snprintf(err, cap, "%s: '%s' is not a number in %g..%g", o->name, v, o->min, o->max);
            return -1;
        }
        a->num[i] = x;
        return 0;
    }
    case CLI_LIST:
        if (push(a, i, (char *)v)) goto oom;
        return 0;
    case CLI_ALIAS: {
        int t = find(a->spec, o->target, strlen(o->target));
        size_t n = strlen(o->prefix ? o->prefix : "") + strlen(v) + 1;
        char *kv = malloc(n);
        if (t < 0 || !kv || add_owned(a, kv)) {
            free(kv);
            goto oom;
        }
        snprintf(kv, n, "%s%s", o->prefix ? o->prefix : "", v);
        a->count[t]++;
        if (push(a, t, kv)) goto oom;
        return 0;
    }
    }
oom:
    snprintf(err, cap, "out of memory for %s", o->name);
    return -1;
}

int cli_parse(const cli_spec *s, int argc, char **argv, cli_args *a) {
    memset(a, 0, sizeof *a);
    a->spec = s;
    char err[512] = "";
    int options_end = 0;
    if (nopts(s) > CLI_MAX_OPTS) {
        snprintf(err, sizeof err, "internal error: more than %d options", CLI_MAX_OPTS);
        goto bad;
    }
    for (int k = 1; k < argc; k++) {
        const char *w = argv[k];
        if (!options_end && (!strcmp(w, "--help") || !strcmp(w, "-h"))) {
            cli_help(s, stdout);
            return -1;
        }
        if (!options_end && !strcmp(w, "--")) {
            options_end = 1;
            continue;
        }
        if (options_end || strncmp(w, "--", 2) != 0) {
            if (a->nargs >= s->max_args || a->nargs >= CLI_MAX_ARGS) {
                if (s->max_args >= CLI_MAX_ARGS) /* a list (FILE...), cut off: say where, not "unexpected" */
                    snprintf(err, sizeof err, "at most %d arguments (%.200s): '%.200s' is one more; split the list",
                             CLI_MAX_ARGS, s->args, w);
                else
                    snprintf(err, sizeof err, "unexpected argument '%s'", w);
                goto bad;
            }
            a->arg[a->nargs++] = w;
            continue;
        }
        const char *eq = strchr(w, '=');
        size_t len = eq ? (size_t)(eq - w) : strlen(w);
        int i = find(s, w, len);
        if (i < 0) {
            snprintf(err, sizeof err, "unknown option %.*s (see tandem %s --help)", (int)len, w, s->name);
            goto bad;
        }
        const char *v = NULL;
        if (s->opts[i].kind == CLI_SWITCH) {
            if (eq) {
                snprintf(err, sizeof err, "%s takes no value", s->opts[i].name);
                goto bad;
            }
        } else if (eq) {
            v = eq + 1;
        } else if (k + 1 < argc) {
            v = argv[++k];
        } else {
            snprintf(err, sizeof err, "%s needs a value", s->opts[i].name);
            goto bad;
        }
        if (take(a, i, v, err, sizeof err)) goto bad;
    }
    {
        /* --json and the generic --format row name one choice: they must not disagree */
        int jf = find(s, "--json", 6), ff = find(s, "--format", 8);
        if (jf >= 0 && ff >= 0 && s->opts[ff].choices && !strcmp(s->opts[ff].choices, "table|json") &&
            a->count[jf] && a->count[ff] && strcmp(a->value[ff], "json")) {
            snprintf(err, sizeof err, "--json and --format %s disagree: give one", a->value[ff]);
            goto bad;
        }
    }
    if (a->nargs < s->min_args) {
        snprintf(err, sizeof err, "%s", s->missing ? s->missing : "missing arguments");
        goto bad;
    }
    return 0;
bad:
    fprintf(stderr, "tandem %s: %s\n", s->name, err);
    cli_usage(s, stderr);
    return 2;
}

int cli_run(const cli_spec *spec, int (*fn)(const cli_args *a), int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(spec, argc, argv, &a);
    if (rc == 0) rc = fn(&a);
    else if (rc < 0) rc = 0; /* --help */
    cli_args_free(&a);
    return rc;
}

void cli_args_free(cli_args *a) {
    for (int i = 0; i < CLI_MAX_OPTS; i++) free(a->list[i]);
    for (int i = 0; i < a->nowned; i++) free(a->owned[i]);
    free(a->owned);
    memset(a, 0, sizeof *a);
}

int cli_json(const cli_args *a) {
    int jf = find(a->spec, "--json", 6), ff = find(a->spec, "--format", 8);
    return (jf >= 0 && a->count[jf] > 0) || (ff >= 0 && a->value[ff] && !strcmp(a->value[ff], "json"));
}

int cli_given(const cli_args *a, const char *name) { return a->count[must_find(a, name)]; }

const char *cli_str(const cli_args *a, const char *name, const char *dflt) {
    int i = must_find(a, name);
    return a->count[i] ? a->value[i] : dflt;
}

long cli_int(const cli_args *a, const char *name, long dflt) {
    int i = must_find(a, name);
    return a->count[i] ? (long)a->num[i] : dflt;
}

double cli_num(const cli_args *a, const char *name, double dflt) {
    int i = must_find(a, name);
    return a->count[i] ? a->num[i] : dflt;
}

char **cli_list(const cli_args *a, const char *name, int *n) {
    int i = must_find(a, name);
    *n = a->nlist[i];
    return a->list[i];
}
