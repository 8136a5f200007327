/* s3_env.h — the S3 test server's environment for the tests that start it
 * (tests/s3/start.sh writes "export K='V'" lines into SERVER/env). */
#ifndef TANDEM_TESTS_S3_ENV_H
#define TANDEM_TESTS_S3_ENV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads the "export K='V'" lines of the server's env file into the environment, and
 * points AWS_ENDPOINT_URL at the server. -1 when the file cannot be read. */
static inline int s3_load_env(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "export ", 7) != 0) continue;
        char *k = line + 7, *eq = strchr(k, '=');
        if (!eq) continue;
        *eq = '\0';
        char *v = eq + 1;
        size_t n = strlen(v);
        while (n && (v[n - 1] == '\n' || v[n - 1] == '\r')) v[--n] = '\0';
        if (n >= 2 && v[0] == '\'' && v[n - 1] == '\'') v[n - 1] = '\0', v++;
        setenv(k, v, 1);
    }
    fclose(f);
    setenv("AWS_ENDPOINT_URL", getenv("TANDEM_S3_ENDPOINT"), 1);
    return 0;
}

#endif
