/* s3_creds.h — temporary AWS credentials that a long run keeps fresh.
 *
 * Web identity (EKS IRSA, and any OIDC federation): a token file that the platform
 * rotates (AWS_WEB_IDENTITY_TOKEN_FILE, or the profile's web_identity_token_file) and a
 * role (AWS_ROLE_ARN / role_arn) are exchanged with STS AssumeRoleWithWebIdentity for an
 * access key, a secret and a session token that expire (IRSA: after 1 h). The exchange
 * is a POST of the form fields to the STS endpoint — AWS_ENDPOINT_URL_STS, else the
 * region's https://sts.REGION.amazonaws.com (AWS_STS_REGIONAL_ENDPOINTS=legacy: the global
 * https://sts.amazonaws.com) — so the token never sits in a URL. The answer's XML gives
 * the credentials and their Expiration.
 *
 * Container credentials and the EC2 instance role (IMDSv2) come as JSON from an HTTP
 * endpoint and expire the same way; they are refreshed the same way.
 *
 * s3_creds_current, called before every signed request, hands out the credentials and
 * fetches new ones first when a third of their lifetime (at most 5 minutes) is left, one
 * thread at a time, so a commit never signs with a key that ages during it — between the
 * parts of a multipart upload too. A refusal (the token expired or was revoked, the role
 * does not trust it) is one error naming the source and STS's code; only a transport
 * failure or a 5xx is retried, three times. Secrets and the token never reach a message.
 */
#ifndef TANDEM_STORAGE_S3_CREDS_H
#define TANDEM_STORAGE_S3_CREDS_H

#include <pthread.h>
#include <stddef.h>

#include "storage/s3_config.h"
#include "util/err.h"

/* 0 when endpoint `url` holds no user info, else ERR_USAGE naming `what` (the variable or
 * profile key it came from) and never the URL: an '@' anywhere, or a ':' before an '@' in
 * any spelling ("http:/u:S@h", "u:S@h"). Every endpoint the chain asks goes through it —
 * S3's, STS's, the container's, IMDS's: libcurl sends user info as Authorization: Basic,
 * and errors name the endpoint. */
int s3_endpoint_check_userinfo(const char *what, const char *url, tdm_err *e);

/* Fills the web identity fields of c (token_file and role_arn are set by the caller):
 * the session name (AWS_ROLE_SESSION_NAME, else tandem-<host>-<pid>), the STS endpoint,
 * the source text. profile: the profile it came from, NULL for the environment. */
int s3_creds_web_identity_init(s3_config *c, const char *profile, tdm_err *e);

/* Exchanges the token for credentials now (c's access_key, secret_key, session_token,
 * obtained, expires). ERR_USAGE for a token file that cannot be read, ERR_STORE for an
 * STS refusal or an STS that cannot be reached. */
int s3_creds_web_identity_fetch(s3_config *c, tdm_err *e);

/* Container credentials (ECS task roles, EKS Pod Identity): a GET of
 * AWS_CONTAINER_CREDENTIALS_FULL_URI (https, or http to a loopback or the ECS/EKS agent's
 * address) or http://169.254.170.2 + AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, with the
 * Authorization header from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read each time) or
 * _TOKEN; JSON AccessKeyId, SecretAccessKey, Token, Expiration. 0 with them in c, 1 when
 * no container endpoint is configured, else an error code. */
int s3_creds_container(s3_config *c, tdm_err *e);

/* The EC2 instance role through IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT, else
 * http://169.254.169.254): PUT /latest/api/token, then the role's name and its credentials
 * under /latest/meta-data/iam/security-credentials/ with the token; short timeouts, one
 * try (off EC2 nothing answers). 0 with them in c, 1 when disabled
 * (AWS_EC2_METADATA_DISABLED=true) or nothing answers, else an error code. */
int s3_creds_imds(s3_config *c, tdm_err *e);

/* A profile's credential_process: c->process run by /bin/sh -c (its stderr passes
 * through, its stdout is read and never shown): JSON with "Version": 1, AccessKeyId,
 * SecretAccessKey, and optionally SessionToken and Expiration (then it is run again before
 * they expire). A command that fails, hangs past 60 s or prints anything else is one
 * error naming the profile. */
int s3_creds_process(s3_config *c, tdm_err *e);

/* A profile's role_arn assumed through STS AssumeRole, signed (SigV4, service "sts") with
 * the source credentials: source_profile's keys, or credential_source's (the container
 * endpoint, the instance role, the environment — fetched afresh at each assume). Same
 * endpoint, session name, refresh and errors as web identity; external_id is passed. */
int s3_creds_assume_role_init(s3_config *c, const char *profile, const char *source_profile, tdm_err *e);
int s3_creds_assume_role(s3_config *c, tdm_err *e);

/* The endpoint said the credentials expired (ExpiredToken) while this process thought
 * them fresh (the issuer's clock ahead of this machine's at the fetch): a refreshing
 * source is asked again before the next request. 1 when the source refreshes, 0 when the
 * keys are static (nothing to renew). */
int s3_creds_expire(s3_config *c, pthread_mutex_t *mu);

/* The credentials to sign with now, copied out under mu (refreshed first when they near
 * their expiry). 0, or an error code with e naming the source. */
int s3_creds_current(s3_config *c, pthread_mutex_t *mu, char *ak, size_t akcap, char *sk,
                     size_t skcap, char *tok, size_t tokcap, tdm_err *e);

#endif
