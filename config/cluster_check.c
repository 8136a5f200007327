/* cluster_check.c — the formats of the cluster.* strings; see cluster_check.h. */
#include "config/cluster_check.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "util/secretname.h"
#include "util/term.h"
#include "util/urltext.h"

static bool is_alnum_ascii(int ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

/* no character that does not show (util/term.h: controls, C1, separators, bidi) */
static bool no_controls(const char *s) {
    size_t at;
    unsigned cp;
    return !term_hidden_char(s, &at, &cp);
}

/* A size with an optional binary unit: "64G", "512M", "1024" (Slurm: megabytes). */
bool cluster_check_size(const char *s, char *why, size_t n) {
    const char *p = s;
    while (*p >= '0' && *p <= '9') p++;
    bool ok = !*s || (p > s && p - s <= 15 && s[0] != '0' &&
                      (!*p || (strchr("KMGT", *p) && !p[1])));
    if (!ok) snprintf(why, n, "expected a size: a positive integer with an optional unit K, M, G "
                              "or T (binary, as Slurm's --mem: 64G; no unit = megabytes), got "
                              "'%.100s'", s);
    return ok;
}

/* digits, at least one */
/* Past a field of 1-8 digits (8: ~190 years of minutes, so that the seconds computed
 * from a whole limit fit a long; a longer field overflowed it), or NULL. */
static const char *skip_digits(const char *p) {
    if (*p < '0' || *p > '9') return NULL;
    const char *from = p;
    while (*p >= '0' && *p <= '9') p++;
    return p - from <= 8 ? p : NULL;
}

/* Slurm's --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or UNLIMITED. */
bool cluster_check_slurm_time(const char *s, char *why, size_t n) {
    bool ok = !*s || !strcmp(s, "UNLIMITED") || !strcmp(s, "INFINITE");
    if (!ok) {
        const char *p = skip_digits(s);
        int colons = 0;
        bool days = p && *p == '-';
        if (days) p = skip_digits(p + 1);
        while (p && *p == ':' && colons < 2) p = skip_digits(p + 1), colons++;
        ok = p && !*p && (!days || colons <= 2);
    }
    if (!ok) snprintf(why, n, "expected a Slurm time limit: MINUTES, MM:SS, HH:MM:SS, D-HH, "
                              "D-HH:MM or D-HH:MM:SS (at most 8 digits a field), got '%.100s'", s);
    return ok;
}

long cluster_slurm_time_seconds(const char *s) {
    char why[8];
    if (!*s || !cluster_check_slurm_time(s, why, sizeof why) || !strcmp(s, "UNLIMITED") || !strcmp(s, "INFINITE"))
        return -1;
    long f[4] = {0}, days = 0;
    int nf = 0;
    const char *p = s;
    const char *dash = strchr(s, '-');
    if (dash) {
        days = strtol(s, NULL, 10);
        p = dash + 1;
    }
    while (*p && nf < 3) {
        f[nf++] = strtol(p, (char **)&p, 10);
        if (*p == ':') p++;
    }
    if (dash) /* D-HH[:MM[:SS]] */
        return ((days * 24 + f[0]) * 60 + f[1]) * 60 + f[2];
    if (nf == 1) return f[0] * 60;                     /* MINUTES */
    if (nf == 2) return f[0] * 60 + f[1];              /* MM:SS */
    return (f[0] * 60 + f[1]) * 60 + f[2];             /* HH:MM:SS */
}

/* A name for an #SBATCH line: letters, digits, '_', '.', '-'. */
bool cluster_check_slurm_name(const char *s, char *why, size_t n) {
    bool ok = strlen(s) <= 256;
    for (const char *p = s; ok && *p; p++) ok = is_alnum_ascii(*p) || strchr("_.-", *p);
    if (!ok) snprintf(why, n, "expected letters, digits, '_', '.' or '-' (at most 256), got "
                              "'%.100s'", s);
    return ok;
}

/* The same, or a comma-separated list of them (partitions). */
bool cluster_check_slurm_list(const char *s, char *why, size_t n) {
    bool ok = strlen(s) <= 256 && s[0] != ',' && (!*s || s[strlen(s) - 1] != ',');
    for (const char *p = s; ok && *p; p++) ok = is_alnum_ascii(*p) || strchr("_.,-", *p);
    if (!ok) snprintf(why, n, "expected names of letters, digits, '_', '.' and '-', separated by "
                              "',' (at most 256), got '%.100s'", s);
    return ok;
}

/* A DNS-1123 label (Kubernetes object names): [a-z0-9]([-a-z0-9]*[a-z0-9])?, <= 63. */
static bool dns_label(const char *s, size_t len) {
    if (len < 1 || len > 63 || s[0] == '-' || s[len - 1] == '-') return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

/* A job name: a DNS-1035 label (a letter first), as a Kubernetes Service name must be
 * (the headless Service of a multi-node Job bears it), and Job and pod names are. */
bool cluster_check_job_name(const char *s, char *why, size_t n) {
    bool ok = !*s || (dns_label(s, strlen(s)) && s[0] >= 'a' && s[0] <= 'z');
    if (!ok) snprintf(why, n, "expected a DNS label starting with a letter: at most 63 of a-z, "
                              "0-9 and '-', ending with a letter or digit, got '%.100s'", s);
    return ok;
}

/* A DNS-1123 subdomain: dot-separated labels, <= 253 (Secret and PVC names). */
static bool dns_subdomain(const char *s, size_t len) {
    if (len < 1 || len > 253) return false;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && s[j] != '.') j++;
        if (!dns_label(s + i, j - i)) return false;
        i = j + 1;
        if (j < len && i == len) return false; /* trailing dot */
    }
    return true;
}

