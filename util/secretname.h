/* secretname.h — whether an environment variable's name says its value is a secret: one rule
 * for the two places that judge names, cluster.env's refusal (config/cluster_check.c: no
 * credential in a config or a rendered job) and the no-core-dump check
 * (storage/s3_config.c: no core file may hold one). */
#ifndef TANDEM_UTIL_SECRETNAME_H
#define TANDEM_UTIL_SECRETNAME_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the `n`-byte variable name `name` names a secret. The name is read word by word
 * ('_' between, any case):
 *   - a word holding SECRET, PASSWORD, PASSWD or PASSPHRASE (DBPASSWORD, CLIENTSECRETS);
 *   - a word TOKEN or ending in it (HF_TOKEN, GITHUBTOKEN; TOKENIZERS_PARALLELISM is none);
 *   - a word PASS, CREDENTIAL or CREDENTIALS (SMTP_PASS; not BYPASS);
 *   - a key that says what it opens: API, ACCESS, PRIVATE, AUTH, SIGNING or ENCRYPTION
 *     followed by KEY, or one word ending so (APIKEY);
 * unless its last word is FILE, PATH, DIR or DIRECTORY: then it names where a secret lies
 * (AWS_SHARED_CREDENTIALS_FILE, PASSWORD_FILE), not the secret. */
bool secret_env_name(const char *name, size_t n);

#endif
