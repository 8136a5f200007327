/* s3_config.c — an s3:// store's settings: the wipe of their secrets, no core dumps while
 * a process holds one; see s3_config.h (s3_resolve.c fills the struct). */
#include "storage/s3_config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>

void s3_config_no_core_dumps(void) {
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
}

extern char **environ;

/* Every variable whose name says it holds a secret, not only the two AWS keys: the
 * container authorization token (AWS_CONTAINER_AUTHORIZATION_TOKEN), AWS_SECURITY_TOKEN,
 * a password set for some other tool. A process that never opens an S3 store (a file-store
 * run, manifest, prep) still holds its environment, and a core dump would hold it too. */
int s3_config_env_has_secret(void) {
    static const char *const marks[] = {"SECRET", "TOKEN", "PASSWORD", "PASSWD"};
    for (char **v = environ; v && *v; v++) {
        const char *eq = strchr(*v, '=');
        if (!eq || !eq[1]) continue; /* empty: nothing to keep */
        char name[256];
        size_t n = (size_t)(eq - *v) < sizeof name - 1 ? (size_t)(eq - *v) : sizeof name - 1;
        for (size_t i = 0; i < n; i++) name[i] = (char)toupper((unsigned char)(*v)[i]);
        name[n] = '\0';
        for (size_t i = 0; i < sizeof marks / sizeof *marks; i++)
            if (strstr(name, marks[i])) return 1;
    }
    return 0;
}

void s3_config_wipe(s3_config *c) {
    volatile char *p;
    p = c->src_sk;
    for (size_t i = 0; i < sizeof c->src_sk; i++) p[i] = 0;
    p = c->src_tok;
    for (size_t i = 0; i < sizeof c->src_tok; i++) p[i] = 0;
    p = c->secret_key;
    for (size_t i = 0; i < sizeof c->secret_key; i++) p[i] = 0;
    p = c->session_token;
    for (size_t i = 0; i < sizeof c->session_token; i++) p[i] = 0;
}

void s3_config_redact(const s3_config *c, const char *extra, char *text, size_t cap) {
    static const char mark[] = "[redacted]";
    const size_t ml = sizeof mark - 1;
    const char *secrets[] = {c ? c->secret_key : "", c ? c->session_token : "", c ? c->src_sk : "",
                             c ? c->src_tok : "", extra ? extra : ""};
    for (size_t i = 0; i < sizeof secrets / sizeof *secrets; i++) {
        size_t sl = strlen(secrets[i]);
        if (sl < 8) continue; /* no secret is that short; a short one would match anywhere */
        for (char *p = text; (p = strstr(p, secrets[i]));) {
            size_t rest = strlen(p + sl);
            if ((size_t)(p - text) + ml + rest + 1 > cap) { /* no room: cut the text there */
                *p = '\0';
                break;
            }
            memmove(p + ml, p + sl, rest + 1);
            memcpy(p, mark, ml);
            p += ml;
        }
    }
    for (unsigned char *p = (unsigned char *)text; *p; p++)
        if (*p < 0x20 || *p >= 0x7f) *p = '?'; /* no escape sequences or line ends into a log */
}
