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

/* Fills the web identity fields of c (token_file and role_arn are set by the caller):
 * the session name (AWS_ROLE_SESSION_NAME, else tandem-<host>-<pid>), the STS endpoint,
 * the source text. profile: the profile it came from, NULL for the environment. */
int s3_creds_web_identity_init(s3_config *c, const char *profile, tdm_err *e);

/* Exchanges the token for credentials now (c's access_key, secret_key, session_token,
 * obtained, expires). ERR_USAGE for a token file that cannot be read, ERR_STORE for an
 * STS refusal or an STS that cannot be reached. */
int s3_creds_web_identity_fetch(s3_config *c, tdm_err *e);

/* The credentials to sign with now, copied out under mu (refreshed first when they near
 * their expiry). 0, or an error code with e naming the source. */
int s3_creds_current(s3_config *c, pthread_mutex_t *mu, char *ak, size_t akcap, char *sk,
                     size_t skcap, char *tok, size_t tokcap, tdm_err *e);

#endif
