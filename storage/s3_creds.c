/* s3_creds.c — web identity credentials and their refresh; see s3_creds.h. */
#include "storage/s3_creds.h"

#include <curl/curl.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storage/s3_xml.h"
#include "storage/sha256.h"
#include "storage/sigv4.h"
#include "util/buf.h"
#include "util/json_read.h"
#include "util/urltext.h"

static double now_wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Time that a step of the wall clock does not move: for limits and ages within a process. */
static double now_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int s3_endpoint_check_userinfo(const char *what, const char *url, tdm_err *e) {
    /* any '@' (no endpoint tandem asks has one in its path either, and "http://TOKEN@host"
     * is user info without a ':'), and a ':' before an '@' in any spelling ("http:/u:S@h")
     * — libcurl sends user info as Authorization: Basic, and errors name the endpoint */
    if (!strchr(url, '@') && !url_text_has_userinfo(url, strlen(url))) return 0;
    return err_set(e, ERR_USAGE, "%s holds user info (user:password@host, or an '@' anywhere), which "
                   "is refused and not repeated here: credential endpoints and S3 take no credentials "
                   "in their URL; give them as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile or "
                   "the rest of the credential chain (docs/running.md)", what);
}

/* Whether plain-http `url` names a loopback host — 127.0.0.0/8 written as an address,
 * localhost, [::1] — or, with agent, the ECS/EKS agent's link-local addresses; judged on
 * the URL's parsed host ("http://127.0.0.1@elsewhere/" is user info and no loopback). An
 * https URL is 1, any other scheme 0. */
static int creds_host_ok(const char *url, int agent);

/* The session name and the STS endpoint, for web identity and AssumeRole; an endpoint
 * with user info is refused (ERR_USAGE). */
static int sts_common(s3_config *c, tdm_err *e) {
    const char *name = getenv("AWS_ROLE_SESSION_NAME");
    if (name && *name) {
        snprintf(c->session_name, sizeof c->session_name, "%s", name);
    } else {
        char host[64] = "host";
        gethostname(host, sizeof host);
        host[sizeof host - 1] = '\0';
        snprintf(c->session_name, sizeof c->session_name, "tandem-%.40s-%d", host, (int)getpid());
    }
    /* STS allows [\w+=,.@-] in a session name, at most 64 characters */
    c->session_name[64] = '\0';
    for (char *p = c->session_name; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+=,.@-", *p)) *p = '-';
    const char *ep = getenv("AWS_ENDPOINT_URL_STS");
    const char *legacy = getenv("AWS_STS_REGIONAL_ENDPOINTS");
    if (ep && *ep) snprintf(c->sts_endpoint, sizeof c->sts_endpoint, "%s", ep);
    else if (legacy && !strcmp(legacy, "legacy")) snprintf(c->sts_endpoint, sizeof c->sts_endpoint, "https://sts.amazonaws.com");
    else snprintf(c->sts_endpoint, sizeof c->sts_endpoint, "https://sts.%s.amazonaws.com", c->region);
    size_t n = strlen(c->sts_endpoint);
    while (n && c->sts_endpoint[n - 1] == '/') c->sts_endpoint[--n] = '\0';
    if (s3_endpoint_check_userinfo("AWS_ENDPOINT_URL_STS", c->sts_endpoint, e)) {
        c->sts_endpoint[0] = '\0'; /* kept out of any later message */
        return ERR_USAGE;
    }
    /* plain http to another host is the user's choice, as in the AWS SDKs (an in-cluster
     * MinIO or Ceph STS): it goes to its endpoint directly, never through a proxy */
    return 0;
}

int s3_creds_web_identity_init(s3_config *c, const char *profile, tdm_err *e) {
    c->web_identity = 1;
    int rc = sts_common(c, e);
    if (rc) return rc;
    snprintf(c->creds_source, sizeof c->creds_source,
             "web identity (role %.300s, token file %.500s%s%.200s%s, STS %.300s)", c->role_arn,
             c->token_file, profile ? ", profile '" : "", profile ? profile : "", profile ? "'" : "",
             c->sts_endpoint);
    if (!c->role_arn[0] || !c->token_file[0])
        return err_set(e, ERR_USAGE, "%s: the role ARN and the token file must both be set", c->creds_source);
    return 0;
}

/* A credential endpoint's answer is a JSON or XML document of a few KiB: one longer than
 * this is stopped (it would otherwise take memory until the transfer's time limit). */
#define CREDS_ANSWER_MAX ((size_t)1 << 20)
#define CREDS_TOO_LONG "the answer is longer than 1 MiB (credentials are a few KiB)"

static size_t on_data(char *p, size_t sz, size_t n, void *ud) {
    buf_t *b = ud;
    if (b->n + sz * n > CREDS_ANSWER_MAX) return 0; /* curl stops: CURLE_WRITE_ERROR */
    buf_putn(b, p, sz * n);
    return b->oom ? 0 : sz * n;
}

/* Why a transfer of a credential answer failed. */
static const char *creds_transfer_error(CURLcode cc, const buf_t *body) {
    return cc == CURLE_WRITE_ERROR && body->n && !body->oom ? CREDS_TOO_LONG : curl_easy_strerror(cc);
}

/* "2026-11-26T15:00:00Z" (fraction allowed) as unix seconds; 0 when it does not parse. */
static double iso_time(const char *s) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (!strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) return 0;
    return (double)timegm(&tm);
}

