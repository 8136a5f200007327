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
 *   - a word TOKEN or ending in it (HF_TOKEN, GITHUBTOKEN; TOKENIZERS_PARALLELISM and
 *     MAX_TOKENS are none);
 *   - a word PASS, PAT, CREDENTIAL or CREDENTIALS (SMTP_PASS, GITHUB_PAT; not BYPASS);
 *   - a last word KEY or KEYS after another (WANDB_KEY, AZURE_STORAGE_KEY);
 *   - API, ACCESS, PRIVATE, AUTH, SIGNING or ENCRYPTION followed by KEY, KEYS or KEYID, or
 *     one word ending so (APIKEY, AWS_ACCESS_KEY_ID);
 * unless its last word is FILE, PATH, DIR, DIRECTORY, URI or URL, or it is
 * GOOGLE_APPLICATION_CREDENTIALS: then it names where a secret lies
 * (AWS_SHARED_CREDENTIALS_FILE, AWS_CONTAINER_CREDENTIALS_FULL_URI), not the secret. */
bool secret_env_name(const char *name, size_t n);

#endif
