/* secretname.c — see secretname.h. */
#include "util/secretname.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* the upper-cased word name[i..j) into w (cut to fit: no secret word is that long) */
static void secretname_word(const char *name, size_t i, size_t j, char *w, size_t cap) {
    size_t wl = j - i < cap - 1 ? j - i : cap - 1;
    for (size_t k = 0; k < wl; k++) w[k] = (char)toupper((unsigned char)name[i + k]);
    w[wl] = '\0';
}

static bool ends_with(const char *w, const char *tail) {
    size_t wl = strlen(w), tl = strlen(tail);
    return wl >= tl && !strcmp(w + wl - tl, tail);
}

bool secret_env_name(const char *name, size_t n) {
    static const char *const inside[] = {"SECRET", "PASSWORD", "PASSWD", "PASSPHRASE"};
    static const char *const whole[] = {"PASS", "PAT", "CREDENTIAL", "CREDENTIALS", "JWT", "BEARER", "COOKIE", "COOKIES"};
    static const char *const opens[] = {"API", "ACCESS", "PRIVATE", "AUTH", "SIGNING", "ENCRYPTION"};
    static const char *const keys[] = {"KEY", "KEYS", "KEYID"};
    static const char *const place[] = {"FILE", "PATH", "DIR", "DIRECTORY", "URI", "URL"};
    /* a name every tool reads as a path (Google's client libraries) */
    static const char *const paths[] = {"GOOGLE_APPLICATION_CREDENTIALS"};
    for (size_t k = 0; k < sizeof paths / sizeof *paths; k++)
        if (strlen(paths[k]) == n && !strncasecmp(name, paths[k], n)) return false;
    size_t last = n;
    while (last > 0 && name[last - 1] != '_') last--;
    char w[64], prev[64] = "";
    secretname_word(name, last, n, w, sizeof w);
    for (size_t k = 0; k < sizeof place / sizeof *place; k++)
        if (last > 0 && !strcmp(w, place[k])) return false;
    /* a last word KEY or KEYS after another word: WANDB_KEY, AZURE_STORAGE_KEY */
    if (last > 0 && (!strcmp(w, "KEY") || !strcmp(w, "KEYS"))) return true;
    for (size_t i = 0; i <= n;) {
        size_t j = i;
        while (j < n && name[j] != '_') j++;
        secretname_word(name, i, j, w, sizeof w);
        for (size_t k = 0; k < sizeof inside / sizeof *inside; k++)
            if (strstr(w, inside[k])) return true;
        if (ends_with(w, "TOKEN")) return true;
        /* MYSQL_PWD (the shell's own PWD is the working directory), a connection string
         * (AZURE_STORAGE_CONNECTION_STRING: its AccountKey=...) */
        if (!strcmp(w, "PWD") && n != 3) return true;
        if ((!strcmp(w, "STRING") && !strcmp(prev, "CONNECTION")) || !strcmp(w, "CONNSTR") ||
            ends_with(w, "CONNECTIONSTRING"))
            return true;
        for (size_t k = 0; k < sizeof whole / sizeof *whole; k++)
            if (!strcmp(w, whole[k])) return true;
        for (size_t k = 0; k < sizeof opens / sizeof *opens; k++)
            for (size_t q = 0; q < sizeof keys / sizeof *keys; q++) {
                char joined[80];
                snprintf(joined, sizeof joined, "%s%s", opens[k], keys[q]);
                if ((!strcmp(w, keys[q]) && !strcmp(prev, opens[k])) || ends_with(w, joined)) return true;
            }
        memcpy(prev, w, sizeof prev);
        i = j + 1;
    }
    return false;
}