/* Makes h bypass every proxy when url is plain http. A plain-http credential request goes
 * only to a loopback address or the ECS/EKS agent (creds_host_ok), or to the instance
 * metadata service, none of which a proxy can reach for us — and http_proxy would get
 * the container authorization token, the web identity token or the IMDS session token in
 * clear text. Over https a proxy only relays the TLS stream (CONNECT) and stays allowed. */
static void creds_no_proxy_for_http(CURL *h, const char *url) {
    if (strncasecmp(url, "https://", 8) != 0) curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
}

static void wipe(char *p, size_t n) {
    volatile char *v = p;
    for (size_t i = 0; i < n; i++) v[i] = 0;
}

/* Makes (ak, sk, st) the current credentials of c, valid until `expires` (wall seconds;
 * 0: no expiry), and wipes the caller's copies of the secret and the token. */
static void creds_set(s3_config *c, const char *ak, char *sk, size_t skcap, char *st, size_t stcap, double expires) {
    snprintf(c->access_key, sizeof c->access_key, "%s", ak);
    snprintf(c->secret_key, sizeof c->secret_key, "%s", sk);
    snprintf(c->session_token, sizeof c->session_token, "%s", st);
    c->obtained = now_wall();
    c->expires = expires;
    c->obtained_mono = now_mono();
    c->life_s = expires > 0 ? expires - c->obtained : 0;
    c->refresh_now = 0;
    wipe(sk, skcap);
    wipe(st, stcap);
}

/* POSTs `form` to c's STS endpoint, up to 3 attempts 200 and 400 ms apart; only a
 * transport error or a 5xx is tried again (a refusal is an answer). With src, each attempt
 * is SigV4-signed afresh with src's credentials (AssumeRole); without, it goes unsigned
 * (AssumeRoleWithWebIdentity: the token in the form is the proof). On return *status is
 * STS's last status (0: it never answered, why says how) and *body its answer, which the
 * caller frees; the return is 0, or an error for what is not STS's doing (signing, memory). */
static int sts_post(const s3_config *c, const s3_config *src, const buf_t *form, long *status, char *why,
                    size_t whycap, buf_t *body, tdm_err *e) {
    const char *hp = strstr(c->sts_endpoint, "://");
    hp = hp ? hp + 3 : c->sts_endpoint;
    const char *slash = strchr(hp, '/');
    char host[512], path[1024], url[1100];
    snprintf(host, sizeof host, "%.*s", (int)(slash ? (size_t)(slash - hp) : strlen(hp)), hp);
    snprintf(path, sizeof path, "%s/", slash ? slash : "");
    snprintf(url, sizeof url, "%s/", c->sts_endpoint);
    *status = 0;
    CURL *h = curl_easy_init();
    if (!h) return err_set(e, ERR_INTERNAL, "curl_easy_init failed");
    int rc = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        if (attempt) nanosleep(&(struct timespec){0, 200 * 1000 * 1000 * (long)attempt}, NULL);
        struct curl_slist *hl = NULL;
        if (src) {
            sha256_digest d;
            char hex[SHA256_HEX_LEN + 1], date[SIGV4_AMZ_DATE_LEN + 1], line[8192];
            sha256(form->p, form->n, &d);
            sha256_hex(&d, hex);
            sigv4_amz_date(time(NULL), date);
            sigv4_header hs[] = {{"Host", host}, {"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}};
            sigv4_request sr = {.method = "POST", .path = path, .query = NULL, .headers = hs, .nheaders = 2,
                                .payload_sha256_hex = hex};
            sigv4_params sp = {.access_key = src->access_key, .secret_key = src->secret_key,
                               .session_token = src->session_token, .region = c->region, .service = "sts",
                               .amz_date = date, .content_sha256_header = 1};
            sigv4_output so;
            tdm_err se;
            if (sigv4_sign(&sr, &sp, &so, &se)) {
                rc = err_set(e, ERR_USAGE, "%s: signing failed: %.200s", c->creds_source, se.msg);
                break;
            }
            for (size_t i = 0; i < 2; i++) {
                snprintf(line, sizeof line, "%s: %s", hs[i].name, hs[i].value);
                hl = curl_slist_append(hl, line);
            }
            for (size_t i = 0; i < so.nheaders; i++) {
                snprintf(line, sizeof line, "%s: %s", so.headers[i].name, so.headers[i].value);
                hl = curl_slist_append(hl, line);
            }
            wipe(line, sizeof line);
            sigv4_output_free(&so);
        }
        buf_free(body);
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, url);
        creds_no_proxy_for_http(h, url);
        if (hl) curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, form->p);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)form->n);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
        CURLcode cc = curl_easy_perform(h);
        curl_slist_free_all(hl);
        *status = 0;
        if (cc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
        else snprintf(why, whycap, "%s", creds_transfer_error(cc, body));
        if (cc == CURLE_OK && *status < 500) break; /* an answer */
        if (cc == CURLE_OK) snprintf(why, whycap, "HTTP %ld", *status);
        *status = 0;
    }
    curl_easy_cleanup(h);
    return rc;
}

