/* test_metrics.c — what each episode measured survives preemption (ledger/metrics.h):
 * one row per episode in the store, none lost and none twice, whatever kills the run;
 * `tandem metrics` in every format; TensorBoard event files checked by an independent
 * reader (tests/metrics/tfcheck.py: its own CRC-32C and protobuf decoding). */
#include <dirent.h>
#include <stdarg.h>
#include <glob.h>
#include <sys/stat.h>

#include "data/corpus.h"
#include "ledger/metrics.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "tests/corpus_fixture.h"
#include "tests/runner_fixture.h"
#include "tests/test.h"

static char g_corpus[600];
static const int EPISODES = 12;

/* A run of EPISODES episodes; with_tb: log.tensorboard = its dir/tb. */
static int fixture_make(fixture *f, const char *tag, int with_tb) {
    fixture_init(f, tag, NULL);
    char text[2048];
    snprintf(text, sizeof text,
             "run: {episodes: %d, seed: 5, threads: 1}\n"
             "data: {dataset: %s/dataset.yaml}\n"
             "model: {layers: 2, channels: 32, heads: 2, ctx: 32}\n"
             "train: {batch: 6, seq: 32}\n"
             "tandem: {K: 2, E: 3}\n"
             "optim: {lr: 3e-3}\n"
             "checkpoint: {every_episodes: 1}\n"
             "log: {tensorboard: \"%s%s\"}\n",
             EPISODES, g_corpus, with_tb ? f->dir : "", with_tb ? "/tb" : "");
    return write_file(f->config, text);
}

/* Runs a shell command; its first output line into out. */
static int sh_line(char *out, size_t cap, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    out[0] = '\0';
    if (!fgets(out, (int)cap, p)) out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `tandem metrics STORE --format jsonl` into PATH; its exit code. */
static int metrics_jsonl(const fixture *f, const char *path) {
    char line[256];
    return sh_line(line, sizeof line, "'%s' metrics '%s' --format jsonl >'%s' 2>'%s.err'; echo $?",
                   tandem_bin(), f->store, path, path) == 0 ? atoi(line) : -1;
}

/* subset: 1 --subset, 3 --subset --restart (tfcheck.py) */
static void tfcheck(const char *jsonl, const char *files, int subset, char *out, size_t cap) {
    sh_line(out, cap, "/usr/bin/python3 '%s/tests/metrics/tfcheck.py' %s %s '%s' %s 2>&1",
            getenv("TANDEM_ROOT") ? getenv("TANDEM_ROOT") : ".", subset ? "--subset" : "",
            subset & 2 ? "--restart" : "", jsonl, files);
}

static void same_rows(const char *a, const char *b, const char *keys, char *out, size_t cap) {
    sh_line(out, cap, "/usr/bin/python3 '%s/tests/metrics/same_rows.py' '%s' '%s' %d %s 2>&1 | tail -n 1",
            getenv("TANDEM_ROOT") ? getenv("TANDEM_ROOT") : ".", a, b, EPISODES, keys ? keys : "");
}

static char g_ref_jsonl[700];
static double g_ref_seconds;

/* Whether process pid has a handler for SIGTERM (SigCgt in /proc/PID/status). */
static int catches_term(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    int yes = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "SigCgt:", 7)) yes = (strtoull(line + 7, NULL, 16) >> (SIGTERM - 1)) & 1;
    if (f) fclose(f);
    return yes;
}

/* The uninterrupted run: one row per episode, its live TensorBoard log equal to them, and
 * the export equal too. */
