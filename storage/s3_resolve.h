/* s3_resolve.h — an s3:// URL and the environment (the variables and AWS files that
 * s3_config.h lists) into an s3_config; the temporary credentials of the chain come from
 * s3_creds.h. */
#ifndef TANDEM_STORAGE_S3_RESOLVE_H
#define TANDEM_STORAGE_S3_RESOLVE_H

#include "storage/s3_config.h"
#include "util/err.h"

/* Parses `url` (s3://bucket[/prefix]) and resolves everything else from the environment
 * and the AWS files. ERR_USAGE naming what is missing or malformed. */
int s3_config_resolve(const char *url, s3_config *c, tdm_err *e);
/* Its first part, the URL alone (no environment): S3's bucket naming rules, the prefix's
 * length, UTF-8, control characters and '.'/'..' segments; c's bucket and prefix set.
 * tandem manifest asks it, so that a job is not queued to fail at its start. */
int s3_url_check(const char *url, s3_config *c, tdm_err *e);

#endif
