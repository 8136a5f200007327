/* manifest.c — sbatch scripts and Kubernetes objects from a run config; see manifest.h. */
#include "deploy/manifest.h"

#include "deploy/sweep.h"
#include "config/config.h"
#include "config/cluster_check.h"
#include "storage/url.h"
#include "util/outfile.h"
#include "util/ydoc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* The sweep of the job (NULL: one run), and point i's name as the comments show it. */
static const sweep *job_points(const manifest_opts *o) {
    return o->sweep && o->sweep->npoints > 0 && (o->nsweeps > 0 || o->command) ? o->sweep : NULL;
}

static void point_name(const manifest_opts *o, size_t i, char *out, size_t cap) {
    if (o->point_names) snprintf(out, cap, "%s", o->point_names[i]);
    else sweep_label(o->sweep, i, out, cap);
}

/* The tandem command each task runs ("run" unless the options name another). */
static const char *task_command(const manifest_opts *o) { return o->command ? o->command : "run"; }

/* ---------------------------------------------------------------------------------------
 * Text helpers
 * ------------------------------------------------------------------------------------- */

static void warnf(FILE *warn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(FILE *warn, const char *fmt, ...) {
    if (!warn) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("tandem manifest: warning: ", warn);
    vfprintf(warn, fmt, ap);
    fputc('\n', warn);
    va_end(ap);
}

/* One shell word: as is when it holds only safe characters, else in single quotes. */
static void sh_word(FILE *f, const char *s) {
    bool plain = *s != '\0';
    for (const char *p = s; plain && *p; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                strchr("_./:@%+=,-", *p);
    if (plain) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (const char *p = s; *p; p++) {
        if (*p == '\'') fputs("'\\''", f);
        else fputc(*p, f);
    }
    fputc('\'', f);
}


/* A file store (storage/url.h): a directory path or a file URL, not s3:// (a URL that does
 * not parse is no file store either; rendering it refuses below). */
static bool is_file_store(const char *url) {
    store_url_parts u;
    tdm_err e;
    return store_url_parse(url, &u, &e) == 0 && u.kind == STORE_URL_FILE;
}

/* `p` made absolute against `base` (lexically; `p` may not exist here). False when the
 * result does not fit. */
static bool abs_path(const char *base, const char *p, char *out, size_t cap) {
    int n = p[0] == '/' || !base ? snprintf(out, cap, "%s", p) : snprintf(out, cap, "%s/%s", base, p);
    return n >= 0 && (size_t)n < cap;
}

/* A --set text as a shell word, a relative path in its value made absolute against
 * `here` (where tandem manifest runs; a --set path is relative to it): the job runs in
 * cluster.workdir, where the path would name another file. */
static void set_word(FILE *out, const char *set, const char *here) {
    const char *eq = strchr(set, '=');
    char key[128];
    const char *rel = NULL;
    if (eq && (size_t)(eq - set) < sizeof key && here) {
        memcpy(key, set, (size_t)(eq - set));
        key[eq - set] = '\0';
        rel = config_relative_path(key, eq + 1);
    }
    if (!rel) {
        sh_word(out, set);
        return;
    }
    size_t n = strlen(set) + strlen(here) + 2;
    char *w = malloc(n);
    if (!w) {
        sh_word(out, set);
        return;
    }
    int head = (int)(rel - set); /* "key=" or "key=hf:" */
    while (rel[0] == '.' && rel[1] == '/') rel += 2;
    snprintf(w, n, "%.*s%s/%s", head, set, here, rel);
    sh_word(out, w);
    free(w);
}

/* Safe inside an #SBATCH line: no blanks, quotes or shell/sbatch specials, and no '%',
 * which Slurm expands in file names (%j: the job id; --output=%x-%j.out is relative to
 * --chdir, so a '%' there sent the log to a directory that does not exist and the job
 * failed to launch). */
static bool directive_safe(const char *s) {
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= ' ' || strchr("\"'\\`$#;&|<>()*?[]{}~%", *p)) return false;
    return true;
}

/* "64G" (Slurm: binary units, no unit = megabytes) → "64Gi" (a Kubernetes quantity). */
static void k8s_memory(const char *m, char *out, size_t cap) {
    size_t n = strlen(m);
    char unit = n ? m[n - 1] : 'M';
    if (n > 40) n = 40; /* the config allows far fewer digits than that */
    if (unit >= '0' && unit <= '9') snprintf(out, cap, "%.*sMi", (int)n, m);
    else snprintf(out, cap, "%.*s%ci", (int)(n - 1), m, unit);
}

/* The last index of an Indexed Job, whose pods are named <job>-<index>: the last node
 * of a distributed run, the last point of a sweep or of a comparison's final runs; -1 for
 * a Job of one pod. */
static long last_index(const manifest_opts *o) {
    const sweep *sw = job_points(o);
    if (o->cfg->cluster.nodes > 1) return o->cfg->cluster.nodes - 1;
    return sw ? (long)sw->npoints - 1 : -1;
}

/* The characters "-<index>" of the last pod add to the job name (0: not an Indexed Job). */
static size_t index_room(const manifest_opts *o) {
    long last = last_index(o);
    if (last < 0) return 0;
    size_t digits = 1;
    for (long n = last; n >= 10; n /= 10) digits++;
    return 1 + digits;
}

/* The store as the job names it: an S3 URL as the backends read it, a file store as
 * file:///ABS (a relative path taken against the job's directory: cluster.workdir, else
 * where tandem manifest runs, as the Slurm job reads it). */
static int job_store(const manifest_opts *o, char *out, size_t cap, tdm_err *e) {
    const struct config_cluster *k = &o->cfg->cluster;
    char wd[CONFIG_STR_MAX + 8], path[2 * CONFIG_STR_MAX + 16];
    store_url_parts su;
    if (store_url_parse(o->store_url, &su, e)) return e->code;
    if (su.kind != STORE_URL_FILE) {
        snprintf(out, cap, "%s", su.canon);
        return 0;
    }
    const char *sp = su.path;
    while (sp[0] == '.' && sp[1] == '/') sp += 2; /* ./runs/x */
    if (!abs_path(o->workdir, k->workdir[0] ? k->workdir : (o->workdir ? o->workdir : "."), wd, sizeof wd) ||
        !abs_path(wd, sp, path, sizeof path))
        return err_set(e, ERR_USAGE, "store %.200s: the absolute path is too long", sp);
    int n = snprintf(out, cap, "file://%s", path);
    if (n < 0 || (size_t)n >= cap) return err_set(e, ERR_USAGE, "store %.200s: the absolute path is too long", sp);
    return 0;
}

void manifest_job_name(const manifest_opts *o, char *out, size_t cap) {
    const config *c = o->cfg;
    const char *suffix = o->name_suffix ? o->name_suffix : "";
    if (c->cluster.job_name[0]) {
        snprintf(out, cap, "%s%s", c->cluster.job_name, suffix);
        return;
    }
    /* the config's name made a DNS label: lowercase, runs of anything else one '-' */
    char base[300];
    size_t len = 0;
    bool dash = true;
    for (const char *p = o->config_name ? o->config_name : ""; *p && len < sizeof base - 1; p++) {
        char ch = *p;
        if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
        if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) {
            base[len++] = ch;
            dash = false;
        } else if (!dash) {
            base[len++] = '-';
            dash = true;
        }
    }
    while (len > 0 && base[len - 1] == '-') len--;
    base[len] = '\0';
    /* "tandem-" + base + suffix, with room for "-<index>" of the last pod (63 characters
     * at most). A base cut short ends in 6 hex digits of a hash of the whole config name,
     * so that two long names that share their first ~50 characters (…-seed1, …-seed2) stay
     * two jobs: the same name would make Slurm's singleton hold one back for the other and
     * Kubernetes replace one's ConfigMap with the other's. */
    /* and then "-" and 6 hex digits of a hash of the store the job runs (the same store:
     * the same name, so a resubmit keeps it; another store: another name): expa/run.yaml
     * and expb/run.yaml, two runs, were both "tandem-run", and Slurm's singleton held one
     * back for the other while Kubernetes replaced one's ConfigMap with the other's */
    char st[3 * CONFIG_STR_MAX];
    tdm_err ignored;
    if (!o->store_url || job_store(o, st, sizeof st, &ignored))
        snprintf(st, sizeof st, "%s", o->store_url ? o->store_url : "");
    size_t sl = strlen(st);
    while (sl > 1 && st[sl - 1] == '/') sl--; /* s3://b/p/ is s3://b/p (the backend drops it) */
    uint32_t sh = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < sl; i++) sh = (sh ^ (unsigned char)st[i]) * 16777619u;
    size_t fixed = strlen("tandem-") + 7 + strlen(suffix) + index_room(o);
    size_t budget = fixed < 63 - 8 ? 63 - fixed : 8;
    if (len > budget) {
        uint32_t h = 2166136261u; /* FNV-1a */
        for (const char *p = o->config_name ? o->config_name : ""; *p; p++)
            h = (h ^ (unsigned char)*p) * 16777619u;
        len = budget - 7;
        while (len > 0 && base[len - 1] == '-') len--;
        snprintf(base + len, sizeof base - len, "-%06x", (unsigned)(h & 0xffffff));
    }
    /* a config name of no letters or digits (_.yaml, 实验.yaml): "tandem-<hash>" */
    snprintf(out, cap, "tandem%s%s-%06x%s", base[0] ? "-" : "", base, (unsigned)(sh & 0xffffff), suffix);
}