static int sts_answer(s3_config *c, int rc, long status, const char *why, buf_t *body,
                      const char *sent, tdm_err *e);

int s3_creds_web_identity_fetch(s3_config *c, tdm_err *e) {
    /* the token: read afresh each time (the platform rotates the file) */
    FILE *f = fopen(c->token_file, "r");
    if (!f)
        return err_sys(e, ERR_USAGE, errno, "%s: cannot read the token file", c->creds_source);
    /* the token is in memory from here on, for as long as STS takes to answer (up to 3
     * attempts of 30 s): no core dump, no /proc/PID/mem from now, not only once the
     * credentials arrive */
    s3_config_no_core_dumps();
    char token[8192];
    size_t tn = fread(token, 1, sizeof token - 1, f);
    fclose(f);
    token[tn] = '\0';
    while (tn && (token[tn - 1] == '\n' || token[tn - 1] == '\r' || token[tn - 1] == ' ')) token[--tn] = '\0';
    if (!tn) return err_set(e, ERR_USAGE, "%s: the token file is empty", c->creds_source);
    CURL *h = curl_easy_init();
    if (!h) {
        wipe(token, sizeof token);
        return err_set(e, ERR_INTERNAL, "curl_easy_init failed");
    }
    char *role = curl_easy_escape(h, c->role_arn, 0), *sess = curl_easy_escape(h, c->session_name, 0);
    char *tok = curl_easy_escape(h, token, (int)tn);
    buf_t form = {0};
    buf_printf(&form, "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=%s&RoleSessionName=%s"
               "&WebIdentityToken=%s", role ? role : "", sess ? sess : "", tok ? tok : "");
    if (tok) {
        wipe(tok, strlen(tok));
        curl_free(tok);
    }
    curl_free(role);
    curl_free(sess);
    curl_easy_cleanup(h);
    int rc = form.oom ? err_set(e, ERR_INTERNAL, "out of memory") : 0;
    long status = 0;
    buf_t body = {0};
    char why[300] = "";
    if (!rc) rc = sts_post(c, NULL, &form, &status, why, sizeof why, &body, e);
    if (form.p) wipe(form.p, form.n);
    buf_free(&form);
    rc = sts_answer(c, rc, status, why, &body, token, e); /* the token: kept out of its message */
    wipe(token, sizeof token);
    return rc;
}

/* The error for an answer whose Expiration (exp, cap bytes, rewritten) is not a time. The
 * answer's own text: a source that misplaced its fields may have put the new secret key or
 * token there, and an endpoint may echo the token it was sent (`sent`: STS's source
 * session token, the container authorization token, the IMDS session token; may be NULL) or hold c's, none of which a
 * message may carry, nor control bytes. */
static int bad_expiration(const s3_config *c, const char *whose, char *exp, size_t cap, const char *sk,
                          const char *st, const char *sent, tdm_err *e) {
    s3_config_redact(c, sent, exp, cap);
    s3_config_redact(NULL, sk, exp, cap);
    s3_config_redact(NULL, st, exp, cap);
    return err_set(e, ERR_STORE, "%s: %sExpiration '%.60s' is not a time", c->creds_source, whose, exp);
}

/* STS's answer (status 0: it could not be reached, why says how) into c's credentials;
 * frees body. */