static void test_uninterrupted_rows_and_tensorboard(void) {
    fixture f;
    CHECK(fixture_make(&f, "metrics-ref", 0) == 0, "fixture");
    char tb[700], tb2[700], out[1024], log[8192];
    snprintf(tb, sizeof tb, "log.tensorboard=%s/tb", f.dir);
    const char *extra[] = {"--set", tb, NULL};
    double t0 = now_s();
    int rc = wait_exit(start_run_argv(&f, NULL, extra));
    g_ref_seconds = now_s() - t0;
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "reference run: exit %d: %s", rc, log);
    snprintf(g_ref_jsonl, sizeof g_ref_jsonl, "%s/metrics-ref.jsonl", g_corpus); /* outlives f */
    CHECK(metrics_jsonl(&f, g_ref_jsonl) == 0, "tandem metrics --format jsonl");
    same_rows(g_ref_jsonl, g_ref_jsonl, NULL, out, sizeof out);
    CHECK(!strcmp(out, "ok"), "rows of the reference: %s", out);
    snprintf(tb, sizeof tb, "%s/tb/events.out.tfevents.*", f.dir);
    tfcheck(g_ref_jsonl, tb, 0, out, sizeof out);
    /* 3 domains x (loss, alpha, epochs, val) + 6 scalars + 3 steps, per episode (val: the
     * overfitting record's score of u, on by default with tandem.alpha_cut = overfit; no
     * loss_u, loss_w: the hold pins α at its start while nothing overfits, so no twins
     * run, steps.h step_pinned; test_validation_every_n has them) */
    char want[32];
    snprintf(want, sizeof want, "ok %d", EPISODES * (3 * 4 + 6 + 3));
    CHECK(!strcmp(out, want), "the live TensorBoard log: %s (want %s)", out, want);
    /* each free step's loss: 3 per row on the AdamW step axis, their mean the α-weighted
     * mean of the row's per-domain losses */
    CHECK(sh_line(out, sizeof out,
                  "/usr/bin/python3 -c 'import json,sys\n"
                  "rows = [json.loads(l) for l in open(sys.argv[1])]\n"
                  "for r in rows:\n"
                  "    s = r[\"step_loss\"]\n"
                  "    assert len(s) == 3 and r[\"step_first\"] == 3 * r[\"episode\"] + 1, r\n"
                  "    w = sum(r[\"alpha\"][d] * r[\"loss\"][d] for d in r[\"loss\"])\n"
                  "    assert abs(sum(s) / 3 - w) < 1e-12 * w, (s, w)\n"
                  "print(\"ok\")' '%s' 2>&1 | tail -n 1",
                  g_ref_jsonl) == 0 && !strcmp(out, "ok"),
          "per-step losses: %s", out);
    snprintf(tb2, sizeof tb2, "%s/export", f.dir);
    CHECK(sh_line(out, sizeof out, "'%s' metrics '%s' --tensorboard '%s' >/dev/null 2>&1; echo $?",
                  tandem_bin(), f.store, tb2) == 0 && !strcmp(out, "0"),
          "export: exit %s", out);
    snprintf(tb2, sizeof tb2, "%s/export/events.out.tfevents.*", f.dir);
    tfcheck(g_ref_jsonl, tb2, 0, out, sizeof out);
    CHECK(!strcmp(out, want), "the exported TensorBoard file: %s", out);
    /* a second export into the same DIR replaces the first (before: every tag/step twice);
     * one into the live log's DIR is refused, exit 2, the live log untouched */
    CHECK(sh_line(out, sizeof out, "'%s' metrics '%s' --tensorboard '%s/export' 2>&1 >/dev/null | tail -n 1",
                  tandem_bin(), f.store, f.dir) == 0 &&
              strstr(out, "replacing the earlier export"), "a second export: %s", out);
    tfcheck(g_ref_jsonl, tb2, 0, out, sizeof out);
    CHECK(!strcmp(out, want), "two exports into one directory: %s", out);
    CHECK(sh_line(out, sizeof out, "n=$(ls '%s/tb' | wc -l); '%s' metrics '%s' --tensorboard '%s/tb' >/dev/null 2>&1; "
                  "echo $? $n $(ls '%s/tb' | wc -l)", f.dir, tandem_bin(), f.store, f.dir, f.dir) == 0 &&
              !strcmp(out, "2 1 1"), "an export into the live log's directory: exit, files before, after: %s", out);
    /* a live log whose host is named tandem-export-... (a Kubernetes pod of export.yaml)
     * is a live log still: refused, kept (it was taken for an earlier export and deleted) */
    CHECK(sh_line(out, sizeof out, "mkdir -p '%s/tbx' && cp %s/tb/events.out.tfevents.* "
                  "'%s/tbx/events.out.tfevents.1.tandem-export-abc123-0.7' && '%s' metrics '%s' --tensorboard '%s/tbx' "
                  ">/dev/null 2>&1; echo $? $(ls '%s/tbx' | wc -l)", f.dir, f.dir, f.dir, tandem_bin(), f.store,
                  f.dir, f.dir) == 0 &&
              !strcmp(out, "2 1"), "a live log of a host named tandem-export-...: exit, files after: %s", out);
    /* a byte flipped in the data: the reader (and TensorBoard) must notice */
    glob_t g;
    CHECK(glob(tb2, 0, NULL, &g) == 0 && g.gl_pathc == 1, "one exported file");
    FILE *fp = fopen(g.gl_pathv[0], "r+b");
    CHECK(fp && fseek(fp, 60, SEEK_SET) == 0, "open the export");
    int c = fgetc(fp);
    fseek(fp, 60, SEEK_SET);
    fputc(c ^ 0x20, fp);
    fclose(fp);
    tfcheck(g_ref_jsonl, g.gl_pathv[0], 0, out, sizeof out);
    CHECK(strstr(out, "CRC mismatch"), "a flipped byte went unnoticed: %s", out);
    globfree(&g);
    /* the CSV: a header and one line per episode; the table: one line per episode */
    CHECK(sh_line(out, sizeof out, "'%s' metrics '%s' --format csv | wc -l", tandem_bin(), f.store) == 0 &&
              atoi(out) == EPISODES + 1, "csv lines: %s", out);
    CHECK(sh_line(out, sizeof out, "'%s' metrics '%s' --format csv | head -n 1", tandem_bin(), f.store) == 0 &&
              strstr(out, "episode,seq,time,host") && strstr(out, "alpha_d2"), "csv header: %s", out);
    char svg[700];
    snprintf(svg, sizeof svg, "%s/loss.svg", f.dir);
    CHECK(sh_line(out, sizeof out, "'%s' metrics '%s' --plot '%s' >/dev/null 2>&1; grep -c '<polyline' '%s'",
                  tandem_bin(), f.store, svg, svg) == 0 && atoi(out) >= 3, "plot polylines: %s", out);
    fixture_done(&f);
}