/* A Kubernetes Job name: a DNS label of at most 63 characters, and of an Indexed Job one
 * that leaves room for the pods' "-<index>" (the API server refuses a Job whose last pod
 * name would not be a DNS label). */
static int check_job_name(const manifest_opts *o, const char *name, tdm_err *e) {
    size_t room = index_room(o);
    if (strlen(name) + room <= 63) return 0;
    if (!room)
        return err_set(e, ERR_USAGE, "cluster.job_name = %s: the Job name %s is longer than a "
                       "Kubernetes name may be (63 characters); choose a shorter one",
                       o->cfg->cluster.job_name, name);
    char why[96];
    if (o->cfg->cluster.nodes > 1) snprintf(why, sizeof why, "cluster.nodes = %d", o->cfg->cluster.nodes);
    else snprintf(why, sizeof why, "%ld points (an Indexed Job)", last_index(o) + 1);
    return err_set(e, ERR_USAGE,
                   "cluster.job_name = %s: with %s the pod names %s-<index> exceed 63 characters; "
                   "choose a name of at most %zu",
                   o->cfg->cluster.job_name, why, name,
                   63 - room - (strlen(name) - strlen(o->cfg->cluster.job_name)));
}

static void common_warnings(FILE *warn, const manifest_opts *o) {
    const config *c = o->cfg;
    if (c->cluster.gpus_per_node > 0 && c->run.device == CONFIG_DEVICE_CPU)
        warnf(warn, "cluster.gpus_per_node = %d but run.device = cpu: the GPUs would idle",
              c->cluster.gpus_per_node);
    if (c->cluster.gpus_per_node == 0 && c->run.device != CONFIG_DEVICE_CPU)
        warnf(warn, "run.device = cuda but cluster.gpus_per_node = 0: the job gets no GPU");
}

/* ---------------------------------------------------------------------------------------
 * Slurm
 * ------------------------------------------------------------------------------------- */

/* The part of the batch script that does not depend on the config: functions for the
 * log, the credentials file, the signal traps and the wait loop. */
static const char SLURM_FUNCTIONS[] =
    "log() { printf '%s tandem-sbatch: %s\\n' \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" \"$*\"; }\n"
    "\n"
    "# NAME=value lines (\"export \" and quotes allowed, # comments, also after a value) of\n"
    "# AWS_* names from a file only its owner can read, exported into this shell: srun\n"
    "# passes them on to tandem.\n"
    "# No value is ever printed, and none is on a command line (export is a shell builtin).\n"
    "# The AWS_* credential names of the shell that ran sbatch (its environment reaches the\n"
    "# job) are unset first: a stale AWS_SESSION_TOKEN or AWS_PROFILE there would win over, or\n"
    "# mix with, the file's keys.\n"
    "load_credentials() {\n"
    "  local f=$1 line name value n=0 mode\n"
    "  unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_SECURITY_TOKEN \\\n"
    "    AWS_PROFILE AWS_DEFAULT_PROFILE AWS_SHARED_CREDENTIALS_FILE AWS_CONFIG_FILE \\\n"
    "    AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN AWS_ROLE_SESSION_NAME \\\n"
    "    AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_CREDENTIALS_RELATIVE_URI \\\n"
    "    AWS_CONTAINER_AUTHORIZATION_TOKEN\n"
    "  if [ ! -r \"$f\" ]; then log \"cluster.credentials_file $f: not readable\"; return 1; fi\n"
    "  mode=$(stat -L -c %a \"$f\")\n"
    "  case $mode in\n"
    "    [4-7]00) ;;\n"
    "    *) log \"cluster.credentials_file $f: mode $mode lets others read it: chmod 600 $f\"\n"
    "       return 1 ;;\n"
    "  esac\n"
    "  while IFS= read -r line || [ -n \"$line\" ]; do\n"
    "    n=$((n + 1))\n"
    "    line=${line%$'\\r'}  # a file written on Windows: the CR is no part of the value\n"
    "    line=${line#\"${line%%[![:space:]]*}\"}\n"
    "    case $line in '' | '#'*) continue ;; esac\n"
    "    line=${line#export }\n"
    "    name=${line%%=*}\n"
    "    value=${line#*=}\n"
    "    if [ \"$name\" = \"$line\" ] || ! [[ $name =~ ^AWS_[A-Z0-9_]+$ ]]; then\n"
    "      log \"cluster.credentials_file $f:$n: expected AWS_NAME=value\"\n"
    "      return 1\n"
    "    fi\n"
    "    value=${value%%[[:space:]]#*}  # an inline comment, as in a shell\n"
    "    value=${value%\"${value##*[![:space:]]}\"}  # blanks at the end\n"
    "    case $value in\n"
    "      \\\"*\\\" | \\'*\\') value=${value:1:${#value}-2} ;;\n"
    "    esac\n"
    "    export \"$name=$value\"\n"
    "  done <\"$f\"\n"
    "}\n"
    "\n"
    "# USR1 (Slurm's warning before the time limit, or `scancel --signal=USR1 --batch`) and\n"
    "# TERM (scancel, scontrol requeue, preemption) are both forwarded to the step as USR1:\n"
    "# tandem treats them alike (commit, exit 75), while srun would turn a TERM into a\n"
    "# SIGKILL of its tasks. A signal that comes before the step exists is sent when it starts,\n"
    "# and then again every second until the step has ended: srun drops a signal that comes\n"
    "# while it is still starting its tasks (tandem heeds the first one and ignores the rest).\n"
    "got_usr1=0\n"
    "got_term=0\n"
    "step=\n"
    "on_signal() {\n"
    "  if [ \"$1\" = USR1 ]; then got_usr1=1; else got_term=1; fi\n"
    "  log \"got SIG$1: asking tandem to commit and exit 75\"\n"
    "  if [ -n \"$step\" ]; then kill -USR1 \"$step\" 2>/dev/null; fi\n"
    "}\n"
    "trap 'on_signal USR1' USR1\n"
    "trap 'on_signal TERM' TERM\n";