static int sts_answer(s3_config *c, int rc, long status, const char *why, buf_t *body,
                      const char *sent, tdm_err *e) {
    if (!rc && status == 0)
        rc = err_set(e, ERR_STORE, "%s: STS could not be reached (%s, 3 attempts)", c->creds_source, why);
    const char *xml = body->p ? body->p : "";
    if (!rc && status != 200) {
        char code[128] = "?", msg[400] = "";
        s3_xml_first(xml, body->n, "Code", code, sizeof code);
        s3_xml_first(xml, body->n, "Message", msg, sizeof msg);
        /* STS's text, in a log: no control bytes, no secret it may echo (the source's
         * session token it was sent, the web identity token) */
        s3_config_redact(c, sent, code, sizeof code);
        s3_config_redact(c, sent, msg, sizeof msg);
        rc = err_set(e, ERR_STORE, "%s: STS refused: HTTP %ld %s%s%s (%s)", c->creds_source, status, code,
                     msg[0] ? ": " : "", msg,
                     c->web_identity ? "an expired or revoked token, or a role that does not trust this "
                                       "identity: check the role's trust policy and the service "
                                       "account's annotation"
                                     : "the source credentials may not assume the role: check the "
                                       "role's trust policy and the source's permissions");
    }
    char ak[256] = "", sk[256] = "", st[4096] = "", exp[64] = "";
    if (!rc && !(s3_xml_first(xml, body->n, "AccessKeyId", ak, sizeof ak) &&
                 s3_xml_first(xml, body->n, "SecretAccessKey", sk, sizeof sk) &&
                 s3_xml_first(xml, body->n, "SessionToken", st, sizeof st) &&
                 s3_xml_first(xml, body->n, "Expiration", exp, sizeof exp)))
        rc = err_set(e, ERR_STORE, "%s: STS's answer lacks the credentials (AccessKeyId, "
                     "SecretAccessKey, SessionToken, Expiration)", c->creds_source);
    double expires = rc ? 0 : iso_time(exp);
    if (!rc && expires <= 0) rc = bad_expiration(c, "STS's ", exp, sizeof exp, sk, st, sent, e);
    if (!rc) creds_set(c, ak, sk, sizeof sk, st, sizeof st, expires);
    wipe(sk, sizeof sk);
    wipe(st, sizeof st);
    if (body->p) wipe(body->p, body->n);
    buf_free(body);
    return rc;
}

int s3_creds_assume_role_init(s3_config *c, const char *profile, const char *source_profile, tdm_err *e) {
    int rc = sts_common(c, e);
    if (rc) return rc;
    static const char *const how[] = {"", "", "EcsContainer", "Ec2InstanceMetadata", "Environment"};
    snprintf(c->creds_source, sizeof c->creds_source, "role %.300s of profile '%.200s' (%s%.200s%s, STS %.300s)",
             c->role_arn, profile, source_profile ? "source_profile '" : "credential_source ",
             source_profile ? source_profile : how[c->assume_role], source_profile ? "'" : "", c->sts_endpoint);
    return 0;
}

int s3_creds_assume_role(s3_config *c, tdm_err *e) {
    /* the source credentials of this moment */
    s3_config *src = calloc(1, sizeof *src);
    if (!src) return err_set(e, ERR_INTERNAL, "out of memory");
    int rc = 0;
    if (c->assume_role == 1) {
        snprintf(src->access_key, sizeof src->access_key, "%s", c->src_ak);
        snprintf(src->secret_key, sizeof src->secret_key, "%s", c->src_sk);
        snprintf(src->session_token, sizeof src->session_token, "%s", c->src_tok);
    } else if (c->assume_role == 4) {
        const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY"), *tk = getenv("AWS_SESSION_TOKEN");
        if (!ak || !sk) rc = err_set(e, ERR_USAGE, "%s: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set", c->creds_source);
        else {
            snprintf(src->access_key, sizeof src->access_key, "%s", ak);
            snprintf(src->secret_key, sizeof src->secret_key, "%s", sk);
            snprintf(src->session_token, sizeof src->session_token, "%s", tk ? tk : "");
        }
    } else {
        snprintf(src->region, sizeof src->region, "%s", c->region);
        rc = c->assume_role == 2 ? s3_creds_container(src, e) : s3_creds_imds(src, e);
        if (rc == 1) rc = err_set(e, ERR_STORE, "%s: the credential source did not answer", c->creds_source);
    }
    buf_t form = {0}, body = {0};
    CURL *h = rc ? NULL : curl_easy_init();
    if (!rc && !h) rc = err_set(e, ERR_INTERNAL, "curl_easy_init failed");
    if (!rc) {
        char *role = curl_easy_escape(h, c->role_arn, 0), *sess = curl_easy_escape(h, c->session_name, 0);
        char *ext = c->external_id[0] ? curl_easy_escape(h, c->external_id, 0) : NULL;
        buf_printf(&form, "Action=AssumeRole&Version=2011-06-15&RoleArn=%s&RoleSessionName=%s%s%s",
                   role ? role : "", sess ? sess : "", ext ? "&ExternalId=" : "", ext ? ext : "");
        curl_free(role);
        curl_free(sess);
        curl_free(ext);
        if (form.oom) rc = err_set(e, ERR_INTERNAL, "out of memory");
    }
    if (h) curl_easy_cleanup(h);
    long status = 0;
    char why[300] = "";
    if (!rc) rc = sts_post(c, src, &form, &status, why, sizeof why, &body, e);
    buf_free(&form);
    /* the source's session token went out verbatim (X-Amz-Security-Token): STS's error text
     * may echo it, and with a credential_source it is nowhere in c to be redacted from */
    rc = sts_answer(c, rc, status, why, &body, src->session_token, e);
    s3_config_wipe(src);
    free(src);
    return rc;
}