/* Killed again and again (also right before a row is written), then SIGTERM in the
 * middle: still exactly one row per episode; the SIGKILL-only run's rows equal the
 * uninterrupted run's in every deterministic field; the live logs of all the lives
 * together hold each scalar at most once. */
static void test_rows_survive_kills(void) {
    fixture f;
    char tb[700], out[1024], jsonl[700], log[8192];
    CHECK(fixture_make(&f, "metrics-chaos", 1) == 0, "fixture with log.tensorboard");
    int rc = run_to_end(&f, "TANDEM_TEST_KILL_AT=metrics:3");
    CHECK(rc == 128 + SIGKILL, "killed at the 3rd row: exit %d", rc);
    chaos_result cr;
    chaos_loop(&f, 10, g_ref_seconds / 6, 0x3e7c5, &cr);
    CHECK(!cr.bad_exit, "a life exited %d: %s", cr.bad_exit, cr.log);
    rc = cr.finished ? 0 : run_to_end(&f, NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "final life: exit %d: %s", rc, log);
    snprintf(jsonl, sizeof jsonl, "%s/rows.jsonl", f.dir);
    CHECK(metrics_jsonl(&f, jsonl) == 0, "tandem metrics");
    same_rows(g_ref_jsonl, jsonl, NULL, out, sizeof out);
    CHECK(!strcmp(out, "ok"), "after %d kills: %s", cr.kills + 1, out);
    snprintf(tb, sizeof tb, "%s/tb/events.out.tfevents.*", f.dir);
    tfcheck(jsonl, tb, 1, out, sizeof out);
    CHECK(!strncmp(out, "ok ", 3), "the live logs of %d lives: %s", cr.kills + 2, out);
    printf("  %d SIGKILLs (%d inside commits): %d rows, equal to the uninterrupted run's; live "
           "logs %s scalars\n", cr.kills + 1, cr.in_commit, EPISODES, out + 3);
    fixture_done(&f);

    /* SIGTERMs inside episodes: each stop commits mid-episode (often in the free phase,
     * after the alpha step has used the probe's losses); the state carries what the
     * episode's row needs, so the rows equal the uninterrupted run's in every
     * deterministic field, the twins' losses and the free-phase means included */
    CHECK(fixture_make(&f, "metrics-term", 0) == 0, "fixture");
    int stops = 0;
    for (int i = 1; i <= 4; i++) {
        pid_t pid = start_run(&f, "TANDEM_TEST_STEP_DELAY_MS=5", NULL, NULL);
        /* past start-up first: a signal before main() (the loader, OpenBLAS's thread pool:
         * 20-40 ms on a loaded machine) is death by the signal, exit 143 (docs/running.md),
         * and a short reference run's quarter fell there once in CI: wait until the process
         * catches SIGTERM (its handler is in), then the quarter */
        for (int w = 0; w < 2000 && !catches_term(pid); w++) usleep(2000);
        usleep((useconds_t)(g_ref_seconds * 0.25e6));
        kill(pid, SIGTERM);
        rc = wait_exit(pid);
        CHECK(rc == 75 || rc == 0, "SIGTERM %d: exit %d", i, rc);
        stops += rc == 75;
    }
    CHECK(run_to_end(&f, NULL) == 0, "resume");
    snprintf(jsonl, sizeof jsonl, "%s/rows.jsonl", f.dir);
    CHECK(metrics_jsonl(&f, jsonl) == 0, "tandem metrics");
    same_rows(g_ref_jsonl, jsonl, NULL, out, sizeof out);
    CHECK(!strcmp(out, "ok"), "after %d SIGTERMs: %s", stops, out);
    CHECK(stops >= 2, "only %d of 4 lives were stopped mid-run", stops);
    printf("  %d SIGTERMs mid-run: the rows equal the uninterrupted run's\n", stops);
    fixture_done(&f);
}