static const char SLURM_WAIT[] =
    "step=$!\n"
    "\n"
    "# A trapped signal interrupts `wait` (status > 128) while the step still runs: wait\n"
    "# again until it has ended. Once a stop is asked for, the USR1 goes to the step every\n"
    "# second until it has ended (srun forwards it only once its tasks run). The last `wait`\n"
    "# returns the status bash kept if the step ended right after a trap. Whether the step\n"
    "# runs is asked of bash's job table, not of its pid: bash reaps the step during the\n"
    "# sleep, and the pid may be another process's by the next second.\n"
    "step_alive() { case \" $(jobs -rp) \" in *\" $step \"*) return 0 ;; esac; return 1; }\n"
    "rc=127\n"
    "while :; do\n"
    "  if [ \"$got_usr1\" = 1 ] || [ \"$got_term\" = 1 ]; then\n"
    "    if step_alive; then kill -USR1 \"$step\" 2>/dev/null; fi\n"
    "    sleep 1\n"
    "  else\n"
    "    wait \"$step\"\n"
    "    rc=$?\n"
    "  fi\n"
    "  if step_alive; then continue; fi\n"
    "  wait \"$step\" 2>/dev/null\n"
    "  again=$?\n"
    "  if [ \"$again\" != 127 ]; then rc=$again; fi\n"
    "  break\n"
    "done\n"
    "log \"tandem exited $rc (SLURM_RESTART_COUNT=${SLURM_RESTART_COUNT:-0})\"\n"
    "\n"
    "# Requeue after a USR1 (or a USR1 sent to the step directly): exit 75 means committed.\n"
    "# A step killed by the forwarded USR1 itself (status > 128) had not started its loop,\n"
    "# so nothing is lost either. After a TERM, Slurm is ending the job (scancel, its own\n"
    "# requeue or preemption, the time limit) and decides; the script never requeues a job\n"
    "# that someone cancelled.\n"
    "requeue=0\n"
    "if [ \"$got_term\" = 0 ]; then\n"
    "  if [ \"$rc\" = 75 ]; then requeue=1; fi\n"
    "  if [ \"$got_usr1\" = 1 ] && [ \"$rc\" -gt 128 ]; then requeue=1; fi\n"
    "fi\n"
    "if [ \"$requeue\" = 1 ]; then\n"
    "  for attempt in 1 2 3 4 5; do\n"
    "    if scontrol requeue \"$SLURM_JOB_ID\"; then\n"
    "      log \"requeued job $SLURM_JOB_ID: tandem resumes from $STORE when it starts again\"\n"
    "      exit 0\n"
    "    fi\n"
    "    sleep $((attempt * 5))\n"
    "  done\n"
    "  log \"scontrol requeue $SLURM_JOB_ID failed: submit this script again to resume\"\n"
    "  exit 75\n"
    "fi\n"
    "if [ \"$got_term\" = 1 ]; then log \"Slurm is ending job $SLURM_JOB_ID; not requeueing it here\"; fi\n"
    "# 2 (config) and 5 (diverged) would fail the same way again: said, never requeued\n"
    "case \"$rc\" in\n"
    "  2) log \"config or usage error (exit 2): not requeueing; fix the config and submit again\" ;;\n"
    "  5) log \"the run diverged (exit 5): not requeueing; change the key the message names\" ;;\n"
    "esac\n"
    "exit \"$rc\"\n";

