/* test_manifest.c — the cluster section of the config and the renderers of `tandem
 * manifest` (deploy/manifest.h), without a scheduler: formats of the cluster.* strings
 * (each error names its key, a credential is never echoed), runs pinned before the
 * section existed still load, config_print_yaml loads back bit for bit, and the sbatch
 * script and Kubernetes objects hold what the config asks for and nothing it did not.
 * The scheduler-facing tests are tests/cli_slurm.sh (a real Slurm) and tests/cli_k8s.sh
 * (the API's schema and rules). */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config.h"
#include "deploy/manifest.h"
#include "deploy/sweep.h"
#include "tests/test.h"

static char *tmp;

static const char *tpath(const char *name) {
    static char buf[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%.4000s/%s", tmp, name);
    return buf[k];
}

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* A config from YAML text (written to tmp/NAME.yaml) and --set values. */
static int load(config *c, const char *name, const char *yaml, char *const *sets, int nsets,
                tdm_err *e) {
    char file[128];
    snprintf(file, sizeof file, "%s.yaml", name);
    if (write_text(tpath(file), yaml)) return -1;
    return config_load(c, tpath(file), sets, nsets, e);
}

static const char BASE[] = "data: {dataset: /corpus/dataset.yaml}\n"
                           "run: {episodes: 4}\n";

/* What a renderer wrote to its output and its warnings. */
typedef struct rendered {
    char *out, *warn;
    size_t out_len, warn_len;
    int rc;
    tdm_err e;
} rendered;

static void render(rendered *r, int slurm, const manifest_opts *o) {
    memset(r, 0, sizeof *r);
    FILE *out = open_memstream(&r->out, &r->out_len);
    FILE *warn = open_memstream(&r->warn, &r->warn_len);
    r->rc = slurm ? manifest_slurm(out, warn, o, &r->e) : manifest_k8s(out, warn, o, &r->e);
    fclose(out);
    fclose(warn);
}

static void rendered_free(rendered *r) {
    free(r->out);
    free(r->warn);
}

static manifest_opts opts(const config *c, const char *store) {
    return (manifest_opts){.cfg = c,
                           .config_path = "/shared/run.yaml",
                           .config_name = "run",
                           .store_url = store,
                           .tandem_binary = "/opt/tandem/bin/tandem",
                           .workdir = "/shared/jobs"};
}

/* Whether `s` is `head` and then "-" and 6 lowercase hex digits. */
static int named(const char *s, const char *head) {
    size_t n = strlen(head);
    if (strncmp(s, head, n) || s[n] != '-' || strlen(s) != n + 7) return 0;
    for (const char *p = s + n + 1; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return 1;
}

/* A line of `text` equal to `line`. */
static int has_line(const char *text, const char *line) {
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p += n)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0')) return 1;
    return 0;
}

static void test_cluster_defaults(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    CHECK(c && load(c, "defaults", BASE, NULL, 0, &e) == 0, "%s", e.msg);
    const struct config_cluster *k = &c->cluster;
    int ok = k->nodes == 1 && k->gpus_per_node == 0 && !strcmp(k->gpu_type, "h100") &&
             k->cpus_per_task == 0 && !k->memory[0] && k->signal_lead_s == 300 &&
             k->grace_period_s == 120 && k->backoff_limit == 3 && k->coordinator_port == 29500 &&
             k->cloud == CONFIG_CLOUD_NONE && !k->spot && !k->image[0] && !k->env[0];
    free(c);
    CHECK(ok, "cluster defaults");
}

/* Each "key=value" either loads or fails naming the key (and `want` when given). */
static void test_cluster_formats(void) {
    static const struct {
        const char *set;
        int ok;
        const char *want;
    } cases[] = {
        {"cluster.memory=64G", 1, NULL},
        {"cluster.memory=512", 1, NULL},
        {"cluster.memory=64 GB", 0, "expected a size"},
        {"cluster.memory=0G", 0, "expected a size"},
        {"cluster.memory=64Gi", 0, "expected a size"},
        {"cluster.time_limit=30", 1, NULL},
        {"cluster.time_limit=24:00:00", 1, NULL},
        {"cluster.time_limit=2-12", 1, NULL},
        {"cluster.time_limit=2-12:30:00", 1, NULL},
        {"cluster.time_limit=UNLIMITED", 1, NULL},
        {"cluster.time_limit=1:2:3:4", 0, "Slurm time limit"},
        {"cluster.time_limit=1h", 0, "Slurm time limit"},
        /* a field past 8 digits: the seconds overflowed a long (wrapped, it passed the
         * grace check or failed it with a nonsense figure) */
        {"cluster.time_limit=99999999999999999999", 0, "at most 8 digits"},
        {"cluster.time_limit=307445734561825861", 0, "at most 8 digits"},
        {"cluster.time_limit=99999999-23:59:59", 1, NULL},
        {"cluster.partition=gpu,gpu-spot", 1, NULL},
        {"cluster.partition=gpu spot", 0, "expected names"},
        {"cluster.partition=gpu,", 0, "expected names"},
        {"cluster.account=a;rm", 0, "expected letters"},
        {"cluster.gpu_type=h100,a100", 0, "expected letters"},
        {"cluster.job_name=tandem-160m", 1, NULL},
        {"cluster.job_name=Tandem", 0, "DNS label"},
        {"cluster.job_name=a-", 0, "DNS label"},
        /* a Service name (the headless Service of a multi-node Job) starts with a letter */
        {"cluster.job_name=1run", 0, "starting with a letter"},
        {"cluster.job_name=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0, "63"},
        {"cluster.node_selector=pool=a,cloud.google.com/gke-spot=true", 1, NULL},
        {"cluster.node_selector=pool", 0, "key=value"},
        {"cluster.node_selector=pool=a,", 0, "trailing"},
        {"cluster.node_selector==a", 0, "key=value"},
        {"cluster.node_selector=a=-b", 0, "key=value"},
        /* a key twice: the manifest would keep only the last value, silently */
        {"cluster.node_selector=pool=a,zone=x,pool=b", 0, "twice"},
        {"cluster.node_selector=pool=a,pool=a", 0, "twice"},
        {"cluster.node_selector=pool=a,pool2=b,poo=c", 1, NULL},
        {"cluster.tolerations=k=v:NoSchedule,k2:NoExecute,k3,k4:PreferNoSchedule", 1, NULL},
        {"cluster.tolerations=k:Never", 0, "Effect"},
        {"cluster.tolerations=:NoSchedule", 0, "tolerations"},
        {"cluster.secret_name=tandem-aws", 1, NULL},
        {"cluster.secret_name=Tandem_AWS", 0, "object name"},
        {"cluster.data_pvc=corpus.v2", 1, NULL},
        {"cluster.image=registry.example.com:5000/tandem@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 1, NULL},
        {"cluster.image=registry.example.com:5000/tandem@sha256:abc", 0, "image reference"},
        /* what the runtime's digest check refuses (InvalidImageName): a sha256 of other than
         * 64 digits, upper-case hex, an algorithm it does not know (all passed before) */
        {"cluster.image=reg.io/img@sha256:0123456789abcdef0123456789abcdef", 0, "64"},
        {"cluster.image=reg.io/img@sha256:0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF", 0, "lowercase hex"},
        {"cluster.image=reg.io/img@md5:0123456789abcdef0123456789abcdef", 0, "image reference"},
        {"cluster.image=reg.io/img:1@sha512:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 1, NULL},
        {"cluster.image=ghcr.io/org/tandem:0.1", 1, NULL},
        {"cluster.image=Registry.Example.com/tandem:v1", 1, NULL}, /* capitals: a domain */
        /* accepted by the API server, refused by the kubelet (pods stay in InvalidImageName) */
        {"cluster.image=ghcr.io/Org/tandem:0.1", 0, "lowercase"},
        {"cluster.image=tandem:0.1;rm", 0, "image reference"},
        {"cluster.image=tandem::", 0, "image reference"},
        {"cluster.image=tandem\xc2\xa0", 0, "image reference"}, /* a no-break space */
        {"cluster.image=a___b", 0, "image reference"},
        {"cluster.image=tandem latest", 0, "image"},
        {"cluster.env=AWS_REGION=us-east-1,NOTE=a b=c", 1, NULL},
        {"cluster.env=1A=x", 0, "NAME"},
        {"cluster.env=A", 0, "NAME=value"},
        {"cluster.env=db_password=x", 0, "looks like a credential"},
        {"cluster.env=A=1,HF_TOKEN=x", 0, "'HF_TOKEN' looks like a credential"},
        /* a URL holding its password (an endpoint, a proxy): refused, never rendered; a port
         * or an IPv6 host is no user info */
        {"cluster.env=AWS_ENDPOINT_URL=http://user:SECRET@host:9000", 0, "'AWS_ENDPOINT_URL' holds a URL with user info"},
        {"cluster.env=A=1,HTTPS_PROXY=http://u:SECRET@proxy", 0, "'HTTPS_PROXY' holds a URL with user info"},
        {"cluster.env=X=https://u:pa/ss@host/p", 0, "user info"},
        /* user info without a well-formed "://" (rendered into the job before) */
        {"cluster.env=AWS_ENDPOINT_URL=http:/u:SECRET@h:1", 0, "'AWS_ENDPOINT_URL' holds a URL with user info"},
        {"cluster.env=HTTPS_PROXY=u:SECRET@proxy:3128", 0, "'HTTPS_PROXY' holds a URL with user info"},
        {"cluster.env=X=http:\\\\u:SECRET@h", 0, "user info"},
        /* a ':' then an '@' that is an image digest, or an '@' alone: no user info */
        {"cluster.env=IMG=reg.io:5000/img@sha256:0123,MAIL=me@example.com", 1, NULL},
        /* an image with user info: refused as no reference, and not repeated */
        {"cluster.image=https://u:SECRET@registry/img:1", 0, "got 'https://***@registry/img:1'"},
        {"cluster.env=AWS_ENDPOINT_URL=http://host:9000,P=http://[::1]:8080/x", 1, NULL},
        /* TOKEN inside another word is none: Hugging Face's tokenizers read this one */
        {"cluster.env=TOKENIZERS_PARALLELISM=false", 1, NULL},
        /* what the job sets itself: given again, every pod would be rank 0 of 1 */
        {"cluster.env=TANDEM_RANK=0", 0, "set by the job itself"},
        {"cluster.env=A=1,TANDEM_WORLD_SIZE=1", 0, "set by the job itself"},
        {"cluster.env=SLURM_ARRAY_TASK_ID=0", 0, "set by the job itself"},
        {"cluster.env=TANDEM_S3_CONCURRENCY=4", 1, NULL},
        {"cluster.env=A=1,B=2,A=3", 0, "given twice"},
        {"cluster.env=AB=1,A=2", 1, NULL},
        {"cluster.cloud=gke", 1, NULL},
        {"cluster.cloud=gcp", 0, "none, gke, eks, aks"},
        {"cluster.nodes=0", 0, "too small"},
        {"cluster.gpus_per_node=65", 0, "too large"},
        {"cluster.signal_lead_s=0", 0, "too small"},
        /* the lead (300 s by default) must be shorter than the limit: else Slurm signals at once */
        {"cluster.time_limit=00:04:00", 0, "not shorter than"},
        {"cluster.time_limit=5", 0, "not shorter than"},
        {"cluster.time_limit=6", 1, NULL},
        {"cluster.time_limit=1-00", 1, NULL},
        {"cluster.grace_period_s=-1", 0, "too small"},
        {"cluster.workdir=/a\tb", 0, "control"},
    };
    config *c = malloc(sizeof *c);
    CHECK(c, "oom");
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tdm_err e = {0};
        char *sets[] = {(char *)cases[i].set};
        int rc = load(c, "formats", BASE, sets, 1, &e);
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(cases[i].set, "="), cases[i].set);
        int good = cases[i].ok ? rc == 0
                               : rc == ERR_USAGE && strstr(e.msg, key) && !strstr(e.msg, "SECRET") &&
                                     (!cases[i].want || strstr(e.msg, cases[i].want));
        if (!good) {
            fprintf(stderr, "  %s: rc %d: %s\n", cases[i].set, rc, rc ? e.msg : "(accepted)");
            bad++;
        }
    }
    /* more labels or tolerations than the manifest holds: refused, not dropped past 48 */
    for (int t = 0; t < 4; t++) {
        char set[4096];
        int n = (t % 2) ? 41 : 40;
        size_t at = (size_t)snprintf(set, sizeof set, "cluster.%s=", t < 2 ? "node_selector" : "tolerations");
        for (int i = 0; i < n; i++)
            at += (size_t)snprintf(set + at, sizeof set - at, "%sk%d=v", i ? "," : "", i);
        tdm_err e = {0};
        char *sets[] = {set};
        int rc = load(c, "many", BASE, sets, 1, &e);
        int good = (t % 2) ? rc == ERR_USAGE && strstr(e.msg, "more than 40") : rc == 0;
        if (!good) {
            fprintf(stderr, "  %d entries of %.30s: rc %d: %s\n", n, set, rc, rc ? e.msg : "(accepted)");
            bad++;
        }
    }
    free(c);
    CHECK(!bad, "%d format cases", bad);
}

/* A credential in cluster.env is refused without its value in the message, from the
 * command line and from a file. */
static void test_credentials_never_echoed(void) {
    config *c = malloc(sizeof *c);
    CHECK(c, "oom");
    tdm_err e = {0};
    char *sets[] = {"cluster.env=AWS_REGION=x,AWS_SECRET_ACCESS_KEY=s3cr3t-value"};
    int rc1 = load(c, "cred", BASE, sets, 1, &e);
    int ok1 = rc1 == ERR_USAGE && strstr(e.msg, "AWS_SECRET_ACCESS_KEY") &&
              strstr(e.msg, "cluster.env") && !strstr(e.msg, "s3cr3t");
    char msg1[sizeof e.msg];
    snprintf(msg1, sizeof msg1, "%s", e.msg);
    int rc2 = load(c, "cred2",
                   "data: {dataset: /d.yaml}\ncluster:\n  env: MY_TOKEN=s3cr3t-value\n", NULL, 0,
                   &e);
    int ok2 = rc2 == ERR_USAGE && strstr(e.msg, "MY_TOKEN") && strstr(e.msg, "cred2.yaml:3") &&
              !strstr(e.msg, "s3cr3t");
    char msg2[sizeof e.msg];
    snprintf(msg2, sizeof msg2, "%s", e.msg);
    /* a password inside a URL value (before: rendered into the script's argv and the Job) */
    int rc3 = load(c, "cred3", "data: {dataset: /d.yaml}\ncluster:\n  env: HTTPS_PROXY=http://me:s3cr3t@proxy:3128\n",
                   NULL, 0, &e);
    int ok3 = rc3 == ERR_USAGE && strstr(e.msg, "HTTPS_PROXY") && strstr(e.msg, "cred3.yaml:3") &&
              !strstr(e.msg, "s3cr3t");
    free(c);
    CHECK(ok1, "--set: rc %d: %s", rc1, msg1);
    CHECK(ok2, "file: rc %d: %s", rc2, msg2);
    CHECK(ok3, "a URL's password: rc %d: %s", rc3, e.msg);
}

/* Runs pinned before the cluster section existed: their canonical form lacks cluster.*
 * and must still load (with the defaults); any other missing key is still an error. */
static void test_canonical_without_cluster(void) {
    config *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    config_kv *kv = NULL;
    size_t n = 0;
    tdm_err e = {0};
    int ok = a && b && load(a, "canon", BASE, NULL, 0, &e) == 0 &&
             config_canonical(a, &kv, &n, &e) == 0;
    size_t m = 0;
    for (size_t i = 0; ok && i < n; i++)
        if (strncmp(kv[i].key, "cluster.", 8) != 0) kv[m++] = kv[i];
    int rc = ok ? config_from_canonical(b, kv, m, &e) : -1;
    int same = rc == 0 && !memcmp(&a->cluster, &b->cluster, sizeof a->cluster) &&
               a->run.episodes == b->run.episodes;
    int rc_missing = ok ? config_from_canonical(b, kv + 1, m - 1, &e) : -1;
    int named = rc_missing == ERR_USAGE && strstr(e.msg, kv[0].key) && strstr(e.msg, "missing");
    free(kv);
    free(a);
    free(b);
    CHECK(ok, "setup: %s", e.msg);
    CHECK(m < n, "the canonical form lists cluster keys");
    CHECK(same, "without cluster.* keys: rc %d", rc);
    CHECK(named, "another missing key is still an error (rc %d)", rc_missing);
}

/* config_print_yaml writes a file that loads back to the same canonical form, awkward
 * strings and floats included. */
static void test_yaml_round_trip(void) {
    config *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    CHECK(a && b, "oom");
    tdm_err e = {0};
    char *sets[] = {"preset=data-restricted-1b",
                    "data.dataset=/data/it's a \"corpus\"\\v2/é/dataset.yaml",
                    "tandem.gamma=0.1",
                    "tandem.lr_alpha=1e-300",
                    "checkpoint.every_seconds=5e-324",
                    "optim.lr_min=1.5e-7",
                    "cluster.gpus_per_node=8",
                    "cluster.env=NOTE=a \"b\" c,AWS_REGION=eu-west-1",
                    "cluster.tolerations=k=v:NoSchedule",
                    "cluster.spot=true",
                    "cluster.cloud=aks",
                    "cluster.time_limit=1-00:00:00"};
    int rc = load(a, "rt", BASE, sets, (int)(sizeof sets / sizeof sets[0]), &e);
    FILE *f = rc ? NULL : fopen(tpath("printed.yaml"), "w");
    if (f) {
        config_print_yaml(f, a, "");
        fclose(f);
    }
    int rc2 = f ? config_load(b, tpath("printed.yaml"), NULL, 0, &e) : -1;
    config_kv *ka = NULL, *kb = NULL;
    size_t na = 0, nb = 0;
    int same = rc2 == 0 && config_canonical(a, &ka, &na, &e) == 0 &&
               config_canonical(b, &kb, &nb, &e) == 0 && na == nb;
    for (size_t i = 0; same && i < na; i++)
        if (strcmp(ka[i].key, kb[i].key) || strcmp(ka[i].value, kb[i].value)) {
            fprintf(stderr, "  %s: %s vs %s\n", ka[i].key, ka[i].value, kb[i].value);
            same = 0;
        }
    free(ka);
    free(kb);
    free(a);
    free(b);
    CHECK(rc == 0, "load: %s", e.msg);
    CHECK(rc2 == 0, "printed config does not load: %s", e.msg);
    CHECK(same, "printed config differs");
}

static void test_job_names(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    CHECK(c && load(c, "names", BASE, NULL, 0, &e) == 0, "%s", e.msg);
    manifest_opts o = opts(c, "s3://b/p");
    char name[128];
    o.config_name = "My Run.v2__final";
    manifest_job_name(&o, name, sizeof name);
    int a = named(name, "tandem-my-run-v2-final");
    o.config_name = "_";
    manifest_job_name(&o, name, sizeof name);
    int empty = named(name, "tandem"); /* no letters or digits: "tandem-<hash>", not "tandem--" */
    o.config_name = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    manifest_job_name(&o, name, sizeof name);
    int b = strlen(name) == 63;
    c->cluster.nodes = 100; /* room for "-99" */
    manifest_job_name(&o, name, sizeof name);
    int d = strlen(name) == 60;
    snprintf(c->cluster.job_name, sizeof c->cluster.job_name, "given");
    manifest_job_name(&o, name, sizeof name);
    int g = !strcmp(name, "given");
    free(c);
    CHECK(a, "sanitised name");
    CHECK(empty, "a config name of no letters or digits");
    CHECK(b, "cut to 63");
    CHECK(d, "room for the pod index");
    CHECK(g, "cluster.job_name wins");
}

/* The default name ends in a hash of the job's store: configs of one name in two folders
 * (two stores) are two jobs — one name made Slurm's singleton hold an unrelated run back
 * and one Kubernetes run's ConfigMap replace the other's — while every spelling of one
 * store gives one name (a resubmit keeps it). */
static void test_job_names_per_store(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    CHECK(c && load(c, "names3", BASE, NULL, 0, &e) == 0, "%s", e.msg);
    manifest_opts o = opts(c, "file:///shared/expa/runs/run");
    char a[128], a2[128], a3[128], a4[128], b[128], s1[128], s2[128], s3[128], s4[128];
    manifest_job_name(&o, a, sizeof a);
    o.store_url = "/shared/expa/runs/run";
    manifest_job_name(&o, a2, sizeof a2);
    o.workdir = "/shared/expa";
    o.store_url = "file://./runs/run";
    manifest_job_name(&o, a3, sizeof a3);
    o.store_url = "runs/run";
    manifest_job_name(&o, a4, sizeof a4);
    o.workdir = "/shared/expb";
    manifest_job_name(&o, b, sizeof b);
    o.store_url = "s3://bkt/a";
    manifest_job_name(&o, s1, sizeof s1);
    o.store_url = "s3://bkt/a/";
    manifest_job_name(&o, s2, sizeof s2);
    o.store_url = "S3://bkt/a";
    manifest_job_name(&o, s3, sizeof s3);
    o.store_url = "s3://bkt/b";
    manifest_job_name(&o, s4, sizeof s4);
    free(c);
    CHECK(named(a, "tandem-run"), "%s", a);
    CHECK(!strcmp(a, a2) && !strcmp(a, a3) && !strcmp(a, a4), "one file store, four spellings: %s %s %s %s", a, a2,
          a3, a4);
    CHECK(strcmp(a, b) != 0, "runs/run in two folders: one name %s", a);
    CHECK(!strcmp(s1, s2) && !strcmp(s1, s3) && strcmp(s1, s4) != 0, "S3 stores: %s %s %s / %s", s1, s2, s3, s4);
}

/* Names that must not collide or overflow: two long config names with the same first 60
 * characters stay two jobs (a cut name ends in a hash of the whole), the jobs of --compare
 * dmo and finals differ with cluster.job_name too, and an Indexed Job of a sweep leaves
 * room for its pods' "-<index>" (the API server refuses the Job otherwise). */
static void test_job_names_distinct(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    CHECK(c && load(c, "names2", BASE, NULL, 0, &e) == 0, "%s", e.msg);
    snprintf(c->cluster.image, sizeof c->cluster.image, "tandem:1");
    manifest_opts o = opts(c, "s3://b/p");
    char n1[128], n2[128], n3[128], n4[128];
    o.config_name = "data-restricted-160m-gke-h100-spot-ablation-lr-alpha-seed1";
    manifest_job_name(&o, n1, sizeof n1);
    o.config_name = "data-restricted-160m-gke-h100-spot-ablation-lr-alpha-seed2";
    manifest_job_name(&o, n2, sizeof n2);
    CHECK(strlen(n1) == 63 && strlen(n2) == 63 && strcmp(n1, n2) != 0, "long names: %s / %s", n1, n2);
    /* the parts of a comparison, named by cluster.job_name */
    snprintf(c->cluster.job_name, sizeof c->cluster.job_name, "study");
    o.name_suffix = "-dmo";
    manifest_job_name(&o, n3, sizeof n3);
    o.name_suffix = "-finals";
    manifest_job_name(&o, n4, sizeof n4);
    CHECK(!strcmp(n3, "study-dmo") && !strcmp(n4, "study-finals"), "compare parts: %s / %s", n3, n4);
    o.name_suffix = NULL;
    /* a sweep of 12 points: the pods are <job>-0 .. <job>-11 */
    sweep sw;
    char *texts[] = {"run.seed=1,2,3,4,5,6,7,8,9,10,11,12"};
    CHECK(sweep_parse(&sw, texts, 1, &e) == 0, "%s", e.msg);
    o.sweep = &sw;
    o.sweep_texts = texts;
    o.nsweeps = 1;
    memset(c->cluster.job_name, 'a', 63);
    c->cluster.job_name[63] = '\0';
    rendered r;
    render(&r, 0, &o);
    int refused = r.rc == ERR_USAGE && strstr(r.e.msg, "12 points") && strstr(r.e.msg, "at most 60");
    rendered_free(&r);
    c->cluster.job_name[0] = '\0';
    o.config_name = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    manifest_job_name(&o, n1, sizeof n1);
    render(&r, 0, &o);
    int fits = r.rc == 0 && strlen(n1) == 60;
    rendered_free(&r);
    sweep_free(&sw);
    free(c);
    CHECK(refused, "a 63-character job name for 12 sweep points: refused naming the room");
    CHECK(fits, "an automatic name leaves room for -11: %s (%zu)", n1, strlen(n1));
}

/* What Kubernetes would read otherwise: '$' in a command or env value is the kubelet's
 * $(VAR) expansion and $$ escape (doubled here, each arrives as itself), and plain YAML
 * 1.1 scalars (on, 017, NO, null) as keys or env names are no strings. */
static void test_k8s_text_as_given(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    CHECK(c && load(c, "k8stext", BASE, NULL, 0, &e) == 0, "%s", e.msg);
    snprintf(c->cluster.image, sizeof c->cluster.image, "tandem:1");
    snprintf(c->cluster.node_selector, sizeof c->cluster.node_selector, "on=a,017=b");
    snprintf(c->cluster.env, sizeof c->cluster.env, "NO=1,null=x$$y$(TANDEM_GRACE_S)");
    manifest_opts o = opts(c, "s3://b/exp$$1/run-$(TANDEM_GRACE_S)");
    rendered r;
    render(&r, 0, &o);
    int ok = r.rc == 0 && strstr(r.out, "\"--store\", \"s3://b/exp$$$$1/run-$$(TANDEM_GRACE_S)\"") &&
             strstr(r.out, "\"on\": \"a\"") && strstr(r.out, "\"017\": \"b\"") &&
             strstr(r.out, "- name: \"NO\"\n          value: \"1\"") &&
             strstr(r.out, "- name: \"null\"\n          value: \"x$$$$y$$(TANDEM_GRACE_S)\"");
    if (!ok) fprintf(stderr, "%s\n%s\n", r.e.msg, r.out ? r.out : "");
    rendered_free(&r);
    /* a mounted Secret's files are the Job's own env entries: not again from cluster.env */
    snprintf(c->cluster.secret_name, sizeof c->cluster.secret_name, "aws");
    snprintf(c->cluster.env, sizeof c->cluster.env, "A=1,AWS_CONFIG_FILE=/x");
    render(&r, 0, &o);
    int dup = r.rc == ERR_USAGE && strstr(r.e.msg, "AWS_CONFIG_FILE") && strstr(r.e.msg, "cluster.secret_name");
    rendered_free(&r);
    free(c);
    CHECK(ok, "dollars doubled, keys and env names quoted");
    CHECK(dup, "cluster.env repeating the mounted Secret's AWS_CONFIG_FILE: refused");
}

static void test_slurm_directives(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    CHECK(c && load(c, "slurm", BASE, NULL, 0, &e) == 0, "%s", e.msg);
    rendered r, g, u, x;
    manifest_opts o = opts(c, "s3://b/p");
    render(&r, 1, &o);
    c->cluster.gpus_per_node = 8;
    c->cluster.cpus_per_task = 16;
    snprintf(c->cluster.memory, sizeof c->cluster.memory, "256G");
    snprintf(c->cluster.time_limit, sizeof c->cluster.time_limit, "12:00:00");
    snprintf(c->cluster.partition, sizeof c->cluster.partition, "gpu");
    snprintf(c->cluster.account, sizeof c->cluster.account, "ml");
    c->cluster.signal_lead_s = 420;
    render(&g, 1, &o);
    c->cluster.gpu_type[0] = '\0';
    render(&u, 1, &o);
    c->cluster.nodes = 3;
    render(&x, 1, &o);
    int cpu_ok = r.rc == 0 && !strstr(r.out, "--gres") && !strstr(r.out, "--mem") &&
                 !strstr(r.out, "--time") && !strstr(r.out, "--partition") &&
                 !strstr(r.out, "--cpus-per-task") && has_line(r.out, "#SBATCH --requeue") &&
                 has_line(r.out, "#SBATCH --open-mode=append") &&
                 has_line(r.out, "#SBATCH --signal=B:USR1@300") &&
                 has_line(r.out, "#SBATCH --chdir=/shared/jobs") &&
                 strstr(r.out, "#SBATCH --job-name=tandem-run-") &&
                 has_line(r.out, "#SBATCH --dependency=singleton") &&
                 has_line(r.out, "TANDEM=/opt/tandem/bin/tandem") &&
                 has_line(r.out, "CONFIG=/shared/run.yaml") && !strstr(r.out, "TANDEM_COORDINATOR");
    int gpu_ok = g.rc == 0 && has_line(g.out, "#SBATCH --gres=gpu:h100:8") &&
                 has_line(g.out, "#SBATCH --mem=256G") && has_line(g.out, "#SBATCH --time=12:00:00") &&
                 has_line(g.out, "#SBATCH --partition=gpu") && has_line(g.out, "#SBATCH --account=ml") &&
                 has_line(g.out, "#SBATCH --cpus-per-task=16") &&
                 has_line(g.out, "#SBATCH --signal=B:USR1@420") &&
                 strstr(g.out, "srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --cpus-per-task=16");
    int untyped = u.rc == 0 && has_line(u.out, "#SBATCH --gres=gpu:8") && strstr(u.warn, "any GPU");
    int multi = x.rc == 0 && has_line(x.out, "#SBATCH --nodes=3") &&
                has_line(x.out, "export TANDEM_WORLD_SIZE=3") &&
                strstr(x.out, "head -n 1):29500\"") &&
                strstr(x.out, "srun --nodes=3 --ntasks=3 --ntasks-per-node=1 --mpi=pmix");
    int warned = strstr(g.warn, "run.device = cpu") != NULL;
    if (!cpu_ok) fprintf(stderr, "%s\n", r.out);
    rendered_free(&r);
    rendered_free(&g);
    rendered_free(&u);
    rendered_free(&x);
    free(c);
    CHECK(cpu_ok, "CPU job: directives");
    CHECK(gpu_ok, "GPU job: directives");
    CHECK(untyped, "untyped GPUs");
    CHECK(multi, "several nodes");
    CHECK(warned, "GPUs with run.device = cpu warn");
}

/* Paths and stores made absolute against the job's directory; --set values quoted for
 * the shell; cluster.* values not passed to tandem run; no credential in the script. */
static void test_slurm_words(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    char *sets[] = {"data.dataset=/data/it's here/dataset.yaml", "cluster.nodes=1"};
    CHECK(c && load(c, "words",
                    "data: {dataset: /d.yaml}\n"
                    "cluster: {workdir: jobs/a, credentials_file: aws.env}\n",
                    sets, 2, &e) == 0,
          "%s", e.msg);
    CHECK(write_text(tpath("aws.env"), "AWS_SECRET_ACCESS_KEY=never-in-a-script\n") == 0, "creds");
    manifest_opts o = opts(c, "file://./runs/x");
    o.sets = sets;
    o.nsets = 2;
    rendered r, s, p, bad;
    render(&r, 1, &o);
    o.store_url = "store/y";
    render(&s, 1, &o);
    o.store_url = "s3://bucket/prefix";
    render(&p, 1, &o);
    o.config_path = "relative.yaml";
    render(&bad, 1, &o);
    char want_store[4300], want_creds[4300], want_dir[4300];
    const char *wd = c->cluster.workdir; /* resolved against the config file's directory */
    snprintf(want_store, sizeof want_store, "STORE=file://%s/runs/x", wd);
    snprintf(want_creds, sizeof want_creds, "CREDENTIALS=%s/aws.env", tmp);
    snprintf(want_dir, sizeof want_dir, "#SBATCH --chdir=%s", wd);
    int paths = r.rc == 0 && wd[0] == '/' && has_line(r.out, want_store) &&
                has_line(r.out, want_dir) && has_line(r.out, want_creds);
    char want_s[4300];
    snprintf(want_s, sizeof want_s, "STORE=file://%s/store/y", wd);
    int bare = s.rc == 0 && has_line(s.out, want_s);
    int s3 = p.rc == 0 && has_line(p.out, "STORE=s3://bucket/prefix") && !strstr(p.warn, "no cluster.credentials_file");
    int quoted = strstr(r.out, "--set 'data.dataset=/data/it'\\''s here/dataset.yaml'") != NULL;
    int no_cluster = !strstr(r.out, "--set cluster.") && !strstr(r.out, "--set 'cluster.");
    int no_secret = !strstr(r.out, "never-in-a-script") && strstr(r.out, "load_credentials \"$CREDENTIALS\" || exit 2");
    int refused = bad.rc == ERR_USAGE && strstr(bad.e.msg, "absolute");
    rendered_free(&r);
    rendered_free(&s);
    rendered_free(&p);
    rendered_free(&bad);
    free(c);
    CHECK(paths, "absolute store, workdir and credentials path");
    CHECK(bare, "a bare store path is a file store in the job's directory");
    CHECK(s3, "an s3 store is kept as is");
    CHECK(quoted, "--set value quoted for the shell");
    CHECK(no_cluster, "cluster.* passed on to tandem run");
    CHECK(no_secret, "credentials file contents in the script");
    CHECK(refused, "a relative config path on the nodes is refused");
}

/* A config named by a relative path (configs/x.yaml): its relative tandem_binary and
 * credentials_file are relative to the config's directory, as every path key's, and a
 * relative --set path to the directory tandem manifest runs in — not to the job's
 * cluster.workdir (before: /scratch/me/configs/aws.env, another file than the absolute
 * config path gave; --set data.dataset=corp/d.yaml passed on as is, read in /scratch/me).
 * Kubernetes refuses a relative tandem_binary (no path of the image). */
static void test_slurm_relative_config(void) {
    char here[4096];
    CHECK(getcwd(here, sizeof here) && chdir(tmp) == 0, "chdir");
    mkdir("configs", 0777);
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    char *sets[] = {"data.dataset=corp/d.yaml", "model.init=hf:./m", "data.mixture_file=/abs/mix.yaml"};
    CHECK(write_text("configs/x.yaml", "data: {dataset: /d.yaml}\n"
                                       "cluster: {workdir: /scratch/me, credentials_file: aws.env,\n"
                                       "          tandem_binary: ../bin/tandem}\n") == 0 &&
              config_load(c, "configs/x.yaml", sets, 3, &e) == 0,
          "%s", e.msg);
    manifest_opts o = opts(c, "file://./runs/x");
    o.sets = sets;
    o.nsets = 3;
    o.workdir = tmp; /* where tandem manifest runs */
    rendered r, k;
    render(&r, 1, &o);
    snprintf(c->cluster.image, sizeof c->cluster.image, "reg.io/tandem:1");
    render(&k, 0, &o);
    char want[6][4300];
    snprintf(want[0], sizeof want[0], "CREDENTIALS=%s/configs/aws.env", tmp);
    snprintf(want[1], sizeof want[1], "TANDEM=%s/configs/../bin/tandem", tmp);
    snprintf(want[2], sizeof want[2], "  --set data.dataset=%s/corp/d.yaml \\", tmp);
    snprintf(want[3], sizeof want[3], "  --set model.init=hf:%s/m \\", tmp);
    snprintf(want[4], sizeof want[4], "  --set data.mixture_file=/abs/mix.yaml &");
    snprintf(want[5], sizeof want[5], "#SBATCH --chdir=/scratch/me");
    CHECK(r.rc == 0, "render: %s", r.e.msg);
    for (int i = 0; r.rc == 0 && i < 6; i++) CHECK(has_line(r.out, want[i]), "no line: %s\n%s", want[i], r.out);
    CHECK(k.rc == ERR_USAGE && strstr(k.e.msg, "cluster.tandem_binary") && strstr(k.e.msg, "absolute"),
          "k8s with a relative tandem_binary: rc %d %s", k.rc, k.e.msg);
    rendered_free(&r);
    rendered_free(&k);
    /* the same config named by its absolute path: the loader joins ../bin/tandem to its
     * folder, an absolute path of this machine that the image lacks — still refused for
     * Kubernetes (it was rendered); given absolute in the file or by --set, it is taken */
    char abs_cfg[4300];
    snprintf(abs_cfg, sizeof abs_cfg, "%s/configs/x.yaml", tmp);
    char *img[] = {"cluster.image=reg.io/tandem:1", "cluster.tandem_binary=/opt/t/tandem"};
    int rcs[3];
    for (int v = 0; v < 3; v++) {
        if (v == 2)
            CHECK(write_text("configs/x.yaml", "data: {dataset: /d.yaml}\ncluster: {tandem_binary: /opt/t/tandem}\n") == 0,
                  "rewrite");
        CHECK(config_load(c, abs_cfg, img, v == 1 ? 2 : 1, &e) == 0, "%s", e.msg);
        manifest_opts ko = opts(c, "file://./runs/x");
        render(&k, 0, &ko);
        rcs[v] = k.rc;
        if (v == 0)
            CHECK(k.rc == ERR_USAGE && strstr(k.e.msg, "joined to the config's folder"), "k8s, joined: rc %d %s", k.rc,
                  k.e.msg);
        rendered_free(&k);
    }
    CHECK(rcs[1] == 0 && rcs[2] == 0, "k8s with an absolute tandem_binary (--set, file): rc %d %d", rcs[1], rcs[2]);
    free(c);
    CHECK(chdir(here) == 0, "chdir back");
}

static void test_k8s_requires_image(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    CHECK(c && load(c, "noimage", BASE, NULL, 0, &e) == 0, "%s", e.msg);
    manifest_opts o = opts(c, "s3://b/p");
    rendered r;
    render(&r, 0, &o);
    int ok = r.rc == ERR_USAGE && strstr(r.e.msg, "cluster.image") && r.out_len == 0;
    rendered_free(&r);
    free(c);
    CHECK(ok, "missing image: rc %d %s", r.rc, r.e.msg);
}

/* Text from the command line or the config that YAML cannot hold (not UTF-8, or
 * U+FFFE/U+FFFF even escaped) is refused naming where it came from (the flag, or the key),
 * and nothing is written; UTF-8 passes. It used to exit 0 with a manifest that no YAML
 * reader (kubectl included) accepts. */
static void test_k8s_refuses_text_yaml_cannot_hold(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    char *sets[] = {"cluster.image=registry.example/tandem:1"};
    CHECK(c && load(c, "utf8", BASE, sets, 1, &e) == 0, "%s", e.msg);
    config *bad = malloc(sizeof *bad);
    char *bad_sets[] = {"cluster.image=registry.example/tandem:1", "data.mixture_file=/data/caf\xe9.yaml"};
    CHECK(bad && load(bad, "latin1", BASE, bad_sets, 2, &e) == 0, "%s", e.msg);
    static const struct {
        const char *store, *from, *what;
        int bad_config;
    } cases[] = {
        {"s3://b/caf\xe9", NULL, "--store", 0},
        {"s3://b/a\xef\xbf\xbf", NULL, "--store", 0},
        {"s3://b/p", "tandem manifest k8s /x/\xef\xbf\xbe.yaml", "the command line", 0},
        {"s3://b/p", "tandem manifest k8s \xc0\xae.yaml", "the command line", 0},
        {"s3://b/p", NULL, "data.mixture_file: not valid UTF-8 text at byte 9", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        manifest_opts o = opts(cases[i].bad_config ? bad : c, cases[i].store);
        o.rendered_from = cases[i].from;
        rendered r;
        render(&r, 0, &o);
        int ok = r.rc == ERR_USAGE && strstr(r.e.msg, cases[i].what) && strstr(r.e.msg, "UTF-8") &&
                 r.out_len == 0;
        char msg[sizeof r.e.msg];
        snprintf(msg, sizeof msg, "%s", r.e.msg);
        rendered_free(&r);
        if (!ok) free(c), free(bad);
        CHECK(ok, "case %zu: rc %d: %s", i, r.rc, msg);
    }
    manifest_opts o = opts(c, "s3://b/caf\xc3\xa9/\xf0\x9f\x93\x81");
    o.rendered_from = "tandem manifest k8s caf\xc3\xa9.yaml";
    rendered r;
    render(&r, 0, &o);
    int ok = r.rc == 0 && r.out_len > 0 && strstr(r.out, "caf\xc3\xa9");
    rendered_free(&r);
    free(c);
    free(bad);
    CHECK(ok, "UTF-8 store refused: rc %d: %s", r.rc, r.e.msg);
}

static void test_k8s_node_selection(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    char *sets[] = {"cluster.image=reg/tandem:1", "cluster.gpus_per_node=8", "cluster.spot=true",
                    "cluster.memory=512M", "cluster.cpus_per_task=12"};
    CHECK(c && load(c, "k8s", BASE, sets, 5, &e) == 0, "%s", e.msg);
    manifest_opts o = opts(c, "s3://b/p");
    rendered gke, eks, aks, none, odd, user;
    c->cluster.cloud = CONFIG_CLOUD_GKE;
    render(&gke, 0, &o);
    c->cluster.cloud = CONFIG_CLOUD_EKS;
    render(&eks, 0, &o);
    c->cluster.cloud = CONFIG_CLOUD_AKS;
    render(&aks, 0, &o);
    c->cluster.cloud = CONFIG_CLOUD_NONE;
    render(&none, 0, &o);
    c->cluster.cloud = CONFIG_CLOUD_GKE;
    snprintf(c->cluster.gpu_type, sizeof c->cluster.gpu_type, "l4");
    render(&odd, 0, &o);
    snprintf(c->cluster.gpu_type, sizeof c->cluster.gpu_type, "h100");
    snprintf(c->cluster.node_selector, sizeof c->cluster.node_selector,
             "cloud.google.com/gke-spot=false,pool=big");
    snprintf(c->cluster.tolerations, sizeof c->cluster.tolerations, "team=ml:NoExecute,any");
    render(&user, 0, &o);
    int g = gke.rc == 0 && strstr(gke.out, "\"cloud.google.com/gke-accelerator\": \"nvidia-h100-80gb\"") &&
            strstr(gke.out, "\"cloud.google.com/gke-spot\": \"true\"") &&
            strstr(gke.out, "- key: \"cloud.google.com/gke-spot\"\n        operator: Equal\n"
                            "        value: \"true\"\n        effect: NoSchedule") &&
            strstr(gke.out, "- key: \"nvidia.com/gpu\"\n        operator: Exists\n        effect: NoSchedule") &&
            strstr(gke.out, "nvidia.com/gpu: \"8\"") && strstr(gke.out, "memory: \"512Mi\"") &&
            strstr(gke.out, "cpu: \"12\"");
    int k = eks.rc == 0 && strstr(eks.out, "\"node.kubernetes.io/instance-type\": \"p5.48xlarge\"") &&
            strstr(eks.out, "\"eks.amazonaws.com/capacityType\": \"SPOT\"");
    int a = aks.rc == 0 &&
            strstr(aks.out, "\"node.kubernetes.io/instance-type\": \"Standard_ND96isr_H100_v5\"") &&
            strstr(aks.out, "\"kubernetes.azure.com/scalesetpriority\": \"spot\"") &&
            strstr(aks.out, "key: \"kubernetes.azure.com/scalesetpriority\"");
    int n = none.rc == 0 && !strstr(none.out, "nodeSelector") && strstr(none.warn, "no spot labels");
    int u = odd.rc == 0 && strstr(odd.warn, "no node labels known for cluster.gpu_type = 'l4'") &&
            !strstr(odd.out, "gke-accelerator");
    int w = user.rc == 0 && strstr(user.out, "\"cloud.google.com/gke-spot\": \"false\"") &&
            !strstr(user.out, "\"cloud.google.com/gke-spot\": \"true\"") &&
            strstr(user.out, "\"pool\": \"big\"") &&
            strstr(user.out, "- key: \"team\"\n        operator: Equal\n        value: \"ml\"\n"
                             "        effect: NoExecute") &&
            /* no value, no effect: tolerates every taint with key "any" */
            strstr(user.out, "- key: \"any\"\n        operator: Exists\n      containers:");
    rendered_free(&gke);
    rendered_free(&eks);
    rendered_free(&aks);
    rendered_free(&none);
    rendered_free(&odd);
    rendered_free(&user);
    free(c);
    CHECK(g, "GKE");
    CHECK(k, "EKS");
    CHECK(a, "AKS");
    CHECK(n, "no cloud");
    CHECK(u, "unknown GPU type");
    CHECK(w, "the config's labels win, its tolerations are added");
}

static void test_k8s_job_shape(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    char *sets[] = {"cluster.image=reg/tandem:1", "cluster.secret_name=aws",
                    "cluster.grace_period_s=90", "cluster.backoff_limit=5",
                    "data.dataset=rel/dataset.yaml"}; /* from --set: stays relative */
    CHECK(c && load(c, "shape", BASE, sets, 5, &e) == 0, "%s", e.msg);
    manifest_opts o = opts(c, "s3://b/p");
    rendered one, idx, file;
    render(&one, 0, &o);
    c->cluster.nodes = 4;
    render(&idx, 0, &o);
    char jn[128], coord[300], sub[200];
    manifest_job_name(&o, jn, sizeof jn);
    snprintf(coord, sizeof coord, "%s-0.%s:29500", jn, jn);
    snprintf(sub, sizeof sub, "subdomain: \"%s\"", jn);
    o.store_url = "file:///tmp/x";
    c->cluster.nodes = 1;
    /* an absolute path of this machine (a relative one in a config file is resolved
     * against its folder here): said, as the pod reads it from the image */
    snprintf(c->data.dataset, sizeof c->data.dataset, "/home/me/corpus/dataset.yaml");
    render(&file, 0, &o);
    int s = one.rc == 0 && !strstr(one.out, "kind: Service") && strstr(one.out, "kind: ConfigMap") &&
            strstr(one.out, "restartPolicy: Never") && strstr(one.out, "backoffLimit: 5") &&
            strstr(one.out, "terminationGracePeriodSeconds: 90") &&
            strstr(one.out, "podReplacementPolicy: Failed") && strstr(one.out, "values: [75]") &&
            strstr(one.out, "values: [2, 5]") && strstr(one.out, "type: DisruptionTarget") &&
            strstr(one.out, "command: [\"/usr/local/bin/tandem\", \"run\", \"/etc/tandem/config.yaml\", "
                            "\"--store\", \"s3://b/p\"]") &&
            strstr(one.out, "secretName: \"aws\"") && !strstr(one.out, "nvidia.com/gpu") &&
            !strstr(one.warn, "no cluster.secret_name") && strstr(one.warn, "is relative");
    int x = idx.rc == 0 && strstr(idx.out, "kind: Service") && strstr(idx.out, "clusterIP: None") &&
            strstr(idx.out, "completionMode: Indexed") && strstr(idx.out, "completions: 4") &&
            strstr(idx.out, "backoffLimitPerIndex: 5") && !strstr(idx.out, "backoffLimit: 5") &&
            named(jn, "tandem-run") && strstr(idx.out, coord) && strstr(idx.out, sub);
    int f = file.rc == 0 && strstr(file.warn, "is a file store") &&
            strstr(file.warn, "data.dataset = /home/me/corpus/dataset.yaml: the pod reads the corpus at this path");
    rendered_free(&one);
    rendered_free(&idx);
    rendered_free(&file);
    free(c);
    CHECK(s, "single-node Job");
    CHECK(x, "Indexed Job");
    CHECK(f, "file store and dataset path warnings");
}

/* A '%' in any #SBATCH value: refused naming the key (Slurm expands %j in the log path,
 * relative to --chdir: the job failed to launch). */
static void test_slurm_directive_values(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    CHECK(c && load(c, "pct", BASE, NULL, 0, &e) == 0, "%s", e.msg);
    manifest_opts o = opts(c, "s3://b/p");
    rendered w, here;
    snprintf(c->cluster.workdir, sizeof c->cluster.workdir, "/shared/exp%%jx");
    render(&w, 1, &o);
    c->cluster.workdir[0] = '\0';
    o.workdir = "/shared/exp%1";
    render(&here, 1, &o);
    int ok = w.rc == ERR_USAGE && strstr(w.e.msg, "cluster.workdir = /shared/exp%jx") && strstr(w.e.msg, "'%'") &&
             here.rc == ERR_USAGE && strstr(here.e.msg, "/shared/exp%1") && strstr(here.e.msg, "set cluster.workdir");
    rendered_free(&w);
    rendered_free(&here);
    free(c);
    CHECK(ok, "a '%%' in the job's directory refused");
}

/* cluster.env: "\," is a ',' of the value on Slurm and Kubernetes alike; an unescaped one
 * is said to be the problem (before: the NAME was blamed). */
static void test_env_comma(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    char *sets[] = {"cluster.env=NO_PROXY=localhost\\,169.254.169.254,A=b\\c", "cluster.image=reg/tandem:1"};
    CHECK(c && load(c, "comma", BASE, sets, 2, &e) == 0, "%s", e.msg);
    manifest_opts o = opts(c, "s3://b/p");
    rendered sl, k8;
    render(&sl, 1, &o);
    render(&k8, 0, &o);
    int ok = sl.rc == 0 && strstr(sl.out, " env NO_PROXY=localhost,169.254.169.254 'A=b\\c' \\\n") &&
             k8.rc == 0 && strstr(k8.out, "- name: \"NO_PROXY\"\n          value: \"localhost,169.254.169.254\"");
    if (!ok) fprintf(stderr, "%s\n%s\n", sl.out ? sl.out : "", k8.out ? k8.out : "");
    rendered_free(&sl);
    rendered_free(&k8);
    config *d = malloc(sizeof *d);
    char *bad[] = {"cluster.env=NO_PROXY=localhost,169.254.169.254"};
    int rc = d ? load(d, "comma2", BASE, bad, 1, &e) : -1;
    free(c);
    free(d);
    CHECK(ok, "an escaped ',' reaches the job as ','");
    CHECK(rc == ERR_USAGE && strstr(e.msg, "a ',' separates the entries") && strstr(e.msg, "'\\,'") &&
          !strstr(e.msg, "NAME of letters"), "%s", e.msg);
}

/* What render time can see will go wrong: relative paths the pod resolves against
 * /etc/tandem, a grace tandem would overrun, a grace of 0, a job array above Slurm's
 * default MaxArraySize. */
static void test_render_warnings(void) {
    config *c = malloc(sizeof *c);
    tdm_err e = {0};
    char *sets[] = {"cluster.image=reg/tandem:1", "model.init=hf:./m", "data.mixture=file",
                    "data.mixture_file=mix.yaml", "checkpoint.grace_s=600", "cluster.grace_period_s=30"};
    CHECK(c && load(c, "warn", BASE, sets, 6, &e) == 0, "%s", e.msg);
    manifest_opts o = opts(c, "s3://b/p");
    rendered k, z, s, a;
    render(&k, 0, &o);
    c->cluster.grace_period_s = 0;
    render(&z, 0, &o);
    render(&s, 1, &o);
    sweep sw;
    char pts[8000] = "run.seed=";
    for (int i = 1; i <= 1002; i++) snprintf(pts + strlen(pts), sizeof pts - strlen(pts), "%s%d", i > 1 ? "," : "", i);
    char *texts[] = {pts};
    CHECK(sweep_parse(&sw, texts, 1, &e) == 0, "%s", e.msg);
    o.sweep = &sw;
    o.sweep_texts = texts;
    o.nsweeps = 1;
    render(&a, 1, &o);
    int kw = k.rc == 0 && strstr(k.warn, "data.mixture_file is a relative path") && !strstr(k.warn, "mix.yaml") &&
             strstr(k.warn, "model.init = hf:./m is a relative path") &&
             strstr(k.warn, "checkpoint.grace_s = 600 is longer than cluster.grace_period_s = 30");
    int zw = z.rc == 0 && strstr(z.warn, "cluster.grace_period_s = 0");
    int sw_ = s.rc == 0 && strstr(s.warn, "checkpoint.grace_s = 600 overrides the job's grace of 30 s") &&
              !strstr(s.warn, "MaxArraySize");
    int aw = a.rc == 0 && strstr(a.warn, "1002 points") && strstr(a.warn, "MaxArraySize");
    if (!kw || !zw || !sw_ || !aw) fprintf(stderr, "%s\n%s\n%s\n%s\n", k.warn, z.warn, s.warn, a.warn);
    rendered_free(&k);
    rendered_free(&z);
    rendered_free(&s);
    rendered_free(&a);
    sweep_free(&sw);
    free(c);
    CHECK(kw, "Kubernetes: relative mixture_file and model.init, checkpoint.grace_s over the grace");
    CHECK(zw, "Kubernetes: a grace of 0");
    CHECK(sw_, "Slurm: checkpoint.grace_s over the job's grace");
    CHECK(aw, "Slurm: more than 1001 array tasks");
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void) {
    tmp = test_tmpdir("manifest");
    RUN(test_cluster_defaults);
    RUN(test_cluster_formats);
    RUN(test_credentials_never_echoed);
    RUN(test_canonical_without_cluster);
    RUN(test_yaml_round_trip);
    RUN(test_job_names);
    RUN(test_job_names_distinct);
    RUN(test_job_names_per_store);
    RUN(test_slurm_directive_values);
    RUN(test_env_comma);
    RUN(test_render_warnings);
    RUN(test_k8s_text_as_given);
    RUN(test_slurm_directives);
    RUN(test_slurm_words);
    RUN(test_slurm_relative_config);
    RUN(test_k8s_requires_image);
    RUN(test_k8s_refuses_text_yaml_cannot_hold);
    RUN(test_k8s_node_selection);
    RUN(test_k8s_job_shape);
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(tmp);
    return test_summary("test_manifest");
}