/* A fixed-mixture run has no probe: its rows hold no twins' losses, and alpha stays the
 * mixture; a damaged row is skipped by `tandem metrics` (said, exit 0); an impossible
 * log.tensorboard is refused before the store is touched. */
static void test_fixed_mode_damage_and_bad_paths(void) {
    fixture f;
    CHECK(fixture_make(&f, "metrics-fixed", 0) == 0, "fixture");
    const char *extra[] = {"--set", "run.mode=fixed", "--set", "run.episodes=3", NULL};
    int rc = wait_exit(start_run_argv(&f, NULL, extra));
    CHECK(rc == 0, "fixed run: exit %d", rc);
    char jsonl[700], out[1024];
    snprintf(jsonl, sizeof jsonl, "%s/rows.jsonl", f.dir);
    CHECK(metrics_jsonl(&f, jsonl) == 0, "tandem metrics");
    CHECK(sh_line(out, sizeof out,
                  "/usr/bin/python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])];"
                  "print(\"ok\" if len(r)==3 and all(\"loss_u\" not in x and x[\"lr_alpha\"]==0 and "
                  "abs(sum(x[\"alpha\"].values())-1)<1e-12 and x[\"alpha\"]==r[0][\"alpha\"] for x in r) "
                  "else r)' '%s'", jsonl) == 0 && !strcmp(out, "ok"),
          "fixed-mode rows: %.300s", out);
    char row[900];
    snprintf(row, sizeof row, "%s/metrics/1.mp", f.store);
    /* a row damaged anywhere reads as damaged, never as other figures (the chaos pass
     * found a flipped byte inside α read as a different α): every byte flipped in turn */
    buf_t b = {0};
    CHECK(fileio_read_all(row, &b, 1 << 20) == 0 && b.n > 100, "read %s", row);
    uint8_t *bytes = (uint8_t *)b.p;
    size_t n = b.n;
    rec_metrics good, got;
    tdm_err de = {0};
    CHECK(bytes && rec_metrics_decode(bytes, n, row, &good, &de) == 0, "the row reads: %s", de.msg);
    size_t accepted = 0;
    for (size_t i = 0; bytes && i < n; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            bytes[i] ^= (uint8_t)(1u << bit);
            if (rec_metrics_decode(bytes, n, row, &got, &de) == 0) accepted++;
            bytes[i] ^= (uint8_t)(1u << bit);
        }
    }
    printf("  a row of %zu bytes, 3 bits of each flipped in turn: %zu read as a row\n", n, accepted);
    CHECK(accepted == 0, "%zu damaged copies of %s were read as rows", accepted, row);
    free(bytes);
    CHECK(write_file(row, "not a record") == 0, "damage a row");
    CHECK(sh_line(out, sizeof out, "'%s' metrics '%s' --format jsonl 2>&1 >/dev/null | head -n 1; ",
                  tandem_bin(), f.store) == 0 && strstr(out, "metrics/1.mp skipped"),
          "a damaged row is not named: %s", out);
    CHECK(sh_line(out, sizeof out, "'%s' metrics '%s' --format jsonl 2>/dev/null | wc -l", tandem_bin(),
                  f.store) == 0 && atoi(out) == 2, "rows around the damaged one: %s", out);
    fixture_done(&f);

    CHECK(fixture_make(&f, "metrics-badtb", 0) == 0, "fixture");
    char bad[800], log[8192];
    snprintf(bad, sizeof bad, "log.tensorboard=%s", f.config); /* a file, not a directory */
    const char *extra2[] = {"--set", bad, NULL};
    rc = wait_exit(start_run_argv(&f, NULL, extra2));
    read_all(f.log, log, sizeof log);
    struct stat st;
    CHECK(rc == 2 && strstr(log, "log.tensorboard"), "exit %d: %s", rc, log);
    CHECK(stat(f.store, &st) != 0, "the store was created although the run was refused");
    fixture_done(&f);
}

