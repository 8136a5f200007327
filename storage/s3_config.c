/* s3_config.c — an s3:// store's settings: the wipe of their secrets, no core dumps while
 * a process holds one; see s3_config.h (s3_resolve.c fills the struct). */
#include "storage/s3_config.h"

#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>

void s3_config_no_core_dumps(void) {
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
}

/* set and not empty */
static int env_set(const char *name) {
    const char *v = getenv(name);
    return v && *v;
}

int s3_config_env_has_secret(void) { return env_set("AWS_SECRET_ACCESS_KEY") || env_set("AWS_SESSION_TOKEN"); }

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