/* One HTTP request for the credential endpoints: method, url, up to two headers, the
 * body into *body; returns the status (0: nothing answered, with why). */
static long http(const char *method, const char *url, const char *h1, const char *h2, long timeout_s,
                 buf_t *body, char *why, size_t whycap) {
    CURL *h = curl_easy_init();
    if (!h) return snprintf(why, whycap, "curl_easy_init failed"), 0;
    struct curl_slist *hl = NULL;
    if (h1) hl = curl_slist_append(hl, h1);
    if (h2) hl = curl_slist_append(hl, h2);
    curl_easy_setopt(h, CURLOPT_URL, url);
    creds_no_proxy_for_http(h, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "PUT")) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)0);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, timeout_s);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s * 2);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    if (cc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    else snprintf(why, whycap, "%s", creds_transfer_error(cc, body));
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return status;
}

/* AccessKeyId, SecretAccessKey, Token, Expiration of a JSON answer into c; `sent` is the
 * token the request carried (kept out of messages; may be NULL). */
static int take_json(s3_config *c, const buf_t *body, const char *sent, tdm_err *e) {
    char ak[256] = "", sk[256] = "", st[4096] = "", exp[64] = "";
    const char *t = body->p ? body->p : "";
    int rc = 0;
    if (!(json_read_string(t, body->n, "AccessKeyId", ak, sizeof ak) &&
          json_read_string(t, body->n, "SecretAccessKey", sk, sizeof sk) &&
          json_read_string(t, body->n, "Token", st, sizeof st) &&
          json_read_string(t, body->n, "Expiration", exp, sizeof exp)))
        rc = err_set(e, ERR_STORE, "%s: the answer lacks AccessKeyId, SecretAccessKey, Token or "
                     "Expiration", c->creds_source);
    double expires = rc ? 0 : iso_time(exp);
    if (!rc && expires <= 0) rc = bad_expiration(c, "", exp, sizeof exp, sk, st, sent, e);
    if (!rc) creds_set(c, ak, sk, sizeof sk, st, sizeof st, expires);
    wipe(sk, sizeof sk);
    wipe(st, sizeof st);
    return rc;
}

/* Whether p[0..n) is an IAM role name: 1-64 of A-Z a-z 0-9 and + = , . @ _ - (IAM's
 * rule), not dots alone. */
static int iam_name_ok(const char *p, size_t n) {
    if (n < 1 || n > 64) return 0;
    size_t dots = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              (ch && strchr("+=,.@_-", ch))))
            return 0;
        dots += ch == '.';
    }
    return dots < n; /* "." or "..": a path step, not a name */
}

/* The container credential endpoint may be asked over plain http only at a loopback
 * address or the ECS/EKS agent's link-local addresses (AWS's rule), STS only at a loopback
 * address — judged on the URL's parsed host (a check of the text's start let
 * "http://127.0.0.1@elsewhere/" through, and with it the authorization token in clear
 * text). A URL with user info is never asked. */