int manifest_slurm(FILE *out, FILE *warn, const manifest_opts *o, tdm_err *e) {
    const config *c = o->cfg;
    const struct config_cluster *k = &c->cluster;
    char name[128], workdir[CONFIG_STR_MAX + 8], tandem[2 * CONFIG_STR_MAX],
        creds[2 * CONFIG_STR_MAX], store[3 * CONFIG_STR_MAX];
    manifest_job_name(o, name, sizeof name);
    /* tandem and the credentials file: a relative path from the config is relative to the
     * config's directory (the loader joined it, to a path relative to here when the config
     * was named so), from --set to here, as every other path key's — not to the job's
     * cluster.workdir (the same config rendered differently as its path was typed) */
    if (!abs_path(o->workdir, k->workdir[0] ? k->workdir : (o->workdir ? o->workdir : "."),
                  workdir, sizeof workdir) ||
        !abs_path(o->workdir, k->tandem_binary[0] ? k->tandem_binary
                                                  : (o->tandem_binary ? o->tandem_binary : "tandem"),
                  tandem, sizeof tandem) ||
        !abs_path(o->workdir, k->credentials_file, creds, sizeof creds))
        return err_set(e, ERR_USAGE, "cluster.workdir, cluster.tandem_binary or "
                                     "cluster.credentials_file: the absolute path is too long");
    /* a relative file store means relative to where the job runs; a URL that means
     * something else (file://HOST/..., s3:/x) is refused here as tandem run would */
    int src = job_store(o, store, sizeof store, e);
    if (src) return src;
    if (!directive_safe(workdir))
        return err_set(e, ERR_USAGE,
                       k->workdir[0] ? "cluster.workdir = %.200s: an #SBATCH --chdir path may not hold blanks, "
                                       "quotes, shell characters or '%%' (Slurm expands %%j and the like in the "
                                       "job's log path, which is relative to it)"
                                     : "the job's directory %.200s (where tandem manifest runs; cluster.workdir "
                                       "is unset) holds blanks, quotes, shell characters or '%%' (which Slurm "
                                       "expands in the job's log path), which an #SBATCH --chdir path may not: "
                                       "set cluster.workdir to a directory without them",
                       workdir);
    /* every other value on an #SBATCH line (the config's checks allow none of these
     * characters today; checked here too, so that no later change lets one through) */
    {
        const struct {
            const char *key, *value;
        } dv[] = {{"cluster.job_name", name},       {"cluster.memory", k->memory},
                  {"cluster.gpu_type", k->gpu_type}, {"cluster.time_limit", k->time_limit},
                  {"cluster.partition", k->partition}, {"cluster.account", k->account}};
        for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++)
            if (!directive_safe(dv[i].value))
                return err_set(e, ERR_USAGE, "%s = %.200s: a value on an #SBATCH line may not hold blanks, "
                               "quotes, shell characters or '%%' (Slurm expands %%j and the like)",
                               dv[i].key, dv[i].value);
    }
    if (o->config_path[0] != '/')
        return err_set(e, ERR_USAGE, "the config path on the nodes must be absolute, not %.200s",
                       o->config_path);
    common_warnings(warn, o);
    /* --sweep values are passed on as given (each point's store is named by them): a
     * relative path among them is read where the job runs */
    for (int i = 0; o->workdir && strcmp(workdir, o->workdir) && i < o->nsweeps; i++) {
        const char *t = o->sweep_texts[i], *eq = strchr(t, '=');
        char key[128], one[CONFIG_STR_MAX];
        if (!eq || (size_t)(eq - t) >= sizeof key) continue;
        snprintf(key, sizeof key, "%.*s", (int)(eq - t), t);
        int relative = 0;
        for (const char *v = eq + 1; *v && !relative; v += strcspn(v, ",") + (v[strcspn(v, ",")] != '\0')) {
            snprintf(one, sizeof one, "%.*s", (int)strcspn(v, ","), v);
            relative = config_relative_path(key, one) != NULL;
        }
        if (relative)
            warnf(warn, "--sweep %s: a relative path among its values is read where the job runs (%s), not here; "
                        "give the paths absolute", key, workdir);
    }
    /* the grace tandem is told (TANDEM_GRACE_S below): checkpoint.grace_s overrides it, and
     * a larger one plans commits and store deadlines that SIGKILL cuts off */
    int grace = k->signal_lead_s < 30 ? k->signal_lead_s : 30;
    if (c->checkpoint.grace_s > grace)
        warnf(warn, "checkpoint.grace_s = %g overrides the job's grace of %d s (TANDEM_GRACE_S: the shorter of "
                    "Slurm's KillWait, 30 s by default, and cluster.signal_lead_s): tandem would start a stop "
                    "commit that SIGKILL cuts off; leave checkpoint.grace_s unset (0) or at most %d "
                    "(docs/preemption.md)", c->checkpoint.grace_s, grace, grace);
    /* Slurm's default MaxArraySize is 1001: --array=0-1001 and beyond is refused by sbatch */
    if (job_points(o) && job_points(o)->npoints > 1001)
        warnf(warn, "%zu points: a job array of more than 1001 tasks exceeds Slurm's default MaxArraySize "
                    "(1001), and sbatch refuses it unless the cluster raised it (scontrol show config | grep "
                    "MaxArraySize); split the sweep", job_points(o)->npoints);
    if (c->run.device != CONFIG_DEVICE_CPU && k->gpus_per_node > 0 &&
        k->tasks_per_node != k->gpus_per_node)
        warnf(warn, "cluster.tasks_per_node = %d with %d GPUs per node: each rank computes on one "
                    "GPU (chosen by its local rank), so set them equal",
              k->tasks_per_node, k->gpus_per_node);
    if (k->nodes > 1 && is_file_store(store))
        warnf(warn, "store %s with cluster.nodes = %d: every node must see the same directory "
                    "(shared storage); an s3:// store needs none",
              store, k->nodes);
    if (!is_file_store(store) && !k->credentials_file[0])
        warnf(warn, "no cluster.credentials_file: tandem on the nodes must find AWS credentials "
                    "in its environment or ~/.aws");
    struct stat st;
    if (k->credentials_file[0] && stat(creds, &st) == 0 && (st.st_mode & 077))
        warnf(warn, "cluster.credentials_file %s has mode %03o: the job refuses it until you "
                    "run chmod 600 %s",
              creds, (unsigned)(st.st_mode & 0777), creds);
    if (k->gpus_per_node > 0 && !k->gpu_type[0])
        warnf(warn, "cluster.gpu_type is empty: any GPU type will do (--gres=gpu:%d)",
              k->gpus_per_node);

    fprintf(out, "#!/bin/bash\n");
    fprintf(out, "# tandem: Slurm batch script rendered by `tandem manifest slurm` (docs/scheduling.md).\n");
    if (o->rendered_from) {
        fprintf(out, "#   rendered by: ");
        ydoc_comment(out, o->rendered_from);
        fputc('\n', out);
    }
    fprintf(out, "# Change the config and render again rather than editing this file.\n"
                 "#\n"
                 "# Preemption (docs/preemption.md): %d s before the time limit Slurm sends USR1 to\n"
                 "# this script, which forwards it to tandem; tandem commits and exits 75, and the\n"
                 "# script requeues the job. The restarted job (SLURM_RESTART_COUNT + 1) runs the same\n"
                 "# `tandem run`, which resumes from the store. By hand: scancel --signal=USR1 --batch JOB.\n",
            k->signal_lead_s);
    const sweep *sw = job_points(o);
    if (sw) {
        fprintf(out, "#\n# %s (docs/scheduling.md): %zu points; array task i runs point i, each its own\n"
                     "# run in STORE/<point>, requeued on its own:\n",
                o->command ? "Array" : "Sweep", sw->npoints);
        for (size_t i = 0; i < sw->npoints; i++) {
            char label[2048];
            point_name(o, i, label, sizeof label);
            fprintf(out, "#   %zu  ", i);
            ydoc_comment(out, label);
            fputc('\n', out);
        }
    }
    fprintf(out, "#SBATCH --job-name=%s\n", name);
    fprintf(out, "#SBATCH --nodes=%d\n", k->nodes);
    fprintf(out, "#SBATCH --ntasks-per-node=%d\n", k->tasks_per_node);
    if (k->cpus_per_task > 0) fprintf(out, "#SBATCH --cpus-per-task=%d\n", k->cpus_per_task);
    if (k->memory[0]) fprintf(out, "#SBATCH --mem=%s\n", k->memory);
    if (k->gpus_per_node > 0) {
        if (k->gpu_type[0]) fprintf(out, "#SBATCH --gres=gpu:%s:%d\n", k->gpu_type, k->gpus_per_node);
        else fprintf(out, "#SBATCH --gres=gpu:%d\n", k->gpus_per_node);
    }
    if (k->time_limit[0]) fprintf(out, "#SBATCH --time=%s\n", k->time_limit);
    if (k->partition[0]) fprintf(out, "#SBATCH --partition=%s\n", k->partition);
    if (k->account[0]) fprintf(out, "#SBATCH --account=%s\n", k->account);
    fprintf(out, "#SBATCH --chdir=%s\n", workdir);
    if (sw) fprintf(out, "#SBATCH --array=0-%zu\n", sw->npoints - 1);
    fprintf(out, sw ? "#SBATCH --output=%%x-%%A_%%a.out\n" : "#SBATCH --output=%%x-%%j.out\n");
    fprintf(out, "#SBATCH --open-mode=append\n");
    fprintf(out, "#SBATCH --requeue\n");
    fprintf(out, "#SBATCH --signal=B:USR1@%d\n", k->signal_lead_s);
    /* one job of this name at a time (two writers would fence each other out); the tasks
     * of an array share the name, so there singleton would run the points one by one */
    if (!sw) fprintf(out, "#SBATCH --dependency=singleton\n");
    fprintf(out, "\nset -u\n");
    fputs(SLURM_FUNCTIONS, out);
    fprintf(out, "\nlog \"start: job ${SLURM_JOB_ID:-?}%s SLURM_RESTART_COUNT=${SLURM_RESTART_COUNT:-0} "
                 "on $(hostname), nodes ${SLURM_JOB_NODELIST:-?}\"\n",
            sw ? " (array task ${SLURM_ARRAY_TASK_ID:-?})" : "");
    fprintf(out, "TANDEM=");
    sh_word(out, tandem);
    fprintf(out, "\nCONFIG=");
    sh_word(out, o->config_path);
    fprintf(out, "\nSTORE=");
    sh_word(out, store);
    fputc('\n', out);
    if (k->credentials_file[0]) {
        fprintf(out, "CREDENTIALS=");
        sh_word(out, creds);
        fprintf(out, "\nload_credentials \"$CREDENTIALS\" || exit 2\n");
    }
    /* the time a stop may take: after the --signal warning, signal_lead_s until the time
     * limit; after a preemption or scancel (TERM), Slurm's KillWait (30 s unless the
     * cluster sets another): the shorter one, so that a commit that cannot fit is skipped */
    fprintf(out, "# a stop commits a full state only if it fits before SIGKILL: Slurm's KillWait "
                 "(30 s by default)\n# after a TERM, %d s after the --signal warning\n",
            k->signal_lead_s);
    fprintf(out, "export TANDEM_GRACE_S=\"${TANDEM_GRACE_S:-%d}\"\n", grace);
    if (k->nodes > 1) {
        fprintf(out, "# for the distributed backend: rank = SLURM_PROCID of each task\n");
        fprintf(out, "export TANDEM_WORLD_SIZE=%d\n", k->nodes);
        fprintf(out, "TANDEM_COORDINATOR=\"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | "
                     "head -n 1):%d\"\n",
                k->coordinator_port);
        fprintf(out, "export TANDEM_COORDINATOR\n");
    }
    fprintf(out, "\nlog \"running: $TANDEM %s $CONFIG --store $STORE\"\n", task_command(o));
    int ranks = k->nodes * k->tasks_per_node;
    fprintf(out, "srun --nodes=%d --ntasks=%d --ntasks-per-node=%d", k->nodes, ranks,
            k->tasks_per_node);
    /* several ranks: Open MPI starts through Slurm's PMIx (docs/distributed.md) */
    if (ranks > 1) fprintf(out, " --mpi=pmix");
    if (k->cpus_per_task > 0) fprintf(out, " --cpus-per-task=%d", k->cpus_per_task);
    /* cluster.env reaches tandem through env(1) on its command line, not as exports of
     * this shell: exported here, a name such as STORE, got_term or IFS would change what
     * the script itself does (another store, no requeue) */
    if (k->env[0]) fprintf(out, " \\\n  env");
    for (const char *p = k->env; *p;) { /* NAME=value,... (checked by the config; "\," a ',') */
        size_t len = cluster_env_entry_len(p);
        char entry[CONFIG_STR_MAX];
        cluster_env_entry(p, len, entry, sizeof entry);
        fputc(' ', out);
        sh_word(out, entry);
        p += len + (p[len] != '\0');
    }
    fprintf(out, " \\\n  \"$TANDEM\" %s \"$CONFIG\" --store \"$STORE\"", task_command(o));
    for (int i = 0; i < o->nsets; i++) { /* cluster.* only shaped this script */
        if (strncmp(o->sets[i], "cluster.", 8) == 0) continue;
        fprintf(out, " \\\n  --set ");
        set_word(out, o->sets[i], o->workdir);
    }
    for (int i = 0; sw && i < o->nsweeps; i++) { /* tandem takes its point from SLURM_ARRAY_TASK_ID */
        fprintf(out, " \\\n  --sweep ");
        sh_word(out, o->sweep_texts[i]);
    }
    for (int i = 0; i < o->ncommand_args; i++) {
        fputc(' ', out);
        sh_word(out, o->command_args[i]);
    }
    fprintf(out, " &\n");
    fputs(SLURM_WAIT, out);
    int err = outfile_stream_error(out);
    /* exit 1 as any command whose output cannot be written (cli/main.c); into --out
     * the caller makes it ERR_USAGE, as outfile's own write failures */
    return err ? err_sys(e, ERR_INTERNAL, err, "writing the script failed") : 0;
}

