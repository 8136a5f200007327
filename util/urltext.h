/* urltext.h — one rule shared by the store URL parser (storage/url.c) and the config
 * checks of store and data.mixture_file (config/config_keys.c), which cannot link the
 * storage layer. */
#ifndef TANDEM_UTIL_URLTEXT_H
#define TANDEM_UTIL_URLTEXT_H

#include <string.h>

/* Whether the authority of a URL (the text after "://", up to its first '/') holds user
 * info: an '@', or a ':' — no bucket name and no local host holds either, and a secret key
 * may itself hold '/' ("s3://AKID:abc/def@bucket"), so '@' alone is not enough. */
static inline int url_authority_has_userinfo(const char *auth) {
    size_t n = strcspn(auth, "/");
    return memchr(auth, '@', n) != NULL || memchr(auth, ':', n) != NULL;
}

#endif