static int creds_host_ok(const char *url, int agent) {
    const char *h = !strncasecmp(url, "https://", 8) ? url + 8 : !strncasecmp(url, "http://", 7) ? url + 7 : NULL;
    if (!h) return 0;
    size_t alen = strcspn(h, "/?#");
    if (memchr(h, '@', alen)) return 0;
    if (h == url + 8) return 1;
    size_t hlen;
    if (h[0] == '[') {
        const char *rb = memchr(h, ']', alen);
        if (!rb) return 0;
        hlen = (size_t)(rb - h) + 1;
    } else {
        hlen = strcspn(h, ":/?#");
    }
    if (hlen < alen) { /* ":port", digits only */
        if (h[hlen] != ':' || hlen + 1 == alen) return 0;
        for (size_t i = hlen + 1; i < alen; i++)
            if (h[i] < '0' || h[i] > '9') return 0;
    }
    char host[64];
    if (hlen == 0 || hlen >= sizeof host) return 0;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    static const char *const named[] = {"localhost", "[::1]", "169.254.170.2", "169.254.170.23", "[fd00:ec2::23]"};
    for (size_t i = 0; i < (agent ? sizeof named / sizeof *named : 2); i++)
        if (!strcmp(host, named[i])) return 1;
    struct in_addr a; /* 127.0.0.0/8, written as an address (not 127.0.0.1.example.com) */
    return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int s3_creds_container(s3_config *c, tdm_err *e) {
    const char *rel = getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    const char *full = getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if (!c->creds_url[0]) {
        if (rel && *rel) snprintf(c->creds_url, sizeof c->creds_url, "http://169.254.170.2%s", rel);
        else if (full && *full) snprintf(c->creds_url, sizeof c->creds_url, "%s", full);
        else return 1;
        /* anywhere: a password may hold '/'; named by the variable it came from */
        int urc = s3_endpoint_check_userinfo(rel && *rel ? "container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
                                                         : "container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI",
                                             c->creds_url, e);
        if (urc) {
            c->creds_url[0] = '\0';
            return urc;
        }
        snprintf(c->creds_source, sizeof c->creds_source, "container credentials (%.1000s)", c->creds_url);
        if (!creds_host_ok(c->creds_url, 1))
            return err_set(e, ERR_USAGE, "%s: plain http is allowed only to a loopback address or the "
                           "ECS/EKS agent (169.254.170.2, 169.254.170.23); use https", c->creds_source);
        c->from_endpoint = 1;
    }
    char auth[4096] = "", line[4200] = "";
    const char *tf = getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"), *tv = getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    /* the authorization token is in memory from here on, while the endpoint is asked: no
     * core dump from now, not only once the credentials arrive */
    if ((tf && *tf) || (tv && *tv)) s3_config_no_core_dumps();
    if (tf && *tf) {
        FILE *f = fopen(tf, "r");
        if (!f)
            return err_sys(e, ERR_USAGE, errno, "%s: cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE %s",
                           c->creds_source, tf);
        size_t n = fread(auth, 1, sizeof auth - 1, f);
        fclose(f);
        auth[n] = '\0';
        while (n && (auth[n - 1] == '\n' || auth[n - 1] == '\r')) auth[--n] = '\0';
    } else if (tv && *tv) {
        snprintf(auth, sizeof auth, "%s", tv);
    }
    if (auth[0]) snprintf(line, sizeof line, "Authorization: %s", auth); /* as bearer, below */
    wipe(auth, sizeof auth);
    buf_t body = {0};
    char why[300] = "";
    long status = 0;
    for (int attempt = 0; attempt < 3 && (status == 0 || status >= 500); attempt++) {
        if (attempt) nanosleep(&(struct timespec){0, 200 * 1000 * 1000 * (long)attempt}, NULL);
        buf_free(&body);
        status = http("GET", c->creds_url, line[0] ? line : NULL, NULL, 5, &body, why, sizeof why);
    }
    static const char bearer[] = "Authorization: ";
    int rc = status == 0 ? err_set(e, ERR_STORE, "%s: no answer (%s, 3 attempts)", c->creds_source, why)
             : status != 200 ? err_set(e, ERR_STORE, "%s: HTTP %ld (the token or the association was refused)",
                                       c->creds_source, status)
                             : take_json(c, &body, line[0] ? line + sizeof bearer - 1 : NULL, e);
    wipe(line, sizeof line);
    if (body.p) wipe(body.p, body.n);
    buf_free(&body);
    return rc;
}

int s3_creds_imds(s3_config *c, tdm_err *e) {
    const char *off = getenv("AWS_EC2_METADATA_DISABLED");
    if (off && !strcasecmp(off, "true")) return 1;
    const char *ep = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    int first = !c->creds_url[0];
    if (first) {
        if (ep && *ep && s3_endpoint_check_userinfo("AWS_EC2_METADATA_SERVICE_ENDPOINT", ep, e)) return ERR_USAGE;
        snprintf(c->creds_url, sizeof c->creds_url, "%s", ep && *ep ? ep : "http://169.254.169.254");
        size_t n = strlen(c->creds_url);
        while (n && c->creds_url[n - 1] == '/') c->creds_url[--n] = '\0';
        snprintf(c->creds_source, sizeof c->creds_source, "the EC2 instance role (IMDSv2 at %.1000s)", c->creds_url);
    }
    char url[1600], why[300] = "", tok[512] = "", hdr[600], role[256] = "";
    buf_t body = {0};
    snprintf(url, sizeof url, "%s/latest/api/token", c->creds_url);
    /* off EC2 nothing answers: one short try when looking, a few when refreshing */
    long t = first ? 1 : 3, status = http("PUT", url, "X-aws-ec2-metadata-token-ttl-seconds: 21600", NULL, t,
                                          &body, why, sizeof why);
    if (status == 0 && first) {
        buf_free(&body);
        c->creds_url[0] = '\0';
        return 1;
    }
    int rc = status != 200 || !body.n || body.n >= sizeof tok
                 ? err_set(e, ERR_STORE, "%s: no session token (HTTP %ld%s%s)", c->creds_source, status,
                           why[0] ? ", " : "", why)
                 : 0;
    if (!rc) s3_config_no_core_dumps(); /* the IMDS session token is a credential of this host */
    if (!rc) memcpy(tok, body.p, body.n), tok[body.n] = '\0';
    buf_free(&body);
    snprintf(hdr, sizeof hdr, "X-aws-ec2-metadata-token: %s", tok);
    wipe(tok, sizeof tok);
    snprintf(url, sizeof url, "%s/latest/meta-data/iam/security-credentials/", c->creds_url);
    if (!rc && (status = http("GET", url, hdr, NULL, t, &body, why, sizeof why)) != 200)
        rc = err_set(e, ERR_STORE, "%s: no instance role (HTTP %ld): attach an instance profile", c->creds_source,
                     status);
    if (!rc) {
        size_t n = strcspn(body.p ? body.p : "", "\r\n");
        if (!n) rc = err_set(e, ERR_STORE, "%s: no instance role in the answer", c->creds_source);
        else if (!iam_name_ok(body.p, n))
            /* it goes into the next URL's path and into messages: a name IAM would refuse
             * (a '/', '..', a terminal escape) is the endpoint answering wrongly */
            rc = err_set(e, ERR_STORE, "%s: the instance role named in the answer (%zu bytes) is not an IAM "
                         "role name (1-64 of A-Z a-z 0-9 + = , . @ _ -): check the metadata endpoint "
                         "(AWS_EC2_METADATA_SERVICE_ENDPOINT) or a proxy in front of it", c->creds_source, n);
        else memcpy(role, body.p, n), role[n] = '\0';
    }
    buf_free(&body);
    snprintf(url, sizeof url, "%s/latest/meta-data/iam/security-credentials/%s", c->creds_url, role);
    if (!rc && (status = http("GET", url, hdr, NULL, t, &body, why, sizeof why)) != 200)
        rc = err_set(e, ERR_STORE, "%s: role %s: HTTP %ld", c->creds_source, role, status);
    if (!rc) rc = take_json(c, &body, hdr + strlen("X-aws-ec2-metadata-token: "), e);
    wipe(hdr, sizeof hdr);
    if (body.p) wipe(body.p, body.n);
    buf_free(&body);
    if (!rc) c->from_endpoint = 2;
    return rc;
}

/* The credential process killed, with its whole group when it has one of its own (its
 * children too), and reaped; returns its wait status. */
static int kill_group(pid_t pid, int own_group) {
    if (own_group) kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return status;
}

/* Runs `credential_process` (sh -c, stdout to a pipe) and reads what it prints. It must
 * print at most 1 MiB and exit within the limit (60 s; TANDEM_TEST_CREDENTIAL_PROCESS_S
 * for the tests) counted from its start; past either it is killed, so that neither a hung
 * helper nor one that keeps printing can hold tandem for ever. Without a terminal (a batch
 * job) it runs in a process group of its own and the whole group is killed, children it
 * left behind too (they would hold the pipes of whoever reads tandem's output); at a
 * terminal it stays in the foreground group, so that a helper may prompt there (an MFA
 * code) and Ctrl-C reaches it. */
int s3_creds_process(s3_config *c, tdm_err *e) {
    int fds[2], own_group = !isatty(STDIN_FILENO);
    if (pipe(fds) != 0) return err_sys(e, ERR_INTERNAL, errno, "%s: pipe", c->creds_source);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return err_sys(e, ERR_INTERNAL, errno, "%s: fork", c->creds_source);
    }
    if (pid == 0) {
        if (own_group) setpgid(0, 0);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        signal(SIGPIPE, SIG_DFL); /* a run ignores it; the helper's own tools expect it */
        signal(SIGXFSZ, SIG_DFL); /* tandem ignores it (cli/main.c); the helper starts as usual */
        execl("/bin/sh", "sh", "-c", c->process, (char *)NULL);
        _exit(127);
    }
    if (own_group) setpgid(pid, pid); /* as the child does: whichever runs first */
    close(fds[1]);
    buf_t out = {0};
    char chunk[4096];
    const char *lim = getenv("TANDEM_TEST_CREDENTIAL_PROCESS_S");
    double limit_s = lim && atof(lim) > 0 ? atof(lim) : 60;
    double deadline = now_mono() + limit_s;
    int timed_out = 0, too_long = 0, status = 0;
    for (;;) {
        struct timeval tv = {0, 200000};
        fd_set rs;
        FD_ZERO(&rs);
        FD_SET(fds[0], &rs);
        int ready = select(fds[0] + 1, &rs, NULL, NULL, &tv);
        if (ready > 0) {
            ssize_t k = read(fds[0], chunk, sizeof chunk);
            if (k <= 0) break;
            buf_putn(&out, chunk, (size_t)k);
            if (out.n > (1u << 20)) { /* no credentials are that long */
                too_long = 1;
                break;
            }
        } else if (ready < 0 && errno != EINTR) {
            break;
        }
        if (now_mono() > deadline) {
            timed_out = 1;
            break;
        }
    }
    close(fds[0]);
    if (timed_out || too_long) {
        status = kill_group(pid, own_group);
    } else { /* its output ended: it must exit too, within the same limit */
        pid_t w;
        while ((w = waitpid(pid, &status, WNOHANG)) == 0 || (w < 0 && errno == EINTR)) {
            if (now_mono() > deadline) {
                timed_out = 1;
                status = kill_group(pid, own_group);
                break;
            }
            usleep(10000);
        }
    }
    wipe(chunk, sizeof chunk);
    int rc = 0;
    double version = 0;
    const char *t = out.p ? out.p : "";
    if (timed_out)
        rc = err_set(e, ERR_STORE, "%s: the command ran past %g s (stopped): it must print the "
                     "credentials and exit", c->creds_source, limit_s);
    else if (too_long)
        rc = err_set(e, ERR_STORE, "%s: the command printed more than 1 MiB (stopped): credentials "
                     "are a JSON object of a few KiB", c->creds_source);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        rc = err_set(e, ERR_STORE, "%s: the command failed (exit %d)", c->creds_source,
                     WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    else if (!json_read_number(t, out.n, "Version", &version) || version != 1)
        rc = err_set(e, ERR_STORE, "%s: the output is not a JSON object with \"Version\": 1", c->creds_source);
    char ak[256] = "", sk[256] = "", st[4096] = "", exp[64] = "";
    if (!rc && !(json_read_string(t, out.n, "AccessKeyId", ak, sizeof ak) &&
                 json_read_string(t, out.n, "SecretAccessKey", sk, sizeof sk)))
        rc = err_set(e, ERR_STORE, "%s: the output lacks AccessKeyId or SecretAccessKey", c->creds_source);
    if (!rc) json_read_string(t, out.n, "SessionToken", st, sizeof st);
    double expires = 0;
    if (!rc && json_read_string(t, out.n, "Expiration", exp, sizeof exp) && (expires = iso_time(exp)) <= 0)
        rc = bad_expiration(c, "", exp, sizeof exp, sk, st, NULL, e);
    if (!rc) {
        creds_set(c, ak, sk, sizeof sk, st, sizeof st, expires);
        c->from_endpoint = 3;
    }
    wipe(sk, sizeof sk);
    wipe(st, sizeof st);
    if (out.p) wipe(out.p, out.n);
    buf_free(&out);
    return rc;
}

int s3_creds_expire(s3_config *c, pthread_mutex_t *mu) {
    pthread_mutex_lock(mu);
    int refreshing = c->web_identity || c->assume_role || c->from_endpoint;
    /* not again where another request's renewal fetched them a moment ago (each request
     * that met the expiry asks; one fetch answers them all) */
    if (refreshing && now_mono() - c->obtained_mono > 1.0) c->refresh_now = 1;
    pthread_mutex_unlock(mu);
    return refreshing;
}

int s3_creds_current(s3_config *c, pthread_mutex_t *mu, char *ak, size_t akcap, char *sk,
                     size_t skcap, char *tok, size_t tokcap, tdm_err *e) {
    int rc = 0;
    pthread_mutex_lock(mu);
    if ((c->web_identity || c->assume_role || c->from_endpoint) && (c->expires > 0 || c->refresh_now)) {
        /* their age on the monotonic clock since the fetch (their life as the wall clock
         * said then): a wall clock stepped back since kept them past their expiry */
        double life = c->life_s, left = life - (now_mono() - c->obtained_mono);
        double margin = life / 3 < 300 ? life / 3 : 300;
        if (left <= margin || c->refresh_now)
            rc = c->web_identity ? s3_creds_web_identity_fetch(c, e)
                 : c->assume_role ? s3_creds_assume_role(c, e)
                 : c->from_endpoint == 1 ? s3_creds_container(c, e)
                 : c->from_endpoint == 3 ? s3_creds_process(c, e)
                                         : s3_creds_imds(c, e);
        if (rc == 1) rc = err_set(e, ERR_STORE, "%s: no longer answers", c->creds_source);
    }
    if (!rc) {
        snprintf(ak, akcap, "%s", c->access_key);
        snprintf(sk, skcap, "%s", c->secret_key);
        snprintf(tok, tokcap, "%s", c->session_token);
    }
    pthread_mutex_unlock(mu);
    return rc;
}
