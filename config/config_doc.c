/* config_doc.c — what is written about the config from its schema table: --help,
 * docs/config.md's key and preset tables (tests/test_config.c fails on drift) and a
 * config as YAML; see config.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "config/config_impl.h"

/* Prints the words of `text` after `indent` spaces, wrapped before column `width`. */
static void print_wrapped(FILE *f, const char *text, int indent, int width) {
    int col = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        const char *w = p;
        while (*p && *p != ' ') p++;
        int len = (int)(p - w);
        if (!len) break;
        if (col && col + 1 + len > width) {
            fputc('\n', f);
            col = 0;
        }
        if (!col) col = fprintf(f, "%*s%.*s", indent, "", len, w);
        else col += fprintf(f, " %.*s", len, w);
    }
    if (col) fputc('\n', f);
}

/* A preset's assignments on one line, as a person would pass them to --set. */
typedef struct preset_text {
    char *buf;
    size_t n;
} preset_text;

static int text_one(const key_def *k, const ydoc_node *v, void *arg) {
    preset_text *t = arg;
    config_append(t->buf, t->n, "%s%s=%s", t->buf[0] ? " " : "", k->key, v->value);
    return 0;
}

/* Preset p's values as "key=value key=value ..." (for --help and docs/config.md). */
static void preset_line(int p, char *buf, size_t n) {
    buf[0] = '\0';
    preset_text t = {buf, n};
    tdm_err ignore;
    config_preset_each(p, text_one, &t, &ignore);
}


void config_print_help(FILE *f) {
    char allowed[512], line[2048];
    fprintf(f, "Configuration keys. In the YAML file each section is a map ('tandem:' then\n"
               "indented 'K: 5'); on the command line --set section.key=value. Later wins:\n"
               "defaults < preset < config file < --set (in order).\n\n");
    for (size_t i = 0; i < config_nkeys; i++) {
        const key_def *k = &config_schema[i];
        config_allowed_text(k, allowed, sizeof allowed);
        char head[128];
        if (!k->def) snprintf(head, sizeof head, "%s (required)", k->key);
        else snprintf(head, sizeof head, "%s = %s", k->key, k->def[0] ? k->def : "\"\"");
        snprintf(line, sizeof line, "%s%s%s", config_type_name(k->type),
                 k->type == T_ENUM ? " one of: " : allowed[0] ? " " : "", allowed);
        if (strlen(head) + strlen(line) < 84) {
            fprintf(f, "  %-34s %s\n", head, line);
        } else { /* long enum lists wrap below the key */
            fprintf(f, "  %s\n", head);
            print_wrapped(f, line, 6, 88);
        }
        print_wrapped(f, k->doc, 6, 88);
    }
    fprintf(f, "\nPresets (applied after the defaults, before the file's keys; which values\n"
               "are assumptions is said in docs/config.md):\n");
    for (int p = 1; p < CONFIG_PRESET_COUNT; p++) {
        fprintf(f, "  %s: %s\n", config_preset_names[p], config_preset_doc(p));
        preset_line(p, line, sizeof line);
        print_wrapped(f, line, 6, 88);
    }
}

void config_print_markdown(FILE *f) {
    char allowed[512], line[2048];
    fprintf(f, "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < config_nkeys; i++) {
        const key_def *k = &config_schema[i];
        config_allowed_text(k, allowed, sizeof allowed);
        fprintf(f, "| `%s` | %s | %s%s%s | %s | %s |\n", k->key, config_type_name(k->type),
                k->def ? "`" : "*required*", k->def ? (k->def[0] ? k->def : "\"\"") : "",
                k->def ? "`" : "", allowed, k->doc);
    }
    fprintf(f, "\n| preset | what | values |\n|---|---|---|\n");
    for (int p = 1; p < CONFIG_PRESET_COUNT; p++) {
        preset_line(p, line, sizeof line);
        fprintf(f, "| `%s` | %s | `%s` |\n", config_preset_names[p], config_preset_doc(p), line);
    }
}


void config_print_yaml(FILE *f, const config *c, const char *indent) {
    char value[CONFIG_STR_MAX];
    const char *section = NULL;
    size_t section_len = 0;
    for (size_t i = 0; i < config_nkeys; i++) {
        const key_def *k = &config_schema[i];
        const char *dot = strchr(k->key, '.');
        if (!dot && strcmp(k->key, "preset") != 0) continue; /* store */
        if (dot && (!section || (size_t)(dot - k->key) != section_len ||
                    strncmp(section, k->key, section_len) != 0)) {
            section = k->key;
            section_len = (size_t)(dot - k->key);
            fprintf(f, "%s%.*s:\n", indent, (int)section_len, section);
        }
        fprintf(f, "%s%s%s: ", indent, dot ? "  " : "", dot ? dot + 1 : k->key);
        if (k->type == T_STRING) {
            ydoc_quote(f, (const char *)config_field(c, k));
        } else {
            config_format_value(c, k, value, sizeof value);
            fputs(value, f);
        }
        fputc('\n', f);
    }
}