/* Under sample mixing a free step's batch may hold no row of a domain: its loss there is no
 * measurement. With u frozen (optim.lr 1e-12) every loss is the initial ~ln 256, and a
 * fixed run of batch 1 draws one domain per step: each row's per-domain loss is that or
 * null (no row in the episode), never pulled down by zeros (it read 0, 1.39, 2.77,
 * 4.17), and each step's loss is the batch's (it read 2.77 at batch 1, α of it). */
static void test_loss_of_steps_without_the_domain(void) {
    fixture f;
    CHECK(fixture_make(&f, "metrics-sample", 0) == 0, "fixture");
    const char *extra[] = {"--set", "run.mode=fixed", "--set", "run.episodes=6", "--set", "train.batch=1",
                           "--set", "optim.lr=1e-12", "--set", "optim.warmup=0", NULL};
    int rc = wait_exit(start_run_argv(&f, NULL, extra));
    char log[8192];
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "fixed run: exit %d: %s", rc, log);
    char jsonl[700], out[1024];
    snprintf(jsonl, sizeof jsonl, "%s/rows.jsonl", f.dir);
    CHECK(metrics_jsonl(&f, jsonl) == 0, "tandem metrics");
    CHECK(sh_line(out, sizeof out,
                  "/usr/bin/python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])];"
                  "v=[x for row in r for x in row[\"loss\"].values()];"
                  "s=[x for row in r for x in row[\"step_loss\"]];"
                  "ok=len(r)==6 and None in v and all(x is None or 5.3<x<5.8 for x in v) and "
                  "len(s)==18 and all(5.3<x<5.8 for x in s);"
                  "print(\"ok\" if ok else (v, s))' '%s'", jsonl) == 0 && !strcmp(out, "ok"),
          "per-domain and step losses: %.600s", out);
    fixture_done(&f);
}

/* log.val_every: every 4th episode's row (and the last's) carries u's validation loss —
 * exactly what `tandem eval --split val --max-tokens log.val_tokens` says of that state —
 * and TensorBoard has it as val/DOMAIN; rows in between have none. */
