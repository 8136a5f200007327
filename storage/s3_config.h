/* s3_config.h — where an s3:// store is and how to sign for it, resolved the way AWS
 * tools resolve it.
 *
 *   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), else the
 *                shared credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials)
 *                section AWS_PROFILE (default "default"), else the profile's role_arn
 *                (STS AssumeRole with source_profile / credential_source), its
 *                credential_process, else web identity — the
 *                profile's web_identity_token_file + role_arn in the config file, or
 *                AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (EKS IRSA): temporary
 *                credentials from STS AssumeRoleWithWebIdentity, refreshed before they
 *                expire (s3_creds.h); else container credentials (ECS, EKS Pod Identity:
 *                AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI); else the EC2
 *                instance role (IMDSv2) unless AWS_EC2_METADATA_DISABLED=true
 *   region       AWS_REGION, AWS_DEFAULT_REGION, else `region` of the profile in the config
 *                file (AWS_CONFIG_FILE or ~/.aws/config), else us-east-1
 *   endpoint     AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else `endpoint_url` of the profile,
 *                else https://s3.<region>.amazonaws.com
 *   addressing   TANDEM_S3_ADDRESSING=path|virtual; default virtual-hosted for AWS's own
 *                endpoints, path-style for any other endpoint (MinIO, s3rver, ...)
 *   tuning       TANDEM_S3_PART_MIB (multipart part size, default 16), TANDEM_S3_CONCURRENCY
 *                (parallel part transfers, default 8), TANDEM_S3_RETRIES (attempts per
 *                request, default 8), TANDEM_S3_TIMEOUT (seconds below 4 KiB/s before a
 *                transfer is abandoned and retried, default 30), TANDEM_S3_LIST_MAX (keys per
 *                listing page, default 1000, S3's maximum)
 *
 * Secrets live only in this struct's buffers and in the signing; s3_config_free wipes
 * them. No function here puts a secret into an error message. A process that holds a
 * secret cannot dump core (s3_config_no_core_dumps): a core file would hold the key.
 */
#ifndef TANDEM_STORAGE_S3_CONFIG_H
#define TANDEM_STORAGE_S3_CONFIG_H

#include <stddef.h>

#include "util/err.h"

/* The longest a key tandem writes adds to its store's prefix ("/quarantine/<epoch>/
 * blobs/<sha256>", with room), and so the longest prefix S3's 1024-byte keys allow. */
#define S3_KEY_SUFFIX_MAX 128
#define S3_PREFIX_MAX (1024 - S3_KEY_SUFFIX_MAX)

typedef struct s3_config {
    char bucket[256];
    char prefix[1024];       /* key prefix without leading/trailing '/', may be "" */
    char endpoint[1024];     /* scheme://host[:port], no trailing '/' */
    char host[512];          /* Host header for requests (virtual: bucket.host) */
    char base_url[1600];     /* URL up to and including the bucket part, no trailing '/' */
    int path_style;
    char region[64];
    char access_key[256];
    char secret_key[256];
    char session_token[4096]; /* "" when none */
    /* temporary credentials (s3_creds.h): their source, for messages, and their lifetime */
    int web_identity;          /* from STS AssumeRoleWithWebIdentity (IRSA) */
    int from_endpoint;         /* 1: container credentials, 2: EC2 instance metadata (IMDSv2),
                                * 3: the profile's credential_process */
    char process[1024];        /* credential_process: the command (run by /bin/sh -c) */
    /* role_arn + source_profile / credential_source: STS AssumeRole signed with the source
     * credentials (assume_role: 1 static keys of source_profile, 2 EcsContainer,
     * 3 Ec2InstanceMetadata, 4 Environment) */
    int assume_role;
    char src_ak[256], src_sk[256], src_tok[4096], external_id[256];
    char creds_url[1100];      /* the container credentials URL, or the IMDS endpoint */
    char creds_source[1400];   /* "the environment", "profile X of F", "web identity (...)" */
    char role_arn[512], token_file[1024], session_name[72], sts_endpoint[1024];
    double obtained, expires;  /* unix seconds; expires 0: never */
    /* when they were obtained on CLOCK_MONOTONIC, and their life then (expires - obtained):
     * their age is judged on it, so that a wall clock stepped back after the fetch does not
     * keep them past their expiry (a clock hunt: ExpiredToken, exit 3) */
    double obtained_mono, life_s;
    int refresh_now;           /* s3_creds_expire: refreshed before the next request */
    size_t part_bytes;
    int concurrency, retries, list_max;
    long timeout_s;
} s3_config;

/* Zeroes the secret buffers. */
void s3_config_wipe(s3_config *c);

/* Makes the calling process unable to write a core dump, for the rest of its life:
 * prctl(PR_SET_DUMPABLE, 0) (no core, whatever the core_pattern, and /proc/PID/mem,
 * environ and ptrace-attach are closed to unprivileged processes of the same user) and
 * RLIMIT_CORE 0. s3_config_resolve calls it once credentials are loaded, the credential
 * chain as soon as it reads a token to exchange (web identity, container authorization,
 * IMDS session), before the exchange; main() calls it at start when the environment
 * itself carries a secret. */
void s3_config_no_core_dumps(void);

/* 1 when a variable of the environment whose name has the word (between '_', any case)
 * SECRET, TOKEN, PASSWORD, PASSWD, PASS or CREDENTIALS, or API_KEY, ACCESS_KEY,
 * PRIVATE_KEY, AUTH_KEY (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
 * AWS_CONTAINER_AUTHORIZATION_TOKEN, WANDB_API_KEY among them) is set and not empty; else
 * 0. */
int s3_config_env_has_secret(void);

/* Text a server sent, made fit for an error message in place (cap: the buffer's size):
 * every occurrence of a secret this process holds or sent — c's secret keys and session
 * tokens (NULL c: none), `extra` (a web identity token; may be NULL) — becomes
 * "[redacted]", and so does any run of 12 or more of a secret's characters (a copy cut
 * short by a buffer, or the piece of a session token an endpoint chose to echo: its
 * middle as an error code), also where it was escaped as URLs, JSON or XML escape it
 * (%2F, \/, \u002F, &#47;: the escapes it spans go with it; one level, not an escape of
 * an escape, nor base64 of a secret); control and non-ASCII bytes become '?'. An endpoint that
 * echoes the session token it was sent (hostile, or merely chatty) puts no part of it
 * in a log. */
void s3_config_redact(const s3_config *c, const char *extra, char *text, size_t cap);

#endif