bool cluster_check_dns_subdomain(const char *s, char *why, size_t n) {
    bool ok = !*s || dns_subdomain(s, strlen(s));
    if (!ok) snprintf(why, n, "expected a Kubernetes object name: at most 253 of a-z, 0-9, '-' "
                              "and '.', got '%.100s'", s);
    return ok;
}

/* The grammar of an image reference (the distribution project's reference grammar, as
 * the kubelet parses it):
 *   reference  := name [":" tag] ["@" digest]
 *   name       := [domain "/"] path-component ["/" path-component]*   (<= 255)
 *   domain     := host-component ["." host-component]* [":" port]     (letters of any case)
 *   path-component := [a-z0-9]+ (("." | "_" | "__" | "-"+) [a-z0-9]+)*
 *   tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
 *   digest     := algorithm ":" hex{32,}
 * The first part of the name is the domain when it holds '.' or ':', is "localhost", or has
 * capitals. A reference outside it is refused by no API server check: the pods stay in
 * InvalidImageName, so it is said here. */
static bool image_alnum_lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

static bool image_path_component(const char *s, size_t len) {
    size_t i = 0;
    if (len == 0 || !image_alnum_lower(s[0]) || !image_alnum_lower(s[len - 1])) return false;
    while (i < len) {
        if (image_alnum_lower(s[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < len && !image_alnum_lower(s[j])) j++;
        size_t sep = j - i;
        bool ok = (sep == 1 && (s[i] == '.' || s[i] == '_')) || (sep == 2 && s[i] == '_' && s[i + 1] == '_');
        for (size_t k = i; !ok && k < j && s[k] == '-'; k++) ok = k + 1 == j;
        if (!ok) return false;
        i = j;
    }
    return true;
}

static bool image_domain(const char *s, size_t len) {
    const char *colon = memchr(s, ':', len);
    size_t hlen = colon ? (size_t)(colon - s) : len;
    if (colon) {
        size_t plen = len - hlen - 1;
        if (plen == 0 || plen > 5) return false;
        for (size_t i = hlen + 1; i < len; i++)
            if (s[i] < '0' || s[i] > '9') return false;
    }
    for (size_t i = 0; i < hlen;) {
        size_t j = i;
        while (j < hlen && s[j] != '.') j++;
        if (j == i || !is_alnum_ascii(s[i]) || !is_alnum_ascii(s[j - 1])) return false;
        for (size_t k = i; k < j; k++)
            if (!is_alnum_ascii(s[k]) && s[k] != '-') return false;
        i = j + 1;
        if (j < hlen && i == hlen) return false; /* a trailing dot */
    }
    return hlen > 0;
}

bool cluster_check_image(const char *s, char *why, size_t n) {
    if (!*s) return true; /* none: tandem manifest k8s asks for one */
    size_t len = strlen(s);
    bool ok = len <= 1024;
    const char *at = ok ? strchr(s, '@') : NULL;
    size_t end = at ? (size_t)(at - s) : len; /* name[:tag] */
    if (ok && at) { /* algorithm:hex, as the runtime validates it (opencontainers go-digest):
                     * sha256, sha384 or sha512 and exactly their length of lowercase hex —
                     * the reference grammar alone lets through what the kubelet then refuses
                     * (InvalidImageName) */
        const char *d = at + 1, *c = strchr(d, ':');
        size_t hex = c ? strlen(c + 1) : 0;
        ok = c && ((c - d == 6 && !strncmp(d, "sha256", 6) && hex == 64) ||
                   (c - d == 6 && !strncmp(d, "sha384", 6) && hex == 96) ||
                   (c - d == 6 && !strncmp(d, "sha512", 6) && hex == 128));
        for (const char *p = c ? c + 1 : d; ok && *p; p++) ok = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f');
    }
    const char *slash = ok ? memrchr(s, '/', end) : NULL;
    const char *colon = ok ? memrchr(s, ':', end) : NULL;
    size_t name_end = end;
    if (ok && colon && (!slash || colon > slash)) { /* a tag */
        size_t tlen = end - (size_t)(colon + 1 - s);
        ok = tlen >= 1 && tlen <= 128 && (is_alnum_ascii(colon[1]) || colon[1] == '_');
        for (size_t i = 1; ok && i < tlen; i++) ok = is_alnum_ascii(colon[1 + i]) || strchr("_.-", colon[1 + i]);
        name_end = (size_t)(colon - s);
    }
    ok = ok && name_end >= 1 && name_end <= 255;
    size_t i = 0;
    if (ok) { /* the domain, when the first part is one */
        const char *first_end = memchr(s, '/', name_end);
        size_t flen = first_end ? (size_t)(first_end - s) : name_end;
        bool is_domain = first_end && (memchr(s, '.', flen) || memchr(s, ':', flen) ||
                                       (flen == 9 && !strncmp(s, "localhost", 9)));
        for (size_t k = 0; first_end && !is_domain && k < flen; k++) is_domain = s[k] >= 'A' && s[k] <= 'Z';
        if (is_domain) {
            ok = image_domain(s, flen);
            i = flen + 1;
        }
    }
    while (ok && i <= name_end) { /* the path components */
        const char *e = memchr(s + i, '/', name_end - i);
        size_t j = e ? (size_t)(e - s) : name_end;
        ok = image_path_component(s + i, j - i);
        i = j + 1;
    }
    /* shown with any user info masked ("https://u:SECRET@registry/img" is refused as no
     * reference, and its error went to the terminal and logs as given) */
    char shown[240];
    if (!ok) url_text_mask_userinfo(s, shown, sizeof shown);
    if (!ok) snprintf(why, n, "expected an image reference [registry[:port]/]name[:tag][@sha256:HEX] "
                              "with the name in lowercase (a-z, 0-9, '.', '_', '-') and a digest of 64 "
                              "lowercase hex digits (sha384: 96, sha512: 128), got '%.200s'", shown);
    return ok;
}

bool cluster_check_path(const char *s, char *why, size_t n) {
    bool ok = no_controls(s);
    if (!ok) snprintf(why, n, "expected a path without control characters");
    return ok;
}

/* A Kubernetes label name part: <= 63, alphanumeric at both ends, [-_.A-Za-z0-9] inside. */
static bool label_name(const char *s, size_t len) {
    if (len < 1 || len > 63 || !is_alnum_ascii(s[0]) || !is_alnum_ascii(s[len - 1])) return false;
    for (size_t i = 0; i < len; i++)
        if (!is_alnum_ascii(s[i]) && !strchr("-_.", s[i])) return false;
    return true;
}

/* A label key: [DNS-subdomain "/"] name. */
static bool label_key(const char *s, size_t len) {
    const char *slash = memchr(s, '/', len);
    if (!slash) return label_name(s, len);
    size_t plen = (size_t)(slash - s);
    return dns_subdomain(s, plen) && label_name(slash + 1, len - plen - 1);
}

static bool label_value(const char *s, size_t len) { return len == 0 || label_name(s, len); }

/* "key=value,key2=value2": node labels, each key once (a second value would silently
 * replace the first in the manifest), at most CLUSTER_LIST_MAX of them (the manifest
 * writer holds that many beside the ones cluster.cloud adds). */
bool cluster_check_labels(const char *s, char *why, size_t n) {
    bool ok = true;
    int count = 0;
    for (const char *p = s; ok && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        ok = eq && label_key(p, (size_t)(eq - p)) && label_value(eq + 1, len - (size_t)(eq - p) - 1);
        if (!ok) snprintf(why, n, "expected node labels 'key=value,...' (Kubernetes label keys "
                                  "and values), got '%.*s' in '%.100s'", (int)len, p, s);
        for (const char *q = s; ok && q < p;) { /* an earlier entry with the same key */
            const char *qend = strchr(q, ',');
            const char *qeq = memchr(q, '=', (size_t)(qend - q));
            if (qeq - q == eq - p && !strncmp(q, p, (size_t)(eq - p))) {
                ok = false;
                snprintf(why, n, "node label '%.*s' is given twice in '%.100s': give each key once",
                         (int)(eq - p), p, s);
            }
            q = qend + 1;
        }
        if (ok && ++count > CLUSTER_LIST_MAX) {
            ok = false;
            snprintf(why, n, "more than %d node labels in '%.60s...'", CLUSTER_LIST_MAX, s);
        }
        p = end ? end + 1 : p + len;
        if (ok && end && !*p) {
            ok = false;
            snprintf(why, n, "expected node labels 'key=value,...': a trailing ','");
        }
    }
    return ok;
}

/* "key[=value][:Effect],...": tolerations, at most CLUSTER_LIST_MAX. */
bool cluster_check_tolerations(const char *s, char *why, size_t n) {
    bool ok = true;
    int count = 0;
    for (const char *p = s; ok && *p;) {
        if (++count > CLUSTER_LIST_MAX) {
            snprintf(why, n, "more than %d tolerations in '%.60s...'", CLUSTER_LIST_MAX, s);
            return false;
        }
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        size_t kvlen = colon ? (size_t)(colon - p) : len;
        const char *eq = memchr(p, '=', kvlen);
        size_t klen = eq ? (size_t)(eq - p) : kvlen;
        ok = label_key(p, klen) && (!eq || label_value(eq + 1, kvlen - klen - 1));
        if (ok && colon) {
            size_t elen = len - kvlen - 1;
            ok = (elen == 10 && !strncmp(colon + 1, "NoSchedule", 10)) ||
                 (elen == 16 && !strncmp(colon + 1, "PreferNoSchedule", 16)) ||
                 (elen == 9 && !strncmp(colon + 1, "NoExecute", 9));
        }
        if (!ok) snprintf(why, n, "expected tolerations 'key[=value][:Effect],...' with Effect "
                                  "NoSchedule, PreferNoSchedule or NoExecute, got '%.*s' in "
                                  "'%.100s'", (int)len, p, s);
        p = end ? end + 1 : p + len;
        if (ok && end && !*p) {
            ok = false;
            snprintf(why, n, "expected tolerations 'key[=value][:Effect],...': a trailing ','");
        }
    }
    return ok;
}

/* Whether value v (len bytes) holds user info: a ':' before an '@' in any spelling
 * (util/urltext.h), or a URL whose authority carries an '@' before
 * its path, or a ':' followed by more than a port's digits (a password may hold '/', which
 * ends the authority before its '@'). A port ("http://host:9000") and an IPv6 host
 * ("http://[::1]:9000") are none. */
static bool value_has_userinfo(const char *v, size_t len) {
    const char *end = v + len;
    /* any spelling ("http:/u:S@h", "u:S@proxy:3128"): the "://" rule below missed them, and
     * the value went into the rendered job as given */
    if (url_text_has_userinfo(v, len)) return true;
    for (const char *q = v; (q = memmem(q, (size_t)(end - q), "://", 3)); q += 3) {
        const char *a = q + 3;
        size_t an = 0;
        while (a + an < end && a[an] != '/' && a[an] != '?' && a[an] != '#') an++;
        if (memchr(a, '@', an)) return true;
        if (an && a[0] == '[') { /* an IPv6 literal: its colons are the address's */
            const char *rb = memchr(a, ']', an);
            if (rb) an -= (size_t)(rb + 1 - a), a = rb + 1;
        }
        const char *colon = memchr(a, ':', an);
        for (const char *d = colon ? colon + 1 : a + an; d < a + an; d++)
            if (*d < '0' || *d > '9') return true;
    }
    return false;
}

size_t cluster_env_entry_len(const char *p) {
    size_t i = 0;
    while (p[i] && !(p[i] == ',' && (i == 0 || p[i - 1] != '\\'))) i++;
    return i;
}

void cluster_env_entry(const char *p, size_t len, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < len && o + 1 < cap; i++)
        if (!(p[i] == '\\' && i + 1 < len && p[i + 1] == ',')) out[o++] = p[i];
    if (cap) out[o] = '\0';
}

/* "NAME=value,...": extra environment. Values are never echoed: a person may have pasted
 * a secret by mistake, and an error message ends up in logs. */
bool cluster_check_env(const char *s, char *why, size_t n) {
    if (!no_controls(s)) {
        snprintf(why, n, "expected 'NAME=value,...' without control characters");
        return false;
    }
    for (const char *p = s; *p;) {
        size_t len = cluster_env_entry_len(p);
        const char *end = p[len] ? p + len : NULL;
        const char *eq = memchr(p, '=', len);
        size_t nlen = eq ? (size_t)(eq - p) : len;
        if (!eq && p > s) { /* "NO_PROXY=a,b": the ',' ended the value, "b" is no entry */
            snprintf(why, n, "the entry at offset %d has no '=': a ',' separates the entries, so a "
                             "value cannot hold one as is; write a ',' inside a value as '\\,' "
                             "(NO_PROXY=localhost\\,169.254.169.254)", (int)(p - s));
            return false;
        }
        bool ok = eq && nlen > 0 && nlen < CONFIG_KEY_MAX && !(p[0] >= '0' && p[0] <= '9');
        for (size_t i = 0; ok && i < nlen; i++) ok = is_alnum_ascii(p[i]) || p[i] == '_';
        if (!ok) {
            snprintf(why, n, "expected 'NAME=value,...' with NAME of letters, digits and '_' "
                             "(the entry at offset %d)", (int)(p - s));
            return false;
        }
        /* what the job sets itself: which rank, of how many, which point, how long the
         * grace; given here as well, a Kubernetes pod keeps the last definition (every pod
         * rank 0 of 1) and Slurm's export overrides the scheduler's */
        static const char *const own[] = {"TANDEM_RANK", "TANDEM_WORLD_SIZE", "TANDEM_COORDINATOR", "TANDEM_POINT",
                                          "TANDEM_GRACE_S", "JOB_COMPLETION_INDEX"};
        bool reserved = nlen > 6 && (!strncmp(p, "SLURM_", 6) || !strncmp(p, "OMPI_", 5) || !strncmp(p, "PMIX_", 5));
        for (size_t i = 0; !reserved && i < sizeof own / sizeof *own; i++)
            reserved = strlen(own[i]) == nlen && !strncmp(p, own[i], nlen);
        if (reserved) {
            snprintf(why, n, "'%.*s' is set by the job itself (the rank, world size, sweep point, grace or "
                             "the scheduler's own): leave it out of cluster.env", (int)nlen, p);
            return false;
        }
        for (const char *q = s; q < p;) { /* an earlier entry of the same name */
            const char *qend = q + cluster_env_entry_len(q);
            if ((size_t)(strchr(q, '=') - q) == nlen && !strncmp(q, p, nlen)) {
                snprintf(why, n, "'%.*s' is given twice: give each name once", (int)nlen, p);
                return false;
            }
            q = qend + 1;
        }
        if (secret_env_name(p, nlen)) { /* from a file or a Secret, never a config */
            snprintf(why, n, "'%.*s' looks like a credential: credentials never go into a config "
                             "or a rendered job; use cluster.credentials_file (Slurm) or "
                             "cluster.secret_name (Kubernetes)", (int)nlen, p);
            return false;
        }
        if (value_has_userinfo(eq + 1, len - nlen - 1)) { /* an endpoint or proxy with its password */
            snprintf(why, n, "'%.*s' holds a URL with user info (user:secret@host, or a token as the user name), which is refused and not "
                             "repeated here: credentials never go into a config or a rendered job; give the "
                             "URL without them and the credentials through cluster.credentials_file (Slurm) "
                             "or cluster.secret_name (Kubernetes)", (int)nlen, p);
            return false;
        }
        p = end ? end + 1 : p + len;
        if (end && !*p) {
            snprintf(why, n, "expected 'NAME=value,...': a trailing ','");
            return false;
        }
    }
    return true;
}