static void test_validation_every_n(void) {
    fixture f;
    CHECK(fixture_make(&f, "metrics-val", 0) == 0, "fixture");
    char tb[700], out[4096], log[8192], jl[800];
    snprintf(tb, sizeof tb, "log.tensorboard=%s/tb", f.dir);
    /* alpha_cut any: every episode probes (the probe's loss_u, loss_w in the rows) */
    const char *extra[] = {"--set", tb, "--set", "log.val_every=5", "--set", "log.val_tokens=70",
                           "--set", "tandem.alpha_cut=any", NULL};
    int rc = wait_exit(start_run_argv(&f, NULL, extra));
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "run: exit %d: %s", rc, log);
    snprintf(jl, sizeof jl, "%s/rows.jsonl", f.dir);
    CHECK(metrics_jsonl(&f, jl) == 0, "tandem metrics --format jsonl");
    /* episodes 5 and 10 (t = 4, 9) and the last (t = 11); 70 tokens: two windows of 32 */
    CHECK(sh_line(out, sizeof out,
                  "'%s' eval '%s' --split val --max-tokens 70 --json | /usr/bin/python3 -c 'import json,sys\n"
                  "e = json.load(sys.stdin)\n"
                  "rows = [json.loads(l) for l in open(sys.argv[1])]\n"
                  "have = [r[\"episode\"] for r in rows if \"val\" in r]\n"
                  "assert have == [4, 9, 11], have\n"
                  "last = rows[-1]\n"
                  "assert last[\"val_tokens\"] == 64, last\n"
                  "assert {d: v[\"loss\"] for d, v in e[\"domains\"].items()} == last[\"val\"], (e, last[\"val\"])\n"
                  "print(\"ok\")' '%s' 2>&1 | tail -n 1",
                  tandem_bin(), f.store, jl) == 0 && !strcmp(out, "ok"),
          "validation rows: %s", out);
    /* the CSV holds what JSON lines hold: val_tokens (empty where a row has none) and the
     * free steps' losses (before: neither column) */
    CHECK(sh_line(out, sizeof out,
                  "'%s' metrics '%s' --format csv | /usr/bin/python3 -c 'import csv,json,sys\n"
                  "rows = [json.loads(l) for l in open(sys.argv[1])]\n"
                  "got = list(csv.DictReader(sys.stdin))\n"
                  "assert len(got) == len(rows), (len(got), len(rows))\n"
                  "for r, c in zip(rows, got):\n"
                  "    assert c[\"val_tokens\"] == (str(r[\"val_tokens\"]) if \"val\" in r else \"\"), (r, c)\n"
                  "    assert int(c[\"step_first\"]) == r[\"step_first\"], (r, c)\n"
                  "    assert [float(x) for x in c[\"step_loss\"].split()] == r[\"step_loss\"], (r, c)\n"
                  "print(\"ok\")' '%s' 2>&1 | tail -n 1",
                  tandem_bin(), f.store, jl) == 0 && !strcmp(out, "ok"),
          "the CSV's val_tokens, step_first, step_loss: %s", out);
    snprintf(tb, sizeof tb, "%s/tb/events.out.tfevents.*", f.dir);
    tfcheck(jl, tb, 0, out, sizeof out);
    char want[32];
    snprintf(want, sizeof want, "ok %d", EPISODES * (3 * 5 + 6 + 3) + 3 * 3);
    CHECK(!strcmp(out, want), "TensorBoard with val/: %s (want %s)", out, want);
    fixture_done(&f);
}

/* A row of 24 domains takes more than stdio's 4096-byte buffer: a SIGKILL while a row's
 * events are being written (TANDEM_TEST_KILL_AT=tb-row:2, the second row made, not yet
 * flushed) must leave whole records only — the row is written with one write(), so the
 * episode is missing from that life's log, never cut — and the resumed run's live logs read
 * whole (tfcheck.py: no "unreadable"), each scalar at most once. */