/* ---------------------------------------------------------------------------------------
 * Kubernetes
 * ------------------------------------------------------------------------------------- */

/* Node labels of a GPU model on each cloud: GKE's accelerator label, the 8-GPU instance
 * types on EKS and AKS (node.kubernetes.io/instance-type). */
static const struct gpu_labels {
    const char *type, *gke, *eks, *aks;
} GPU_LABELS[] = {
    {"h100", "nvidia-h100-80gb", "p5.48xlarge", "Standard_ND96isr_H100_v5"},
    {"h200", "nvidia-h200-141gb", "p5e.48xlarge", "Standard_ND96isr_H200_v5"},
    {"a100", "nvidia-tesla-a100", "p4d.24xlarge", "Standard_ND96asr_v4"},
};

typedef struct kv_list {
    int n;
    char key[48][320];
    char value[48][80];
} kv_list;

/* Adds or replaces a key. */
static void kv_put(kv_list *l, const char *key, size_t klen, const char *value, size_t vlen) {
    int i = 0;
    while (i < l->n && (strlen(l->key[i]) != klen || strncmp(l->key[i], key, klen))) i++;
    if (i == l->n) {
        if (l->n == 48) return; /* cannot be: the config holds CLUSTER_LIST_MAX (40) and the cloud adds <= 3 */
        l->n++;
    }
    snprintf(l->key[i], sizeof l->key[i], "%.*s", (int)klen, key);
    snprintf(l->value[i], sizeof l->value[i], "%.*s", (int)vlen, value);
}

static void kv_put_s(kv_list *l, const char *key, const char *value) {
    kv_put(l, key, strlen(key), value, strlen(value));
}

typedef struct toleration {
    char key[320], value[80], effect[24];
    bool exists;
} toleration;

typedef struct toleration_list {
    int n;
    toleration t[48];
} toleration_list;

static void tol_add(toleration_list *l, const char *key, const char *value, const char *effect) {
    if (l->n == 48) return; /* cannot be: as kv_put */
    toleration *t = &l->t[l->n++];
    snprintf(t->key, sizeof t->key, "%s", key);
    snprintf(t->value, sizeof t->value, "%s", value ? value : "");
    snprintf(t->effect, sizeof t->effect, "%s", effect ? effect : "");
    t->exists = value == NULL;
}

/* The cloud's node labels and tolerations, then the config's (which win). */
static void node_selection(FILE *warn, const config *c, kv_list *sel, toleration_list *tol) {
    const struct config_cluster *k = &c->cluster;
    const struct gpu_labels *g = NULL;
    for (size_t i = 0; i < sizeof GPU_LABELS / sizeof GPU_LABELS[0]; i++)
        if (!strcasecmp(GPU_LABELS[i].type, k->gpu_type)) g = &GPU_LABELS[i];
    if (k->gpus_per_node > 0 && k->cloud != CONFIG_CLOUD_NONE && !g)
        warnf(warn, "no node labels known for cluster.gpu_type = '%s' on %s (known: h100, h200, "
                    "a100): select the nodes with cluster.node_selector",
              k->gpu_type, k->cloud == CONFIG_CLOUD_GKE ? "GKE" : k->cloud == CONFIG_CLOUD_EKS ? "EKS" : "AKS");
    const char *it = "node.kubernetes.io/instance-type";
    switch (k->cloud) {
    case CONFIG_CLOUD_GKE:
        if (k->gpus_per_node > 0 && g)
            kv_put_s(sel, "cloud.google.com/gke-accelerator", g->gke);
        if (k->spot) {
            kv_put_s(sel, "cloud.google.com/gke-spot", "true");
            tol_add(tol, "cloud.google.com/gke-spot", "true", "NoSchedule");
        }
        break;
    case CONFIG_CLOUD_EKS:
        if (k->gpus_per_node > 0 && g) kv_put_s(sel, it, g->eks);
        if (k->spot) kv_put_s(sel, "eks.amazonaws.com/capacityType", "SPOT");
        break;
    case CONFIG_CLOUD_AKS:
        if (k->gpus_per_node > 0 && g) kv_put_s(sel, it, g->aks);
        if (k->spot) {
            kv_put_s(sel, "kubernetes.azure.com/scalesetpriority", "spot");
            tol_add(tol, "kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule");
        }
        break;
    default:
        if (k->spot)
            warnf(warn, "cluster.spot = true with cluster.cloud = none: no spot labels are known; "
                        "give cluster.node_selector and cluster.tolerations");
        break;
    }
    if (k->gpus_per_node > 0) tol_add(tol, "nvidia.com/gpu", NULL, "NoSchedule");
    for (const char *p = k->node_selector; *p;) { /* key=value,... (checked by the config) */
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        kv_put(sel, p, (size_t)(eq - p), eq + 1, len - (size_t)(eq - p) - 1);
        p = end ? end + 1 : p + len;
    }
    for (const char *p = k->tolerations; *p;) { /* key[=value][:Effect],... */
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[512], *colon, *eq;
        snprintf(item, sizeof item, "%.*s", (int)len, p);
        if ((colon = strchr(item, ':'))) *colon++ = '\0';
        if ((eq = strchr(item, '='))) *eq++ = '\0';
        tol_add(tol, item, eq, colon);
        p = end ? end + 1 : p + len;
    }
}

static void k8s_labels(FILE *out, const char *indent, const char *name) {
    fprintf(out, "%slabels:\n%s  app.kubernetes.io/name: tandem\n%s  app.kubernetes.io/instance: ",
            indent, indent, indent);
    ydoc_quote(out, name);
    fputc('\n', out);
}

/* Everything the Kubernetes emitters read: the stream, the config, the names and the
 * node selection worked out once. */
typedef struct k8s_ctx {
    FILE *out;
    const manifest_opts *o;
    const config *c;
    const struct config_cluster *k;
    const char *name, *cm, *tandem;
    bool indexed;
    const sweep *sw; /* a sweep: an Indexed Job of its points (cluster.nodes = 1) */
    const kv_list *sel;
    const toleration_list *tol;
    bool *oom; /* set when a value could not be written for want of memory */
} k8s_ctx;

