/* s3_resolve.c — endpoint, region and credentials of an s3:// store, resolved from the
 * environment and the AWS files as AWS tools resolve them; see s3_resolve.h. */
#include "storage/s3_resolve.h"
#include "storage/s3_creds.h"
#include "util/ydoc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static void copy(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src); }

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) *--end = '\0';
    return s;
}

/* Looks up `key` in section `section` of an INI-style AWS file; copies the value into
 * out and returns 1 when found. Missing files are not errors (0). */
static int ini_lookup(const char *path, const char *section, const char *key, char *out,
                      size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[4608];
    int in = 0, found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *s = trim(line);
        if (*s == '#' || *s == ';' || !*s) continue;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (close) *close = '\0';
            in = strcmp(trim(s + 1), section) == 0;
            continue;
        }
        if (!in) continue;
        char *eq = strchr(s, '=');
        if (!eq) continue;
        *eq = '\0';
        if (strcmp(trim(s), key) == 0) {
            copy(out, cap, trim(eq + 1));
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static void home_file(const char *override_var, const char *rel, char *out, size_t cap) {
    const char *o = env(override_var);
    if (o) {
        copy(out, cap, o);
        return;
    }
    const char *home = env("HOME");
    snprintf(out, cap, "%s/%s", home ? home : ".", rel);
}

static long env_long(const char *name, long def, long lo, long hi) {
    const char *v = env(name);
    if (!v) return def;
    char *end;
    long x = strtol(v, &end, 10);
    return (*end || x < lo || x > hi) ? -1 : x;
}

int s3_url_check(const char *url, s3_config *c, tdm_err *e) {
    memset(c, 0, sizeof *c);
    if (strncmp(url, "s3://", 5) != 0)
        return err_set(e, ERR_USAGE, "'%s' is not an s3:// URL", url);
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    /* the URL as messages show it: its head only (a prefix may be ~900 bytes, and the
     * reason must fit after it), without control characters (checked below) */
    char shown[120];
    size_t cut = strlen(url) > 100 ? 100 : strlen(url);
    while (cut > 0 && cut < strlen(url) && ((unsigned char)url[cut] & 0xC0) == 0x80) cut--; /* whole characters */
    snprintf(shown, sizeof shown, "%.*s%s", (int)cut, url, cut < strlen(url) ? "..." : "");
    for (char *q = shown; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f) *q = '?';
    for (size_t bad; !ydoc_utf8_ok(shown, strlen(shown), 1, &bad);) shown[bad] = '?'; /* a message is text */
    /* S3's bucket naming rules: 3..63 of a-z 0-9 . -, beginning and ending with a letter
     * or digit, no "..", not an IP address, not xn--... or ...-s3alias (a name outside
     * them reached the network and failed as NoSuchBucket, exit 3) */
    if (blen < 3 || blen > 63)
        return err_set(e, ERR_USAGE, "store URL %s: a bucket name is 3..63 characters (this one %zu)", shown, blen);
    memcpy(c->bucket, b, blen);
    for (size_t i = 0; i < blen; i++) {
        char ch = c->bucket[i];
        if (!(islower((unsigned char)ch) || isdigit((unsigned char)ch) || ch == '-' || ch == '.'))
            return err_set(e, ERR_USAGE, "store URL %s: a bucket name holds only a-z, 0-9, '-' and '.'", shown);
    }
    int dots = 0, digits_dots = 1;
    for (size_t i = 0; i < blen; i++) {
        dots += c->bucket[i] == '.';
        digits_dots &= isdigit((unsigned char)c->bucket[i]) || c->bucket[i] == '.';
    }
    if (!isalnum((unsigned char)c->bucket[0]) || !isalnum((unsigned char)c->bucket[blen - 1]) ||
        strstr(c->bucket, "..") || (digits_dots && dots == 3) || !strncmp(c->bucket, "xn--", 4) ||
        (blen > 8 && !strcmp(c->bucket + blen - 8, "-s3alias")))
        return err_set(e, ERR_USAGE,
                       "store URL %s: '%s' is not a bucket name S3 allows (it begins and ends with a letter "
                       "or digit, has no '..', is no IP address, does not begin with xn-- or end with -s3alias)",
                       shown, c->bucket);
    if (slash) {
        const char *p = slash + 1;
        size_t plen = strlen(p);
        while (plen && p[plen - 1] == '/') plen--;
        /* S3 keys are at most 1024 bytes of UTF-8; tandem's longest key adds
         * S3_KEY_SUFFIX_MAX to the prefix (quarantine/<epoch>/blobs/<sha256>) */
        if (plen > S3_PREFIX_MAX)
            return err_set(e, ERR_USAGE,
                           "store URL %s: the prefix is too long (%zu bytes, more than the %d that leave room for tandem's keys "
                           "within S3's 1024): shorten it",
                           shown, plen, S3_PREFIX_MAX);
        memcpy(c->prefix, p, plen);
        size_t bad;
        if (!ydoc_utf8_ok(c->prefix, plen, 1, &bad))
            return err_set(e, ERR_USAGE, "store URL %s: the prefix is not UTF-8 (byte 0x%02x at offset %zu), "
                           "which S3 keys must be", shown, (unsigned char)c->prefix[bad], bad);
        for (size_t i = 0; i < plen; i++)
            if ((unsigned char)c->prefix[i] < 0x20 || c->prefix[i] == 0x7f)
                return err_set(e, ERR_USAGE, "store URL %s: the prefix holds a control character (0x%02x at "
                               "offset %zu): keys would carry it into listings and logs; remove it",
                               shown, (unsigned char)c->prefix[i], i);
        /* HTTP clients remove "." and ".." segments from a URL path before sending it, S3
         * does not: the request would go to another key than the one signed (and fail as
         * SignatureDoesNotMatch, which reads like a credentials problem) */
        for (const char *seg = c->prefix; *seg;) {
            size_t len = strcspn(seg, "/");
            /* nor an empty one: S3 keeps "//" in the key, so s3://b//p is another store than
             * s3://b/p, and a resume through such a typo began a new run beside the old one
             * (reached the network first, as a failed conditional-write probe where the
             * server folds the slashes) */
            /* (a store made under such a prefix by an older tandem stays reachable with
             * TANDEM_S3_EMPTY_SEGMENTS=1: review) */
            const char *keep = env("TANDEM_S3_EMPTY_SEGMENTS");
            if (len == 0 && !(keep && !strcmp(keep, "1")))
                return err_set(e, ERR_USAGE,
                               "store URL %s: the prefix has an empty segment ('//' at offset %zu); S3 keeps "
                               "it in the key, so this would be another store than the one with a single "
                               "'/': write the prefix with single slashes (a store made under it by an older "
                               "tandem: TANDEM_S3_EMPTY_SEGMENTS=1)",
                               shown, (size_t)(slash - url) + (size_t)(seg - c->prefix));
            if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
                return err_set(e, ERR_USAGE,
                               "store URL %s: the prefix has a '%.*s' segment; S3 keys are not "
                               "paths (nothing resolves '.' or '..' in them): write the prefix "
                               "without it",
                               shown, (int)len, seg);
            seg += len;
            if (*seg == '/') seg++;
        }
    }
    return 0;
}

int s3_config_resolve(const char *url, s3_config *c, tdm_err *e) {
    int rc = s3_url_check(url, c, e);
    if (rc) return rc;
    const char *profile = env("AWS_PROFILE");
    if (!profile) profile = "default";
    char cred_file[1024], conf_file[1024], section[300];
    home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials", cred_file, sizeof cred_file);
    home_file("AWS_CONFIG_FILE", ".aws/config", conf_file, sizeof conf_file);
    if (strcmp(profile, "default") == 0) copy(section, sizeof section, "default");
    else snprintf(section, sizeof section, "profile %s", profile);

    const char *region = env("AWS_REGION");
    if (!region) region = env("AWS_DEFAULT_REGION");
    if (region) copy(c->region, sizeof c->region, region);
    else if (!ini_lookup(conf_file, section, "region", c->region, sizeof c->region))
        copy(c->region, sizeof c->region, "us-east-1");

    /* credentials, in the AWS chain's order: the environment as a pair, the profile's
     * keys, the profile's web identity, the environment's web identity */
    const char *ak = env("AWS_ACCESS_KEY_ID"), *sk = env("AWS_SECRET_ACCESS_KEY");
    char wtok[1024] = "";
    if (ak && sk) {
        copy(c->access_key, sizeof c->access_key, ak);
        copy(c->secret_key, sizeof c->secret_key, sk);
        const char *tok = env("AWS_SESSION_TOKEN");
        if (tok) copy(c->session_token, sizeof c->session_token, tok);
        copy(c->creds_source, sizeof c->creds_source, "the environment (AWS_ACCESS_KEY_ID)");
    } else if (ini_lookup(cred_file, profile, "aws_access_key_id", c->access_key, sizeof c->access_key) &&
               ini_lookup(cred_file, profile, "aws_secret_access_key", c->secret_key, sizeof c->secret_key)) {
        ini_lookup(cred_file, profile, "aws_session_token", c->session_token, sizeof c->session_token);
        snprintf(c->creds_source, sizeof c->creds_source, "profile '%.200s' of %.1000s", profile, cred_file);
    } else if (ini_lookup(conf_file, section, "role_arn", c->role_arn, sizeof c->role_arn) &&
               !ini_lookup(conf_file, section, "web_identity_token_file", wtok, sizeof wtok)) {
        /* a role assumed with another profile's keys, or the platform's credentials */
        char src[300] = "", how[64] = "";
        ini_lookup(conf_file, section, "external_id", c->external_id, sizeof c->external_id);
        if (ini_lookup(conf_file, section, "source_profile", src, sizeof src)) {
            if (!ini_lookup(cred_file, src, "aws_access_key_id", c->src_ak, sizeof c->src_ak) ||
                !ini_lookup(cred_file, src, "aws_secret_access_key", c->src_sk, sizeof c->src_sk))
                return err_set(e, ERR_USAGE, "store %s: profile '%s' assumes %s with source_profile '%s', "
                               "which has no keys in %s (a chain of roles is not supported)",
                               url, profile, c->role_arn, src, cred_file);
            ini_lookup(cred_file, src, "aws_session_token", c->src_tok, sizeof c->src_tok);
            c->assume_role = 1;
        } else if (ini_lookup(conf_file, section, "credential_source", how, sizeof how)) {
            c->assume_role = !strcmp(how, "EcsContainer") ? 2 : !strcmp(how, "Ec2InstanceMetadata") ? 3
                             : !strcmp(how, "Environment") ? 4 : 0;
            if (!c->assume_role)
                return err_set(e, ERR_USAGE, "store %s: profile '%s': credential_source = %s: expected "
                               "EcsContainer, Ec2InstanceMetadata or Environment", url, profile, how);
        } else {
            return err_set(e, ERR_USAGE, "store %s: profile '%s' has role_arn but neither source_profile "
                           "nor credential_source", url, profile);
        }
        int rc = s3_creds_assume_role_init(c, profile, src[0] ? src : NULL, e);
        if (!rc) rc = s3_creds_assume_role(c, e);
        if (rc) return rc;
    } else if (ini_lookup(conf_file, section, "credential_process", c->process, sizeof c->process) ||
               ini_lookup(cred_file, profile, "credential_process", c->process, sizeof c->process)) {
        snprintf(c->creds_source, sizeof c->creds_source, "credential_process of profile '%.200s'", profile);
        int rc = s3_creds_process(c, e);
        if (rc) return rc;
    } else if ((ini_lookup(conf_file, section, "web_identity_token_file", wtok, sizeof wtok) &&
                ini_lookup(conf_file, section, "role_arn", c->role_arn, sizeof c->role_arn)) ||
               (env("AWS_WEB_IDENTITY_TOKEN_FILE") && env("AWS_ROLE_ARN"))) {
        int from_profile = wtok[0] != '\0';
        const char *tf = from_profile ? wtok : env("AWS_WEB_IDENTITY_TOKEN_FILE"), *ra = env("AWS_ROLE_ARN");
        copy(c->token_file, sizeof c->token_file, tf ? tf : "");
        if (!from_profile) copy(c->role_arn, sizeof c->role_arn, ra ? ra : "");
        int rc = s3_creds_web_identity_init(c, from_profile ? profile : NULL, e);
        if (!rc) rc = s3_creds_web_identity_fetch(c, e);
        if (rc) return rc;
    } else {
        int rc = s3_creds_container(c, e);
        if (rc == 1) rc = s3_creds_imds(c, e);
        if (rc == 1)
            return err_set(e, ERR_USAGE,
                           "store %s: no AWS credentials: set AWS_ACCESS_KEY_ID and "
                           "AWS_SECRET_ACCESS_KEY, add profile '%s' to %s, give a web identity "
                           "(AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, as EKS IRSA sets them) "
                           "or container credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI); no EC2 "
                           "instance role answered%s",
                           url, profile, cred_file,
                           env("AWS_EC2_METADATA_DISABLED") ? " (AWS_EC2_METADATA_DISABLED)" : "");
        if (rc) return rc;
    }
    s3_config_no_core_dumps(); /* the secret is in this process's memory now */

    const char *ep = env("AWS_ENDPOINT_URL_S3");
    if (!ep) ep = env("AWS_ENDPOINT_URL");
    char confep[1024] = "";
    if (!ep && ini_lookup(conf_file, section, "endpoint_url", confep, sizeof confep)) ep = confep;
    int aws_own = !ep;
    if (ep) copy(c->endpoint, sizeof c->endpoint, ep);
    else snprintf(c->endpoint, sizeof c->endpoint, "https://s3.%s.amazonaws.com", c->region);
    size_t elen = strlen(c->endpoint);
    while (elen && c->endpoint[elen - 1] == '/') c->endpoint[--elen] = '\0';
    /* user info, in any spelling: sent in Host, echoed in errors; before the shape check
     * below, whose error repeats the endpoint ("http:/u:S@h" was repeated whole) */
    const char *epwhat = env("AWS_ENDPOINT_URL_S3") ? "the S3 endpoint (AWS_ENDPOINT_URL_S3)"
                         : env("AWS_ENDPOINT_URL")  ? "the S3 endpoint (AWS_ENDPOINT_URL)"
                                                    : "the S3 endpoint (endpoint_url of the profile)";
    if (!aws_own && s3_endpoint_check_userinfo(epwhat, c->endpoint, e)) {
        c->endpoint[0] = '\0';
        return ERR_USAGE;
    }
    const char *hoststart = strstr(c->endpoint, "://");
    if (!hoststart || !hoststart[3] || strchr(hoststart + 3, '/'))
        return err_set(e, ERR_USAGE,
                       "S3 endpoint '%s' must look like http(s)://host[:port] (no path)", c->endpoint);
    hoststart += 3;

    const char *style = env("TANDEM_S3_ADDRESSING");
    if (style && strcmp(style, "path") && strcmp(style, "virtual"))
        return err_set(e, ERR_USAGE, "TANDEM_S3_ADDRESSING='%s': use path or virtual", style);
    /* a dotted bucket on AWS's own endpoint: virtual-hosted, its name would be more than
     * one label of the wildcard certificate (*.s3.REGION.amazonaws.com) and TLS fails;
     * path-style, as the AWS SDKs do */
    c->path_style = style ? strcmp(style, "path") == 0 : !aws_own || strchr(c->bucket, '.') != NULL;
    if (c->path_style) {
        copy(c->host, sizeof c->host, hoststart);
        snprintf(c->base_url, sizeof c->base_url, "%s/%s", c->endpoint, c->bucket);
    } else {
        snprintf(c->host, sizeof c->host, "%s.%s", c->bucket, hoststart);
        size_t schemelen = (size_t)(hoststart - c->endpoint);
        snprintf(c->base_url, sizeof c->base_url, "%.*s%s.%s", (int)schemelen, c->endpoint,
                 c->bucket, hoststart);
    }

    long part = env_long("TANDEM_S3_PART_MIB", 16, 5, 5120);
    long conc = env_long("TANDEM_S3_CONCURRENCY", 8, 1, 64);
    long retries = env_long("TANDEM_S3_RETRIES", 8, 1, 100);
    long timeout = env_long("TANDEM_S3_TIMEOUT", 30, 1, 3600);
    long list_max = env_long("TANDEM_S3_LIST_MAX", 1000, 1, 1000);
    if (list_max < 0) return err_set(e, ERR_USAGE, "TANDEM_S3_LIST_MAX must be 1..1000");
    c->list_max = (int)list_max;
    if (part < 0) return err_set(e, ERR_USAGE, "TANDEM_S3_PART_MIB must be 5..5120 (S3's minimum part is 5 MiB)");
    if (conc < 0) return err_set(e, ERR_USAGE, "TANDEM_S3_CONCURRENCY must be 1..64");
    if (retries < 0) return err_set(e, ERR_USAGE, "TANDEM_S3_RETRIES must be 1..100");
    if (timeout < 0) return err_set(e, ERR_USAGE, "TANDEM_S3_TIMEOUT must be 1..3600 seconds");
    c->part_bytes = (size_t)part << 20;
    c->concurrency = (int)conc;
    c->retries = (int)retries;
    c->timeout_s = timeout;
    return 0;
}