static void test_live_log_whole_rows(void) {
    fixture f;
    fixture_init(&f, "metrics-wide", NULL);
    char corpus[700], out[1024], log[8192], tb[700], jsonl[700], names[1024] = "";
    snprintf(corpus, sizeof corpus, "%s/corpus", f.dir);
    for (int i = 0; i < 24; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%spile_domain_%02d", i ? "," : "", i);
    CHECK(sh_line(out, sizeof out, "'%s' gen-corpus --out '%s' --names '%s' --train-tokens 4k --val-tokens 1k "
                  "--test-tokens 1k >/dev/null 2>&1; echo $?", tandem_bin(), corpus, names) == 0 &&
              !strcmp(out, "0"), "gen-corpus of 24 domains: %s", out);
    char text[2048];
    snprintf(text, sizeof text,
             "run: {episodes: 4, seed: 1, threads: 1}\n"
             "data: {dataset: %s/dataset.yaml}\n"
             "model: {layers: 1, channels: 16, heads: 1, ctx: 16}\n"
             "train: {batch: 24, seq: 16}\n"
             "tandem: {K: 1, E: 1, alpha_cut: any}\n"
             "checkpoint: {every_episodes: 1}\n"
             "log: {tensorboard: \"%s/tb\"}\n", corpus, f.dir);
    CHECK(write_file(f.config, text) == 0, "config");
    int rc = run_to_end(&f, "TANDEM_TEST_KILL_AT=tb-row:2");
    read_all(f.log, log, sizeof log);
    CHECK(rc == 128 + SIGKILL, "killed in the second row's write: exit %d: %s", rc, log);
    rc = run_to_end(&f, NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "resume: exit %d: %s", rc, log);
    snprintf(jsonl, sizeof jsonl, "%s/rows.jsonl", f.dir);
    CHECK(metrics_jsonl(&f, jsonl) == 0, "tandem metrics");
    snprintf(tb, sizeof tb, "%s/tb/events.out.tfevents.*", f.dir);
    tfcheck(jsonl, tb, 1, out, sizeof out);
    CHECK(!strncmp(out, "ok ", 3), "the live logs after a kill inside a row's write: %s", out);
    /* the killed row is missing whole: each file's episodes are all of a row's scalars */
    CHECK(sh_line(out, sizeof out,
                  "/usr/bin/python3 -c 'import sys, struct, glob, collections\n"
                  "n = collections.Counter()\n"
                  "for p in glob.glob(sys.argv[1]):\n"
                  "    d = open(p, \"rb\").read(); i = 0\n"
                  "    while i < len(d):\n"
                  "        (L,) = struct.unpack(\"<Q\", d[i:i + 8]); i += 16 + L\n"
                  "    assert i == len(d), (p, i, len(d))\n"
                  "print(\"ok\")' '%s' 2>&1 | tail -n 1", tb) == 0 && !strcmp(out, "ok"),
          "whole records: %s", out);
    fixture_done(&f);
}

/* A resume with --allow-change from before the change redoes episodes whose rows (and live
 * log entries) the killed start had written: the store's rows are replaced; the live log's
 * files hold both trajectories, and the start says so once, naming what TensorBoard shows
 * and how to get a log with the new one only (W&B's sync keeps the first value of a step).
 * What TensorBoard shows (tfcheck.py --restart: per tag, a step that goes back drops the
 * later ones read before) equals the store's rows. */
static void test_allow_change_live_log(void) {
    fixture f;
    char out[1024], log[8192], jsonl[700], tb[700], setv[700];
    CHECK(fixture_make(&f, "metrics-change", 1) == 0, "fixture with log.tensorboard");
    snprintf(setv, sizeof setv, "checkpoint.every_episodes=4");
    const char *every[] = {"--set", setv, NULL};
    /* killed inside the second commit (episode 8's, before its manifest), so that the state
     * after 4 episodes is in for certain: killed at the 7th row instead, a loaded machine
     * had not yet committed it (commits run in the background) and the resume started from
     * episode 0 */
    int rc = wait_exit(start_run_argv(&f, "TANDEM_TEST_KILL_AT=manifest:2", every));
    CHECK(rc == 128 + SIGKILL, "killed in the second commit (states after 4 episodes): exit %d", rc);
    const char *change[] = {"--set", setv, "--set", "optim.lr=2e-3", "--allow-change", "optim.lr", NULL};
    rc = wait_exit(start_run_argv(&f, NULL, change));
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "resume with --allow-change: exit %d: %s", rc, log);
    CHECK(strstr(log, "log.tensorboard: episode 4's row replaces one of the trajectory before the config change") &&
              strstr(log, "tandem metrics STORE --tensorboard"),
          "the replaced trajectory in the live log is not said: %s", log);
    snprintf(jsonl, sizeof jsonl, "%s/rows.jsonl", f.dir);
    CHECK(metrics_jsonl(&f, jsonl) == 0, "tandem metrics");
    snprintf(tb, sizeof tb, "%s/tb/events.out.tfevents.*", f.dir);
    tfcheck(jsonl, tb, 1, out, sizeof out);
    CHECK(!strncmp(out, "twice: ", 7), "the files of both starts hold episodes 4 and 5: %s", out);
    tfcheck(jsonl, tb, 3, out, sizeof out);
    CHECK(!strncmp(out, "ok ", 3), "what TensorBoard shows is not the store's rows: %s", out);
    fixture_done(&f);
}

int main(void) {
    char *dir = test_tmpdir("metrics-corpus");
    uint64_t tr[3] = {30000, 15000, 6000};
    tdm_err e = {0};
    if (corpus_fixture(dir, 3, tr, 3, 3000, NULL, &e)) {
        fprintf(stderr, "corpus: %s\n", e.msg);
        return 1;
    }
    snprintf(g_corpus, sizeof g_corpus, "%s", dir);
    RUN(test_uninterrupted_rows_and_tensorboard);
    RUN(test_rows_survive_kills);
    RUN(test_fixed_mode_damage_and_bad_paths);
    RUN(test_loss_of_steps_without_the_domain);
    RUN(test_validation_every_n);
    RUN(test_live_log_whole_rows);
    RUN(test_allow_change_live_log);
    test_rmtree(dir);
    free(dir);
    return test_summary("test_metrics");
}