/* What a Kubernetes run may lose or miss, said before rendering. */
static void k8s_warnings(FILE *warn, const manifest_opts *o) {
    const config *c = o->cfg;
    const struct config_cluster *k = &c->cluster;
    common_warnings(warn, o);
    if (k->tasks_per_node > 1)
        warnf(warn, "cluster.tasks_per_node = %d is a Slurm setting: a pod runs one rank",
              k->tasks_per_node);
    if (c->run.device != CONFIG_DEVICE_CPU && k->gpus_per_node > 1)
        warnf(warn, "cluster.gpus_per_node = %d: a pod runs one rank, which computes on one GPU; "
                    "ask for 1 and scale with cluster.nodes (pods)",
              k->gpus_per_node);
    if (is_file_store(o->store_url))
        warnf(warn, "store %s is a file store: in a pod it lives on the container's own disk and "
                    "is lost with the pod unless the path is on a mounted volume; use an s3:// "
                    "store (--store s3://bucket/prefix)",
              o->store_url);
    else if (!k->secret_name[0] && !k->service_account[0])
        warnf(warn, "no cluster.secret_name and no cluster.service_account: tandem in the pod "
                    "finds AWS credentials only if the image provides them");
    size_t dlen = strlen(MANIFEST_K8S_DATA_DIR);
    bool under_data = !strncmp(c->data.dataset, MANIFEST_K8S_DATA_DIR, dlen) && c->data.dataset[dlen] == '/';
    if (c->data.dataset[0] != '/')
        warnf(warn, "data.dataset = %s is relative: in the pod it resolves against %s; give the "
                    "absolute path of the corpus in the image or under %s (cluster.data_pvc)",
              c->data.dataset, MANIFEST_K8S_CONFIG_DIR, MANIFEST_K8S_DATA_DIR);
    else if (k->data_pvc[0] && !under_data)
        warnf(warn, "data.dataset = %s is not under %s, where cluster.data_pvc = %s is mounted: "
                    "the pod reads it from the image", c->data.dataset, MANIFEST_K8S_DATA_DIR, k->data_pvc);
    else if (!under_data) /* a relative path in a config file is resolved against its folder here */
        warnf(warn, "data.dataset = %s: the pod reads the corpus at this path, which must be in the "
                    "image (or give the path under %s of cluster.data_pvc)",
              c->data.dataset, MANIFEST_K8S_DATA_DIR);
    /* the other paths the run reads, given relative (by --set, or as file://./REL): in the
     * pod they resolve against MANIFEST_K8S_CONFIG_DIR, which holds config.yaml alone (the
     * value of data.mixture_file is never repeated: it may be a URL with a pasted secret) */
    const char *mf = c->data.mixture_file;
    if (config_relative_path("data.mixture_file", mf) || !strncmp(mf, "file://./", 9) || !strncmp(mf, "file://../", 10))
        warnf(warn, "data.mixture_file is a relative path: in the pod it resolves against %s, which holds "
                    "config.yaml alone; give the absolute path of the file in the image, under %s "
                    "(cluster.data_pvc), or an s3:// store", MANIFEST_K8S_CONFIG_DIR, MANIFEST_K8S_DATA_DIR);
    if (config_relative_path("model.init", c->model.init))
        warnf(warn, "model.init = %s is a relative path: in the pod it resolves against %s, which holds "
                    "config.yaml alone; give the absolute path of the model folder in the image or under %s "
                    "(cluster.data_pvc)", c->model.init, MANIFEST_K8S_CONFIG_DIR, MANIFEST_K8S_DATA_DIR);
    if (k->grace_period_s == 0)
        warnf(warn, "cluster.grace_period_s = 0: the kubelet kills tandem at once, with no stop commit; each "
                    "preemption loses the steps since the last periodic commit (give step + commit time and "
                    "a margin, docs/preemption.md)");
    else if (c->checkpoint.grace_s > k->grace_period_s)
        warnf(warn, "checkpoint.grace_s = %g is longer than cluster.grace_period_s = %d (the pod's "
                    "terminationGracePeriodSeconds) and overrides it: tandem would start a stop commit that "
                    "SIGKILL cuts off; leave checkpoint.grace_s unset (0) or at most %d",
              c->checkpoint.grace_s, k->grace_period_s, k->grace_period_s);
    if (k->spot && k->cloud == CONFIG_CLOUD_GKE && k->grace_period_s > 30)
        warnf(warn, "cluster.grace_period_s = %d: GKE stops a preempted spot node after 30 s, so "
                    "tandem gets at most ~25 s there (docs/preemption.md)",
              k->grace_period_s);
}

/* The comment at the top: how it was rendered, how to apply it, what preemption does. */
static void k8s_header(const k8s_ctx *x) {
    fprintf(x->out, "# tandem: Kubernetes objects rendered by `tandem manifest k8s` (docs/scheduling.md).\n");
    if (x->o->rendered_from) {
        fprintf(x->out, "#   rendered by: ");
        ydoc_comment(x->out, x->o->rendered_from);
        fputc('\n', x->out);
    }
    fprintf(x->out, "# Change the config and render again rather than editing this file. Apply with\n"
                 "#   kubectl apply -f FILE\n");
    if (x->k->secret_name[0] && x->k->secret_as_env)
        fprintf(x->out, "# after creating the Secret with the AWS keys (read as environment variables):\n"
                     "#   kubectl create secret generic %s --from-literal=AWS_ACCESS_KEY_ID=... \\\n"
                     "#     --from-literal=AWS_SECRET_ACCESS_KEY=...\n",
                x->k->secret_name);
    else if (x->k->secret_name[0])
        fprintf(x->out, "# after creating the Secret with the AWS credentials (files as in ~/.aws):\n"
                     "#   kubectl create secret generic %s --from-file=credentials=$HOME/.aws/credentials\n",
                x->k->secret_name);
    fprintf(x->out, "# Preemption (docs/preemption.md): the pod gets SIGTERM, tandem commits within\n"
                 "# terminationGracePeriodSeconds and exits 75; podFailurePolicy ignores exit 75 and\n"
                 "# disruptions (DisruptionTarget), so a replacement pod resumes from the store\n"
                 "# without using up the backoff limit; exit 2 (a config error) fails the Job.\n");
}

/* The ConfigMap: the config, exactly as rendered (the --set values included). */
static void k8s_configmap(const k8s_ctx *x) {
    fprintf(x->out, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ");
    ydoc_quote(x->out, x->cm);
    fputc('\n', x->out);
    k8s_labels(x->out, "  ", x->name);
    fprintf(x->out, "data:\n  config.yaml: |\n");
    config_print_yaml(x->out, x->c, "    ");
}

/* The headless Service of an Indexed Job: DNS names for its pods. */
static void k8s_service(const k8s_ctx *x) {
    fprintf(x->out, "---\n# Headless Service: DNS names <job>-<index>.<job> for the pods of the Indexed Job\n");
    fprintf(x->out, "apiVersion: v1\nkind: Service\nmetadata:\n  name: ");
    ydoc_quote(x->out, x->name);
    fputc('\n', x->out);
    k8s_labels(x->out, "  ", x->name);
    fprintf(x->out, "spec:\n  clusterIP: None\n  publishNotReadyAddresses: true\n  selector:\n"
                 "    batch.kubernetes.io/job-name: ");
    ydoc_quote(x->out, x->name);
    fprintf(x->out, "\n  ports:\n  - name: coordinator\n    port: %d\n    targetPort: %d\n"
                 "    protocol: TCP\n",
            x->k->coordinator_port, x->k->coordinator_port);
}

/* A command argument or env value, quoted for YAML and with every '$' doubled: the
 * kubelet expands $(NAME) there and turns $$ into $, so a store URL or value holding
 * "$$" or "$(TANDEM_GRACE_S)" would reach tandem changed (another store than the one
 * rendered). Doubled, each '$' arrives as itself. */
static void k8s_expanded(const k8s_ctx *x, const char *s) {
    size_t n = 0;
    for (const char *p = s; *p; p++) n += *p == '$' ? 2 : 1;
    char *t = malloc(n + 1);
    if (!t) {
        *x->oom = true; /* manifest_k8s fails: ferror cannot see this */
        return;
    }
    char *q = t;
    for (const char *p = s; *p; p++) {
        if (*p == '$') *q++ = '$';
        *q++ = *p;
    }
    *q = '\0';
    ydoc_quote(x->out, t);
    free(t);
}

/* The tandem container: image, command, environment, ports, resources, mounts. */
static void k8s_container(const k8s_ctx *x) {
    fprintf(x->out, "      containers:\n      - name: tandem\n        image: ");
    ydoc_quote(x->out, x->k->image);
    fprintf(x->out, "\n        imagePullPolicy: IfNotPresent\n");
    fprintf(x->out, "        # exec form: tandem is PID 1 and gets the SIGTERM itself\n        command: [");
    k8s_expanded(x, x->tandem);
    fprintf(x->out, ", \"%s\", \"" MANIFEST_K8S_CONFIG_DIR "/config.yaml\", \"--store\", ", task_command(x->o));
    k8s_expanded(x, x->o->store_url);
    for (int i = 0; x->sw && i < x->o->nsweeps; i++) { /* the point: TANDEM_POINT below */
        fprintf(x->out, ", \"--sweep\", ");
        k8s_expanded(x, x->o->sweep_texts[i]);
    }
    for (int i = 0; i < x->o->ncommand_args; i++) {
        fprintf(x->out, ", ");
        k8s_expanded(x, x->o->command_args[i]);
    }
    fprintf(x->out, "]\n");
    /* the grace period, so that a stop commits a full state only if it fits (run.c) */
    fprintf(x->out, "        env:\n        - name: TANDEM_GRACE_S\n          value: \"%d\"\n",
            x->k->grace_period_s);
    const bool mounted = x->k->secret_name[0] && !x->k->secret_as_env;
    if (mounted)
        fprintf(x->out, "        - name: AWS_SHARED_CREDENTIALS_FILE\n"
                     "          value: \"" MANIFEST_K8S_SECRET_DIR "/credentials\"\n"
                     "        - name: AWS_CONFIG_FILE\n"
                     "          value: \"" MANIFEST_K8S_SECRET_DIR "/config\"\n");
    static const char *const env_keys[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"};
    for (int i = 0; x->k->secret_name[0] && x->k->secret_as_env && i < 3; i++) {
        fprintf(x->out, "        - name: %s\n          valueFrom:\n            secretKeyRef:\n"
                     "              name: ", env_keys[i]);
        ydoc_quote(x->out, x->k->secret_name);
        fprintf(x->out, "\n              key: %s\n%s", env_keys[i],
                i == 2 ? "              optional: true\n" : "");
    }
    if (x->sw)
        fprintf(x->out, "        - name: TANDEM_POINT\n          valueFrom:\n            fieldRef:\n"
                     "              fieldPath: \"metadata.annotations['batch.kubernetes.io/"
                     "job-completion-index']\"\n");
    if (x->indexed) {
        fprintf(x->out, "        - name: TANDEM_RANK\n          valueFrom:\n            fieldRef:\n"
                     "              fieldPath: \"metadata.annotations['batch.kubernetes.io/"
                     "job-completion-index']\"\n");
        fprintf(x->out, "        - name: TANDEM_WORLD_SIZE\n          value: \"%d\"\n", x->k->nodes);
        fprintf(x->out, "        - name: TANDEM_COORDINATOR\n          value: \"%s-0.%s:%d\"\n", x->name,
                x->name, x->k->coordinator_port);
    }
    for (const char *p = x->k->env; *p;) { /* NAME=value,... ("\," a ',') */
        size_t len = cluster_env_entry_len(p);
        const char *end = p[len] ? p + len : NULL;
        const char *eq = memchr(p, '=', len);
        char value[CONFIG_STR_MAX];
        cluster_env_entry(eq + 1, len - (size_t)(eq - p) - 1, value, sizeof value);
        char ename[CONFIG_KEY_MAX + 1];
        snprintf(ename, sizeof ename, "%.*s", (int)(eq - p), p);
        fprintf(x->out, "        - name: "); /* quoted: NO, ON or null is no string to YAML 1.1 */
        ydoc_quote(x->out, ename);
        fprintf(x->out, "\n          value: ");
        k8s_expanded(x, value);
        fputc('\n', x->out);
        p = end ? end + 1 : p + len;
    }
    if (x->indexed)
        fprintf(x->out, "        ports:\n        - name: coordinator\n          containerPort: %d\n"
                     "          protocol: TCP\n",
                x->k->coordinator_port);
    char mem[64] = "";
    if (x->k->memory[0]) k8s_memory(x->k->memory, mem, sizeof mem);
    if (x->k->cpus_per_task > 0 || mem[0] || x->k->gpus_per_node > 0) {
        fprintf(x->out, "        resources:\n");
        if (x->k->cpus_per_task > 0 || mem[0]) {
            fprintf(x->out, "          requests:\n");
            if (x->k->cpus_per_task > 0) fprintf(x->out, "            cpu: \"%d\"\n", x->k->cpus_per_task);
            if (mem[0]) fprintf(x->out, "            memory: \"%s\"\n", mem);
        }
        if (mem[0] || x->k->gpus_per_node > 0) {
            fprintf(x->out, "          limits:\n");
            if (mem[0]) fprintf(x->out, "            memory: \"%s\"\n", mem);
            if (x->k->gpus_per_node > 0)
                fprintf(x->out, "            nvidia.com/gpu: \"%d\"\n", x->k->gpus_per_node);
        }
    }
    fprintf(x->out, "        volumeMounts:\n        - name: config\n          mountPath: "
                 "\"" MANIFEST_K8S_CONFIG_DIR "\"\n          readOnly: true\n");
    if (x->k->secret_name[0] && !x->k->secret_as_env)
        fprintf(x->out, "        - name: aws\n          mountPath: \"" MANIFEST_K8S_SECRET_DIR "\"\n"
                     "          readOnly: true\n");
    if (x->k->data_pvc[0])
        fprintf(x->out, "        - name: data\n          mountPath: \"" MANIFEST_K8S_DATA_DIR "\"\n"
                     "          readOnly: true\n");
    if (x->k->gpus_per_node > 0)
        fprintf(x->out, "        - name: dshm # NCCL needs more than the default 64 MiB\n"
                     "          mountPath: /dev/shm\n");
}

/* The pod's volumes: the config, the credentials, the data, /dev/shm for NCCL. */
static void k8s_volumes(const k8s_ctx *x) {
    fprintf(x->out, "      volumes:\n      - name: config\n        configMap:\n          name: ");
    ydoc_quote(x->out, x->cm);
    fputc('\n', x->out);
    if (x->k->secret_name[0] && !x->k->secret_as_env) {
        fprintf(x->out, "      - name: aws\n        secret:\n          secretName: ");
        ydoc_quote(x->out, x->k->secret_name);
        fprintf(x->out, "\n          defaultMode: 256 # 0400\n");
    }
    if (x->k->data_pvc[0]) {
        fprintf(x->out, "      - name: data\n        persistentVolumeClaim:\n          claimName: ");
        ydoc_quote(x->out, x->k->data_pvc);
        fprintf(x->out, "\n          readOnly: true\n");
    }
    if (x->k->gpus_per_node > 0)
        fprintf(x->out, "      - name: dshm\n        emptyDir:\n          medium: Memory\n");
}

/* The Job: completions, the failure policy (exits 2 and 5 fail it, exit 75 and disruptions do
 * not count), the pod template (k8s_container, k8s_volumes). */
static void k8s_job(const k8s_ctx *x) {
    fprintf(x->out, "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: ");
    ydoc_quote(x->out, x->name);
    fputc('\n', x->out);
    k8s_labels(x->out, "  ", x->name);
    fprintf(x->out, "spec:\n");
    if (x->indexed) {
        fprintf(x->out, "  completionMode: Indexed\n  completions: %d\n  parallelism: %d\n", x->k->nodes,
                x->k->nodes);
        fprintf(x->out, "  backoffLimitPerIndex: %d\n  maxFailedIndexes: 0\n", x->k->backoff_limit);
    } else if (x->sw) { /* a sweep: index i runs point i; each point has its own retries */
        fprintf(x->out, "  completionMode: Indexed\n  completions: %zu\n  parallelism: %zu\n",
                x->sw->npoints, x->sw->npoints);
        fprintf(x->out, "  backoffLimitPerIndex: %d\n", x->k->backoff_limit);
    } else {
        fprintf(x->out, "  completions: 1\n  parallelism: 1\n  backoffLimit: %d\n", x->k->backoff_limit);
    }
    fprintf(x->out, "  # a replacement pod starts only once the old one has stopped: never two writers\n"
                 "  podReplacementPolicy: Failed\n"
                 "  podFailurePolicy:\n"
                 "    rules:\n"
                 "    - action: %s # 2: config or usage error; 5: diverged. No retry can fix them\n"
                 "      onExitCodes:\n"
                 "        containerName: tandem\n"
                 "        operator: In\n"
                 "        values: [2, 5]\n"
                 "    - action: Ignore # 75: committed after SIGTERM, requeue me\n"
                 "      onExitCodes:\n"
                 "        containerName: tandem\n"
                 "        operator: In\n"
                 "        values: [75]\n"
                 "    - action: Ignore # preemption, eviction, node drain\n"
                 "      onPodConditions:\n"
                 "      - type: DisruptionTarget\n"
                 "        status: \"True\"\n",
            x->sw ? "FailIndex" : "FailJob"); /* a sweep: that point alone fails */
    fprintf(x->out, "  template:\n    metadata:\n");
    k8s_labels(x->out, "      ", x->name);
    fprintf(x->out, "      annotations:\n"
                 "        cluster-autoscaler.kubernetes.io/safe-to-evict: \"false\"\n");
    fprintf(x->out, "    spec:\n      restartPolicy: Never\n      terminationGracePeriodSeconds: %d\n"
                 "      enableServiceLinks: false\n",
            x->k->grace_period_s);
    if (x->k->service_account[0]) { /* IRSA / Pod Identity: the platform injects the web identity */
        fprintf(x->out, "      serviceAccountName: ");
        ydoc_quote(x->out, x->k->service_account);
        fputc('\n', x->out);
    }
    if (x->indexed) {
        fprintf(x->out, "      subdomain: ");
        ydoc_quote(x->out, x->name);
        fputc('\n', x->out);
    }
    if (x->sel->n) {
        fprintf(x->out, "      nodeSelector:\n");
        for (int i = 0; i < x->sel->n; i++) {
            fprintf(x->out, "        "); /* quoted: a plain on, 017 or 0x1F is no string to YAML 1.1 */
            ydoc_quote(x->out, x->sel->key[i]);
            fprintf(x->out, ": ");
            ydoc_quote(x->out, x->sel->value[i]);
            fputc('\n', x->out);
        }
    }
    if (x->tol->n) {
        fprintf(x->out, "      tolerations:\n");
        for (int i = 0; i < x->tol->n; i++) {
            const toleration *t = &x->tol->t[i];
            fprintf(x->out, "      - key: ");
            ydoc_quote(x->out, t->key);
            fprintf(x->out, "\n        operator: %s\n", t->exists ? "Exists" : "Equal");
            if (!t->exists) {
                fprintf(x->out, "        value: ");
                ydoc_quote(x->out, t->value);
                fputc('\n', x->out);
            }
            if (t->effect[0]) fprintf(x->out, "        effect: %s\n", t->effect);
        }
    }
    k8s_container(x);
    k8s_volumes(x);
}

/* A Kubernetes manifest is YAML, which holds UTF-8 text only (and not U+FFFE/U+FFFF, even
 * escaped): what the config and the command line bring into it must be such text, or
 * kubectl would refuse the file we wrote. */
static int k8s_text_ok(const char *what, const char *text, tdm_err *e) {
    size_t at;
    if (!text || ydoc_text_ok(text, &at)) return 0;
    return err_set(e, ERR_USAGE, "%s: not valid UTF-8 text at byte %zu (or U+FFFE/U+FFFF); a "
                   "Kubernetes manifest is YAML and holds UTF-8 text only: give it in UTF-8",
                   what, at);
}

static int k8s_texts_ok(const manifest_opts *o, tdm_err *e) {
    /* the config's values: a path is any bytes to Linux (a run on this machine takes it),
     * but the ConfigMap is YAML */
    config_kv *kv = NULL;
    size_t nkv = 0;
    int rc = config_canonical(o->cfg, &kv, &nkv, e);
    for (size_t i = 0; !rc && i < nkv; i++) rc = k8s_text_ok(kv[i].key, kv[i].value, e);
    free(kv);
    if (!rc) rc = k8s_text_ok("--store", o->store_url, e);
    for (int i = 0; !rc && i < o->nsweeps; i++) rc = k8s_text_ok("--sweep", o->sweep_texts[i], e);
    for (int i = 0; !rc && i < o->nsets; i++) rc = k8s_text_ok("--set", o->sets[i], e);
    for (int i = 0; !rc && i < o->ncommand_args; i++)
        rc = k8s_text_ok("an argument of the command", o->command_args[i], e);
    if (!rc && o->command) rc = k8s_text_ok("the command", o->command, e);
    size_t points = o->sweep ? o->sweep->npoints : 0;
    for (size_t i = 0; !rc && o->point_names && i < points; i++)
        rc = k8s_text_ok("a point's store name", o->point_names[i], e);
    if (!rc) rc = k8s_text_ok("the command line (in the header comment)", o->rendered_from, e);
    return rc;
}

int manifest_k8s(FILE *out, FILE *warn, const manifest_opts *o, tdm_err *e) {
    const config *c = o->cfg;
    int bad = k8s_texts_ok(o, e);
    if (bad) return bad;
    const struct config_cluster *k = &c->cluster;
    if (!k->image[0])
        return err_set(e, ERR_USAGE,
                       "cluster.image is required for Kubernetes: the image built from the "
                       "Dockerfile (e.g. --set cluster.image=registry.example/tandem:1.0)");
    /* the container runs the image's files: a relative path names nothing there — nor
     * one the config gave relative, which the loader joined to the config's folder here */
    if (k->tandem_binary[0] && (k->tandem_binary[0] != '/' || config_path_joined(c, "cluster.tandem_binary")))
        return err_set(e, ERR_USAGE, "cluster.tandem_binary = %.200s: for Kubernetes, give the absolute path of "
                       "tandem inside the image (default %s)%s", k->tandem_binary, MANIFEST_K8S_TANDEM,
                       k->tandem_binary[0] == '/' ? "; the config gave it relative, and it was joined to the "
                       "config's folder on this machine" : "");
    char name[128];
    manifest_job_name(o, name, sizeof name);
    int rc = check_job_name(o, name, e);
    if (rc) return rc;
    /* the Job's own env entries of a mounted Secret: given again in cluster.env, the later
     * one would win and the Secret be ignored without a word */
    for (const char *p = k->env; k->secret_name[0] && !k->secret_as_env && *p;) {
        size_t nlen = strcspn(p, "=");
        if ((nlen == 27 && !strncmp(p, "AWS_SHARED_CREDENTIALS_FILE", nlen)) ||
            (nlen == 15 && !strncmp(p, "AWS_CONFIG_FILE", nlen)))
            return err_set(e, ERR_USAGE, "cluster.env sets %.*s, which the Job sets itself to the "
                           "mounted Secret cluster.secret_name = %s: leave it out of cluster.env",
                           (int)nlen, p, k->secret_name);
        size_t len = cluster_env_entry_len(p);
        p += len + (p[len] != '\0');
    }
    const sweep *sw = job_points(o);
    if (sw && k->nodes > 1)
        return err_set(e, ERR_USAGE, "--sweep with cluster.nodes = %d: on Kubernetes a sweep is an "
                       "Indexed Job whose index is the point; sweep runs of one pod each (set "
                       "cluster.nodes = 1) or render one job per point", k->nodes);
    k8s_warnings(warn, o);
    kv_list *sel = calloc(1, sizeof *sel);
    toleration_list *tol = calloc(1, sizeof *tol);
    if (!sel || !tol) {
        free(sel);
        free(tol);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    node_selection(warn, c, sel, tol);
    char cm[160];
    snprintf(cm, sizeof cm, "%s-config", name);
    bool oom = false;
    k8s_ctx x = {.out = out, .o = o, .c = c, .k = k, .name = name, .cm = cm, .oom = &oom,
                 .tandem = k->tandem_binary[0] ? k->tandem_binary : MANIFEST_K8S_TANDEM,
                 .indexed = k->nodes > 1, .sw = sw, .sel = sel, .tol = tol};
    k8s_header(&x);
    k8s_configmap(&x);
    if (x.indexed) k8s_service(&x);
    k8s_job(&x);
    free(sel);
    free(tol);
    if (oom) return err_set(e, ERR_INTERNAL, "out of memory writing the manifest");
    int err = outfile_stream_error(out);
    /* exit 1 as any command whose output cannot be written (cli/main.c); into --out
     * the caller makes it ERR_USAGE, as outfile's own write failures */
    return err ? err_sys(e, ERR_INTERNAL, err, "writing the manifest failed") : 0;
}
