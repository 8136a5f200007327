#!/usr/bin/env bash
# cli_slurm.sh — the sbatch script of `tandem manifest slurm` survives preemption: proven on
# a real Slurm controller and node on loopback.
#
#   TANDEM_BIN=build/rel/tandem bash tests/cli_slurm.sh
#
# A. Without Slurm (every build variant):
#    - scripts/slurm/tandem-{1,4}node.sbatch are what the command in their header renders;
#    - rendered scripts pass `bash -n`; GPU directives appear only with GPUs; --set values
#      are quoted for the shell; no credential is in any script;
#    - the script's logic, with a fake srun and scontrol (tests/slurm/fake): a USR1 to the
#      batch shell reaches tandem, which commits and exits 75, and the script requeues the
#      job; a TERM reaches tandem as USR1 and the script leaves the requeue to Slurm; a
#      credentials file others can read stops the job with exit 2; resumed, the run ends
#      with the uninterrupted run's hashes.
# B. With Slurm (tests/slurm/start.sh: munged, slurmctld, slurmd as root on 127.0.0.1):
#    the rendered script is submitted with sbatch; once tandem has committed, the job is
#    preempted by `scontrol requeue` (Slurm's own requeue: TERM), forced to start again,
#    then preempted by USR1 to the batch shell (`scancel --signal=USR1 --batch`: the
#    script requeues itself), started again, and runs to the end. The job log must show
#    SLURM_RESTART_COUNT=2, both preemptions and no credential, and `tandem hash` of the
#    store must equal the uninterrupted run's.
#    E: a sweep (--sweep run.seed=3,4) as a 2-task job array: task 0 requeued by a USR1
#    resumes its own point; both points end on the hashes of direct runs of their seeds.
#    D: a run that diverges (optim.lr = 1e30) fails its job with ExitCode 5:0 and is not
#    requeued (Restarts=0; the log says why); A checks the same with the fake scontrol.
#    B runs for every build variant (about 35 s each; TANDEM_SLURM_ASAN=0 skips it for
#    the ASan build). It is skipped — counted neither passed nor failed, and said so —
#    only when not root (slurmd must be root; CI runs as root).
# Prints PASS/FAIL lines and "cli_slurm: N passed, M failed"; exits non-zero on failure.
# TANDEM_TEST_KEEP=1 keeps the scratch directory (job logs, Slurm's logs) for a look.
set -u
cd "$(dirname "$0")/.." || exit 1
SUITE=cli_slurm
. tests/lib_cli.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tandem-slurm-XXXXXX")
chmod 755 "$tmp"
slurm_dir=
bg=()
cleanup() {
  for p in "${bg[@]+"${bg[@]}"}"; do kill "$p" 2>/dev/null; done
  [ -n "$slurm_dir" ] && bash "$root/tests/slurm/stop.sh" "$slurm_dir" >/dev/null 2>&1
  if [ "${TANDEM_TEST_KEEP:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

if [ ! -x "$bin" ]; then fail setup "no tandem binary at $bin"; finish; fi
t_start=$(date +%s)

# --- the run: a small corpus and a config whose 30 episodes take a few seconds
"$bin" gen-corpus --out "$tmp/corpus" --names web,code,math --train-tokens 30k,15k,6k \
  --val-tokens 3k --test-tokens 0 >/dev/null || { fail "gen-corpus"; finish; }
cat >"$tmp/run.yaml" <<'EOF'
run: {episodes: 30, seed: 3, threads: 1}
data: {dataset: corpus/dataset.yaml}
model: {layers: 2, channels: 32, heads: 2, ctx: 32}
train: {batch: 6, seq: 32}
tandem: {K: 2, E: 3, lr_alpha: 0.5, alpha_cut: any}
optim: {lr: 3e-3}
checkpoint: {every_episodes: 1}
cluster:
  cpus_per_task: 1
  signal_lead_s: 60
  credentials_file: creds.env
EOF
secret="fake/secret+cli-slurm-$$"
printf '# test credentials (not real)\nexport AWS_ACCESS_KEY_ID=AKIDCLISLURMTEST\nAWS_SECRET_ACCESS_KEY="%s"\n' \
  "$secret" >"$tmp/creds.env"
chmod 600 "$tmp/creds.env"
if ! "$bin" run "$tmp/run.yaml" --store "$tmp/ref" --quiet >"$tmp/ref.log" 2>&1 ||
   ! ref=$("$bin" hash "$tmp/ref"); then
  fail "uninterrupted reference run" "$(tail -n 5 "$tmp/ref.log")"
  finish
fi
pass "uninterrupted reference run"

# --- A. rendering, without Slurm
for f in scripts/slurm/tandem-1node.sbatch scripts/slurm/tandem-4node.sbatch; do
  cmd=$(sed -n 's/^#   rendered by: tandem //p' "$f" | head -n 1)
  if [ -z "$cmd" ]; then fail "$f: no 'rendered by' line"; continue; fi
  read -r -a args <<<"$cmd" # the checked-in commands hold plain words only
  if "$bin" "${args[@]}" >"$tmp/current.sbatch" 2>/dev/null && cmp -s "$f" "$tmp/current.sbatch"; then
    pass "$f is what 'tandem $cmd' renders"
  else
    fail "$f is stale: regenerate with ./tandem $cmd --out $f" "$(diff "$f" "$tmp/current.sbatch" | head)"
  fi
  bash -n "$f" 2>"$tmp/n.err" && pass "$f: bash -n" || fail "$f: bash -n" "$(cat "$tmp/n.err")"
done

render() { # render OUT ARGS...: tandem manifest slurm run.yaml into OUT (--store among ARGS replaces the default: given twice it is refused)
  local out=$1 store="file://$tmp/store" args=(); shift
  while [ $# -gt 0 ]; do
    if [ "$1" = --store ]; then store=$2; shift 2; else args+=("$1"); shift; fi
  done
  "$bin" manifest slurm "$tmp/run.yaml" --store "$store" --set "cluster.workdir=$tmp" \
    "${args[@]}" --out "$out" 2>"$out.err"
}
render "$tmp/cpu.sbatch" || fail "render" "$(cat "$tmp/cpu.sbatch.err")"
render "$tmp/gpu.sbatch" --set cluster.gpus_per_node=8 --set cluster.nodes=2 \
  --set "tandem.lr_alpha=0.5" --set "data.dataset=$tmp/corpus/dataset.yaml" \
  --set 'cluster.env=AWS_REGION=us-east-1,TANDEM_NOTE=it'"'"'s a test' --set cluster.gpu_type= \
  || fail "render gpu" "$(cat "$tmp/gpu.sbatch.err")"
problems=()
bash -n "$tmp/cpu.sbatch" || problems+=("cpu script: bash -n")
bash -n "$tmp/gpu.sbatch" || problems+=("gpu script: bash -n")
grep -q -- '--gres' "$tmp/cpu.sbatch" && problems+=("a CPU job has a --gres directive")
grep -qx -- '#SBATCH --gres=gpu:8' "$tmp/gpu.sbatch" || problems+=("no untyped --gres=gpu:8")
"$bin" manifest slurm "$tmp/run.yaml" --set cluster.gpus_per_node=4 2>/dev/null |
  grep -qx -- '#SBATCH --gres=gpu:h100:4' || problems+=("no --gres=gpu:h100:4")
for d in '--requeue' '--open-mode=append' '--signal=B:USR1@60' "--chdir=$tmp" '--cpus-per-task=1' \
         '--output=%x-%j.out' '--nodes=1'; do
  grep -qx -- "#SBATCH $d" "$tmp/cpu.sbatch" || problems+=("missing #SBATCH $d")
done
grep -qF "env AWS_REGION=us-east-1 'TANDEM_NOTE=it'\\''s a test'" "$tmp/gpu.sbatch" || problems+=("cluster.env value not shell-quoted")
grep -qx -- '#SBATCH --job-name=tandem-run-[0-9a-f]\{6\}' "$tmp/cpu.sbatch" || problems+=("job name not tandem-run-<6 hex digits of the store>")
grep -qF "STORE=file://$tmp/store" "$tmp/cpu.sbatch" || problems+=("store not absolute")
grep -qF "CONFIG=$tmp/run.yaml" "$tmp/cpu.sbatch" || problems+=("config path not absolute")
grep -qF "load_credentials \"\$CREDENTIALS\" || exit 2" "$tmp/cpu.sbatch" || problems+=("no credentials step")
grep -q "AKIDCLISLURMTEST\|$secret" "$tmp/cpu.sbatch" "$tmp/gpu.sbatch" && problems+=("a credential is in a script")
grep -q "scontrol requeue \"\$SLURM_JOB_ID\"" "$tmp/cpu.sbatch" || problems+=("no scontrol requeue")
grep -q 'SLURM_RESTART_COUNT' "$tmp/cpu.sbatch" || problems+=("SLURM_RESTART_COUNT not logged")
grep -q 'cluster\.' <(sed -n '/^srun/,/&$/p' "$tmp/gpu.sbatch") && problems+=("cluster.* passed to tandem run")
grep -q 'cluster.nodes = 2: every node must see the same directory' "$tmp/gpu.sbatch.err" ||
  problems+=("no warning for 2 nodes with a file store")
if [ ${#problems[@]} -eq 0 ]; then pass "rendered scripts: directives, GPUs only when asked, quoting, no credentials"
else fail "rendered scripts" "${problems[@]}"; fi
if command -v shellcheck >/dev/null; then # not a dependency: used where installed
  out=$(shellcheck -S warning "$tmp/cpu.sbatch" "$tmp/gpu.sbatch" 2>&1) &&
    pass "rendered scripts: shellcheck" || fail "rendered scripts: shellcheck" "$out"
fi
out=$("$bin" manifest slurm "$tmp/run.yaml" --set 'cluster.time_limit=1:2:3:4' 2>&1); st=$?
[ $st -eq 2 ] && grep -q "cluster.time_limit" <<<"$out" && pass "bad cluster.time_limit: exit 2 naming it" ||
  fail "bad time limit" "exit $st: $out"
out=$("$bin" manifest slurm "$tmp/run.yaml" --set 'cluster.workdir=/a b' 2>&1); st=$?
[ $st -eq 2 ] && grep -q "cluster.workdir" <<<"$out" && pass "a workdir with a blank: exit 2 naming it" ||
  fail "workdir with a blank" "exit $st: $out"
# a '%' in the job's directory: Slurm expanded %j in the log path (relative to --chdir), the
# log went to a directory that does not exist and the job failed to launch (before: exit 0)
mkdir -p "$tmp/w%jx"
out=$("$bin" manifest slurm "$tmp/run.yaml" --set "cluster.workdir=$tmp/w%jx" 2>&1); st=$?
out2=$(cd "$tmp/w%jx" && "$bin" manifest slurm "$tmp/run.yaml" 2>&1); st2=$?
[ $st -eq 2 ] && grep -q "cluster.workdir = .*'%'" <<<"$out" && [ $st2 -eq 2 ] && grep -q "set cluster.workdir" <<<"$out2" &&
  pass "a '%' in the job's directory (cluster.workdir or where it renders): exit 2 naming the key" ||
  fail "a '%' in the job's directory (exit $st, $st2, want 2)" "$out" "$out2"
# default job names: configs of one name in two folders with two stores are two jobs
# (one name: Slurm's singleton held an unrelated run back); the same store, spelled
# file://./x, ./x or its absolute path, rendered again, keeps its name (a resubmit)
mkdir -p "$tmp/expa" "$tmp/expb"
cp "$tmp/run.yaml" "$tmp/expa/run.yaml"; cp "$tmp/run.yaml" "$tmp/expb/run.yaml"
jn() { (cd "$1" && shift && "$bin" manifest slurm run.yaml "$@" 2>/dev/null | sed -n 's/^#SBATCH --job-name=//p'); }
na=$(jn "$tmp/expa") nb=$(jn "$tmp/expb") na2=$(jn "$tmp/expa" --store "$tmp/expa/runs/run") \
  na3=$(jn "$tmp/expa" --store file://./runs/run) ka=$(jn "$tmp/expa" --store s3://bkt/a) kb=$(jn "$tmp/expa" --store s3://bkt/b) \
  ka2=$(jn "$tmp/expa" --store s3://bkt/a/)
if [ -n "$na" ] && [ -n "$nb" ] && [ "$na" != "$nb" ] && [ "$na" = "$na2" ] && [ "$na" = "$na3" ] &&
   [ "$ka" != "$kb" ] && [ "$ka" = "$ka2" ] && [[ $na =~ ^tandem-run-[0-9a-f]{6}$ ]]; then
  pass "default job names: one per store ($na, $nb), the same for every spelling of one store"
else
  fail "default job names" "expa $na, expb $nb, abs $na2, file:// $na3, s3 a $ka, b $kb, a/ $ka2"
fi
# a ',' in a cluster.env value: written '\,' it reaches tandem as ','; as is, the error
# says what the ',' did (before: 'NAME of letters, digits', the entry blamed for its name)
out=$("$bin" manifest slurm "$tmp/run.yaml" --set 'cluster.env=NO_PROXY=localhost,169.254.169.254' 2>&1); st=$?
"$bin" manifest slurm "$tmp/run.yaml" --set 'cluster.env=NO_PROXY=localhost\,169.254.169.254,A=b' >"$tmp/comma.sbatch" 2>&1; st2=$?
if [ $st -eq 2 ] && grep -qF "a ',' separates the entries" <<<"$out" && grep -qF "'\,'" <<<"$out" &&
   [ $st2 -eq 0 ] && grep -qF "env NO_PROXY=localhost,169.254.169.254 A=b" "$tmp/comma.sbatch"; then
  pass "cluster.env: a ',' in a value written '\,' reaches tandem; unescaped, the error names the ','"
else
  fail "cluster.env with a ','" "exit $st: $out" "exit $st2: $(grep -A1 '  env' "$tmp/comma.sbatch")"
fi
# grace and array-size warnings (F7, F9)
out=$("$bin" manifest slurm "$tmp/run.yaml" --set checkpoint.grace_s=600 --sweep "run.seed=$(seq -s, 1 1002)" 2>&1 >/dev/null); st=$?
out0=$("$bin" manifest slurm "$tmp/run.yaml" --sweep "run.seed=$(seq -s, 1 1001)" 2>&1 >/dev/null)
[ $st -eq 0 ] && grep -q "checkpoint.grace_s = 600 overrides the job's grace of 30 s" <<<"$out" &&
  grep -q "1002 points: a job array of more than 1001 tasks" <<<"$out" && ! grep -q "MaxArraySize" <<<"$out0" &&
  pass "warnings: checkpoint.grace_s above the job's grace, a job array above MaxArraySize's default" ||
  fail "grace / array warnings (exit $st)" "$out" "$out0"

# --- A. the script's logic with a fake srun and scontrol
fake="$tmp/fakebin"
mkdir -p "$fake"
ln -s "$root/tests/slurm/fake/srun" "$fake/srun"
ln -s "$root/tests/slurm/fake/scontrol" "$fake/scontrol"
run_fake() { # run_fake LOG RESTARTS: the script in the background, pid in $fake_pid
  FAKE_SLURM_LOG="$tmp/fake-calls" PATH="$fake:$PATH" SLURM_JOB_ID=4242 \
    SLURM_RESTART_COUNT=$2 TANDEM_TEST_STEP_DELAY_MS=${DELAY_MS:-20} \
    bash "$tmp/cpu.sbatch" >>"$1" 2>&1 &
  fake_pid=$!
  bg+=("$fake_pid")
}
wait_commit() { # wait_commit STORE: until its HEAD exists (up to 60 s)
  for _ in $(seq 1 600); do
    "$bin" hash "$1" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}
: >"$tmp/fake-calls"
run_fake "$tmp/fake.log" 0
if wait_commit "$tmp/store"; then
  kill -USR1 "$fake_pid"
  wait "$fake_pid"; st=$?
  if [ $st -eq 0 ] && grep -q "tandem exited 75" "$tmp/fake.log" &&
     grep -qx "scontrol requeue 4242" "$tmp/fake-calls" && grep -q "got SIGUSR1" "$tmp/fake.log"; then
    pass "USR1 to the batch shell: tandem commits, exits 75, the script requeues the job"
  else
    fail "USR1 path (script exit $st)" "$(tail -n 8 "$tmp/fake.log")" "calls: $(cat "$tmp/fake-calls")"
  fi
else
  fail "USR1 path: no commit" "$(tail -n 8 "$tmp/fake.log")"
fi
# a USR1 while srun is still starting its tasks (FAKE_SRUN_START_S: srun drops it, as the
# real one does before its tasks run): the script sends it again until the step has ended,
# so tandem commits, exits 75 and the job is requeued (before: sent once, dropped, logged
# as passed on; the run went on to the end and nothing was requeued). A resend that
# reaches tandem before its handler exists (a loaded machine starts it slowly) ends it
# instead (138), with nothing yet to lose: requeued all the same
render "$tmp/early.sbatch" --store "file://$tmp/store-early" || fail "render early" "$(cat "$tmp/early.sbatch.err")"
: >"$tmp/fake-calls"
FAKE_SRUN_START_S=2 FAKE_SLURM_LOG="$tmp/fake-calls" PATH="$fake:$PATH" SLURM_JOB_ID=4245 SLURM_RESTART_COUNT=0 \
  TANDEM_TEST_STEP_DELAY_MS=100 bash "$tmp/early.sbatch" >"$tmp/early.log" 2>&1 &
early=$!
bg+=("$early")
for _ in $(seq 1 100); do # until srun (the fake) is starting: a child of the script
  pgrep -P "$early" -f fakebin/srun >/dev/null 2>&1 && break
  sleep 0.05
done
sleep 0.3
kill -USR1 "$early"
wait "$early"; st=$?
if [ $st -eq 0 ] && grep -q "srun: USR1 dropped while starting" "$tmp/fake-calls" &&
   grep -Eq "tandem exited (75|138)" "$tmp/early.log" && grep -qx "scontrol requeue 4245" "$tmp/fake-calls"; then
  FAKE_SLURM_LOG="$tmp/fake-calls" PATH="$fake:$PATH" SLURM_JOB_ID=4245 SLURM_RESTART_COUNT=1 \
    bash "$tmp/early.sbatch" >>"$tmp/early.log" 2>&1; st=$?
  got=$("$bin" hash "$tmp/store-early" 2>&1)
  if [ $st -eq 0 ] && [ "$got" = "$ref" ]; then
    pass "a USR1 while srun still starts its tasks: sent again, reached tandem ($(grep -Eo 'tandem exited (75|138)' "$tmp/early.log" | head -1)), requeued; resumed to the uninterrupted hashes"
  else
    fail "early USR1: the resume (exit $st)" "$got" "want: $ref" "$(tail -n 5 "$tmp/early.log")"
  fi
else
  fail "a USR1 while srun still starts its tasks (script exit $st)" "$(grep -c '^episode' "$tmp/early.log") episodes" \
    "$(grep tandem-sbatch "$tmp/early.log")" "calls: $(cat "$tmp/fake-calls")"
fi
: >"$tmp/fake-calls"
s0=$("$bin" hash "$tmp/store" 2>/dev/null | sed -n 's/^seq //p')
run_fake "$tmp/fake.log" 1
for _ in $(seq 1 600); do # until this start has committed something new
  s=$("$bin" hash "$tmp/store" 2>/dev/null | sed -n 's/^seq //p')
  [ -n "$s" ] && [ -n "$s0" ] && [ "$s" -gt "$s0" ] && break
  sleep 0.1
done
kill -TERM "$fake_pid"
wait "$fake_pid"; st=$?
if [ $st -eq 75 ] && grep -q "Slurm is ending job 4242" "$tmp/fake.log" && [ ! -s "$tmp/fake-calls" ]; then
  pass "TERM to the batch shell: forwarded as USR1, exit 75, no requeue by the script"
else
  fail "TERM path (script exit $st, want 75)" "$(tail -n 8 "$tmp/fake.log")" "calls: $(cat "$tmp/fake-calls")"
fi
run_fake "$tmp/fake.log" 2
wait "$fake_pid"; st=$?
got=$("$bin" hash "$tmp/store" 2>&1)
if [ $st -eq 0 ] && [ "$got" = "$ref" ]; then
  pass "resumed to the end: same final hashes as the uninterrupted run"
else
  fail "fake resume (exit $st)" "$got" "want: $ref" "$(tail -n 5 "$tmp/fake.log")"
fi
grep -qF "$secret" "$tmp/fake.log" && fail "the job log shows the secret"
: >"$tmp/fake-calls"
render "$tmp/diverge.sbatch" --set optim.lr=1e30 --store "file://$tmp/store-div" ||
  fail "render diverging" "$(cat "$tmp/diverge.sbatch.err")"
FAKE_SLURM_LOG="$tmp/fake-calls" PATH="$fake:$PATH" SLURM_JOB_ID=4243 SLURM_RESTART_COUNT=0 \
  bash "$tmp/diverge.sbatch" >"$tmp/fake-div.log" 2>&1; st=$?
if [ $st -eq 5 ] && grep -q "diverged (exit 5): not requeueing" "$tmp/fake-div.log" && [ ! -s "$tmp/fake-calls" ]; then
  pass "a diverging run: the script exits 5, says why, and does not requeue"
else
  fail "diverging run (script exit $st, want 5)" "$(tail -n 8 "$tmp/fake-div.log")" "calls: $(cat "$tmp/fake-calls")"
fi
chmod 644 "$tmp/creds.env"
run_fake "$tmp/fake-mode.log" 0
wait "$fake_pid"; st=$?
chmod 600 "$tmp/creds.env"
if [ $st -eq 2 ] && grep -q "chmod 600" "$tmp/fake-mode.log"; then
  pass "a credentials file others can read: exit 2 before tandem starts"
else
  fail "credentials mode (exit $st, want 2)" "$(cat "$tmp/fake-mode.log")"
fi

# cluster.env names the script uses itself (STORE, got_term, IFS) reach tandem and change
# nothing in the script (exported there, STORE sent tandem to another store and got_term=1
# stopped the requeue); a credentials file written on Windows (CRLF) loads without the CRs
stub="$tmp/tandem-stub"
printf '#!/bin/bash\nprintf "arg %%s\\n" "$@"\nprintf "env %%s=%%q\\n" STORE "$STORE" got_term "$got_term" AWS_ACCESS_KEY_ID "$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY "$AWS_SECRET_ACCESS_KEY" AWS_REGION "$AWS_REGION" AWS_SESSION_TOKEN "${AWS_SESSION_TOKEN-unset}" AWS_PROFILE "${AWS_PROFILE-unset}"\nexit 75\n' >"$stub"
chmod +x "$stub"
printf 'export AWS_ACCESS_KEY_ID=AKIDCRLF\r\nAWS_SECRET_ACCESS_KEY="crlf-secret"\r\nAWS_REGION=eu-west-1 # a comment  \r\n' >"$tmp/creds-crlf.env"
chmod 600 "$tmp/creds-crlf.env"
render "$tmp/envs.sbatch" --set "cluster.tandem_binary=$stub" --set "cluster.credentials_file=$tmp/creds-crlf.env" \
  --set 'cluster.env=STORE=s3://other/x,got_term=1,IFS=x' || fail "render env" "$(cat "$tmp/envs.sbatch.err")"
: >"$tmp/fake-calls"
# the submitting shell's AWS_* (sbatch passes its environment on): with a credentials
# file they are unset first (before: a stale session token and profile reached tandem
# beside the file's keys)
FAKE_SLURM_LOG="$tmp/fake-calls" PATH="$fake:$PATH" SLURM_JOB_ID=4244 SLURM_RESTART_COUNT=0 \
  AWS_SESSION_TOKEN=STALE_SUBMIT_TOKEN AWS_PROFILE=other AWS_ACCESS_KEY_ID=AKIDSTALE \
  bash "$tmp/envs.sbatch" >"$tmp/envs.log" 2>&1; st=$?
if [ $st -eq 0 ] && grep -qx "arg file://$tmp/store" "$tmp/envs.log" && grep -qx "env STORE=s3://other/x" "$tmp/envs.log" &&
   grep -qx "env got_term=1" "$tmp/envs.log" && grep -qx "scontrol requeue 4244" "$tmp/fake-calls" &&
   grep -qx "env AWS_ACCESS_KEY_ID=AKIDCRLF" "$tmp/envs.log" && grep -qx "env AWS_SECRET_ACCESS_KEY=crlf-secret" "$tmp/envs.log" &&
   grep -qx "env AWS_REGION=eu-west-1" "$tmp/envs.log" && grep -qx "env AWS_SESSION_TOKEN=unset" "$tmp/envs.log" &&
   grep -qx "env AWS_PROFILE=unset" "$tmp/envs.log" && ! grep -q "STALE" "$tmp/envs.log" "$tmp/envs.sbatch"; then
  pass "cluster.env STORE/got_term/IFS reach tandem only; a CRLF credentials file loads without CRs, an inline # comment and trailing blanks; the submitting shell's AWS_SESSION_TOKEN/AWS_PROFILE do not reach tandem"
else
  fail "cluster.env names of the script's own, CRLF credentials (script exit $st)" "$(cat "$tmp/envs.log")" "calls: $(cat "$tmp/fake-calls")"
fi

# What a job would only find at its start is refused when rendering, exit 2: --out naming
# the config itself (it was replaced by the script, which then read itself as its config),
# S3 URLs tandem run refuses, a store URL holding a CR (a script saved with Windows line
# ends: the run went to "store\r"), sweep values the config reads as one (1e-3 and 0.001:
# two identical points); a bad byte in the YAML is named with its line, not line 1
cp "$tmp/run.yaml" "$tmp/self.yaml"
ln -sf self.yaml "$tmp/self-link.yaml"
bad=""
"$bin" manifest slurm "$tmp/self.yaml" --out "$tmp/self.yaml" 2>"$tmp/self.err" && bad="$bad --out=config"
"$bin" manifest k8s "$tmp/self-link.yaml" --set cluster.image=reg.io/t:1 --out "$tmp/self.yaml" 2>>"$tmp/self.err" && bad="$bad --out=link"
cmp -s "$tmp/run.yaml" "$tmp/self.yaml" || bad="$bad config-changed"
grep -q "is the config" "$tmp/self.err" || bad="$bad no-reason"
for s3 in s3://My_Bucket/x s3://ab/x s3://bucket/../x; do
  "$bin" manifest slurm "$tmp/run.yaml" --store "$s3" >/dev/null 2>"$tmp/s3.err" && bad="$bad $s3"
done
"$bin" manifest slurm "$tmp/run.yaml" --store "$(printf 'file://./x\r')" >/dev/null 2>"$tmp/cr.err" && bad="$bad CR"
grep -q "control character (0x0d" "$tmp/cr.err" || bad="$bad CR-reason"
"$bin" manifest slurm "$tmp/run.yaml" --sweep optim.lr=1e-3,0.001 >/dev/null 2>"$tmp/sw.err" && bad="$bad sweep"
grep -q "the values 1e-3 and 0.001 are the same value" "$tmp/sw.err" || bad="$bad sweep-reason"
{ cat "$tmp/run.yaml"; printf '# caf\xe9\n'; } >"$tmp/latin1.yaml"
"$bin" manifest slurm "$tmp/latin1.yaml" >/dev/null 2>"$tmp/l1.err" && bad="$bad latin1"
grep -q "latin1.yaml:$(($(wc -l <"$tmp/run.yaml") + 1)): YAML syntax error" "$tmp/l1.err" || bad="$bad latin1-line"
if [ -z "$bad" ]; then
  pass "rendering refuses --out over its config, bad S3 URLs, a CR in a store URL, equal sweep values"
else
  fail "rendering checks:$bad" "$(cat "$tmp/self.err" "$tmp/cr.err" "$tmp/sw.err" "$tmp/l1.err")"
fi

# --- B. a real Slurm controller and node
skip_b=""
case $bin in */asan/*) [ "${TANDEM_SLURM_ASAN:-1}" = 1 ] || skip_b="TANDEM_SLURM_ASAN=0 for the ASan build" ;; esac
[ "$(id -u)" -ne 0 ] && skip_b="not root (slurmd must run as root; CI runs as root)"
if [ -n "$skip_b" ]; then
  echo "SKIP real-Slurm preemption test: $skip_b; not counted"
  echo "  (A: $((passed + failed)) checks ran in $(($(date +%s) - t_start)) s)"
  finish
fi
for b in slurmctld slurmd munged sbatch scontrol scancel squeue; do
  if ! PATH=$PATH:/usr/sbin command -v "$b" >/dev/null; then
    fail "Slurm is installed" "$b missing: scripts/deps.sh test installs slurm-wlm and munge"
    finish
  fi
done
slurm_dir="$tmp/slurm"
if ! PATH=$PATH:/usr/sbin bash "$root/tests/slurm/start.sh" "$slurm_dir" >"$tmp/start.log" 2>&1; then
  fail "start Slurm on loopback" "$(tail -n 30 "$tmp/start.log")"
  finish
fi
pass "Slurm on loopback: munged, slurmctld, slurmd ($(tail -n 1 "$tmp/start.log" | sed 's/.*(//; s/)//'))"
. "$slurm_dir/env"
rm -rf "$tmp/store"
render "$tmp/job.sbatch" || { fail "render job" "$(cat "$tmp/job.sbatch.err")"; finish; }

job_field() { # job_field JOBID FIELD: from scontrol show job
  scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}
wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...: poll every 0.2 s
  local limit=$1 what=$2; shift 2
  local end=$(($(date +%s) + limit))
  until "$@"; do
    if [ "$(date +%s)" -ge $end ]; then
      fail "$what (within $limit s)" "job: $(scontrol show job "$jid" 2>&1 | tr '\n' ' ' | head -c 600)" \
        "log: $(tail -n 12 "$log" 2>/dev/null)"
      return 1
    fi
    sleep 0.2
  done
}
is_state() { [ "$(job_field "$jid" JobState)" = "$1" ]; }
is_running_try() { is_state RUNNING && [ "$(job_field "$jid" Restarts)" = "$1" ]; }
seq_of() { "$bin" hash "$tmp/store" 2>/dev/null | sed -n 's/^seq //p'; }
progressed() { local s; s=$(seq_of); [ -n "$s" ] && [ "$s" -gt "$1" ]; }
start_now() { # a requeued job waits ~2 minutes (its BeginTime); start it now
  wait_for 60 "requeued job $jid pending" is_state PENDING || return 1
  # not within the second of the kill: slurmd revokes the job's credentials by the second
  # and would refuse a launch credential issued in it ("already killed"; the job fails)
  sleep 2
  scontrol update JobId="$jid" StartTime=now
}

jid=$(cd "$tmp" && TANDEM_TEST_STEP_DELAY_MS=100 sbatch --parsable "$tmp/job.sbatch" 2>"$tmp/sbatch.err")
if [ -z "$jid" ]; then fail "sbatch" "$(cat "$tmp/sbatch.err")"; finish; fi
jid=${jid%%;*}
log="$tmp/$(sed -n 's/^#SBATCH --job-name=//p' "$tmp/job.sbatch")-$jid.out"
ok=1
wait_for 60 "job $jid runs" is_running_try 0 && wait_for 60 "first commit" progressed -1 || ok=0
if [ $ok = 1 ]; then
  s1=$(seq_of)
  scontrol requeue "$jid" # 1st preemption: Slurm's own requeue (TERM to the job)
  # the second preemption must find tandem inside its loop: wait for a commit of this start
  start_now && wait_for 60 "job runs again (Restarts=1)" is_running_try 1 &&
    wait_for 60 "the resumed run" grep -q "resuming run-" "$log" && s1r=$(seq_of) &&
    wait_for 60 "progress after the first requeue" progressed "$s1r" || ok=0
fi
if [ $ok = 1 ]; then
  s2=$(seq_of)
  scancel --signal=USR1 --batch "$jid" # 2nd preemption: USR1 to the batch shell
  start_now && wait_for 60 "job runs again (Restarts=2)" is_running_try 2 || ok=0
fi
if [ $ok = 1 ] && wait_for 180 "job $jid completes" is_state COMPLETED; then
  got=$("$bin" hash "$tmp/store" 2>&1)
  exitcode=$(job_field "$jid" ExitCode)
  problems=()
  [ "$got" = "$ref" ] || problems+=("final hashes differ:" "$got" "want:" "$ref")
  [ "$exitcode" = "0:0" ] || problems+=("ExitCode $exitcode")
  grep -q "SLURM_RESTART_COUNT=2" "$log" || problems+=("the log never shows SLURM_RESTART_COUNT=2")
  [ "$(grep -c "tandem exited 75" "$log")" -eq 2 ] || problems+=("want 2 'tandem exited 75' in the log")
  grep -q "got SIGTERM" "$log" && grep -q "Slurm is ending job $jid" "$log" ||
    problems+=("scontrol requeue did not reach the script as TERM")
  grep -q "got SIGUSR1" "$log" && grep -q "requeued job $jid" "$log" ||
    problems+=("the USR1 did not make the script requeue the job")
  grep -q "resuming run-.* at episode [1-9]" "$log" || problems+=("no resume mid-run in the log")
  grep -q "tandem exited 0" "$log" || problems+=("no final 'tandem exited 0'")
  grep -qF "$secret" "$log" && problems+=("the job log shows the secret")
  if [ ${#problems[@]} -eq 0 ]; then
    pass "real Slurm: scontrol requeue at seq $s1 and USR1 at seq $s2, resumed twice (SLURM_RESTART_COUNT=2), final hashes equal the uninterrupted run's"
  else
    fail "real Slurm preemptions" "${problems[@]}" "log:" "$(tail -n 30 "$log")"
  fi
fi

# --- C. a 2-task job: two ranks on the node, launched by srun --mpi=pmix (data parallel)
if ! ldd "$bin" 2>/dev/null | grep -q 'libmpi\.so'; then
  echo "SKIP 2-task Slurm job: this build has no MPI (the rel build has it); not counted"
elif ! command -v mpirun >/dev/null; then
  fail "2-task Slurm job" "mpirun missing: scripts/deps.sh test installs openmpi-bin"
else
  mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
  if ! "${mpi[@]}" "$bin" run "$tmp/run.yaml" --store "$tmp/ref2" --quiet >"$tmp/ref2.log" 2>&1 ||
     ! ref2=$("$bin" hash "$tmp/ref2"); then
    fail "2-rank reference run (mpirun -np 2)" "$(tail -n 5 "$tmp/ref2.log")"
  else
    "$bin" manifest slurm "$tmp/run.yaml" --store "file://$tmp/store2" --set "cluster.workdir=$tmp" \
      --set cluster.tasks_per_node=2 --set cluster.job_name=tandem-two --out "$tmp/two.sbatch" 2>"$tmp/two.err"
    grep -qx -- '#SBATCH --ntasks-per-node=2' "$tmp/two.sbatch" && grep -q -- '--ntasks=2 --ntasks-per-node=2 --mpi=pmix' "$tmp/two.sbatch" \
      || fail "2-task script" "$(grep -n 'ntasks\|^srun' "$tmp/two.sbatch")"
    jid=$(cd "$tmp" && sbatch --parsable "$tmp/two.sbatch" 2>"$tmp/sbatch.err")
    jid=${jid%%;*}
    log="$tmp/tandem-two-$jid.out"
    if [ -z "$jid" ]; then fail "sbatch (2 tasks)" "$(cat "$tmp/sbatch.err")"
    elif wait_for 180 "2-task job $jid completes" is_state COMPLETED; then
      got=$("$bin" hash "$tmp/store2" 2>&1)
      if [ "$got" = "$ref2" ] && grep -q "2 ranks (slurm, mpi transport)" "$log"; then
        pass "real Slurm, 2 tasks (srun --mpi=pmix): both ranks trained one run; final hashes equal the 2-rank mpirun run's"
      else
        fail "2-task Slurm job" "hash: $got" "want: $ref2" "log:" "$(tail -n 20 "$log")"
      fi
    fi
  fi
fi
# --- D. a run that diverges: the job fails with exit 5, and nobody requeues it
render "$tmp/div.sbatch" --set optim.lr=1e30 --store "file://$tmp/store-div2" --set cluster.job_name=tandem-div ||
  fail "render diverging job" "$(cat "$tmp/div.sbatch.err")"
jid=$(cd "$tmp" && sbatch --parsable "$tmp/div.sbatch" 2>"$tmp/sbatch.err")
jid=${jid%%;*}
log="$tmp/tandem-div-$jid.out"
if [ -z "$jid" ]; then fail "sbatch (diverging)" "$(cat "$tmp/sbatch.err")"
elif wait_for 120 "diverging job $jid ends" is_state FAILED; then
  sleep 3 # a requeue, were there one, would show by now
  exitcode=$(job_field "$jid" ExitCode) restarts=$(job_field "$jid" Restarts) state=$(job_field "$jid" JobState)
  if [ "$exitcode" = "5:0" ] && [ "$restarts" = 0 ] && [ "$state" = FAILED ] &&
     grep -q "diverged (exit 5): not requeueing" "$log" && grep -q "lower optim.lr" "$log"; then
    pass "real Slurm: a diverging run fails its job with ExitCode 5:0, not requeued (Restarts=0)"
  else
    fail "diverging job" "state $state, ExitCode $exitcode, Restarts $restarts" "log:" "$(tail -n 10 "$log")"
  fi
fi
# --- E. a sweep: a job array of two points; one task requeued by a USR1 resumes its point
if ! "$bin" run "$tmp/run.yaml" --store "$tmp/ref-seed4" --set run.seed=4 --quiet >"$tmp/ref4.log" 2>&1 ||
   ! ref4=$("$bin" hash "$tmp/ref-seed4"); then
  fail "seed-4 reference run" "$(tail -n 5 "$tmp/ref4.log")"
else
  render "$tmp/sweep.sbatch" --store "file://$tmp/study" --set cluster.job_name=tandem-sweep \
    --sweep run.seed=3,4 || fail "render sweep" "$(cat "$tmp/sweep.sbatch.err")"
  grep -qx -- '#SBATCH --array=0-1' "$tmp/sweep.sbatch" || fail "sweep script" "no --array=0-1"
  arr=$(cd "$tmp" && TANDEM_TEST_STEP_DELAY_MS=100 sbatch --parsable "$tmp/sweep.sbatch" 2>"$tmp/sbatch.err")
  arr=${arr%%;*}
  t0_store="$tmp/study/run.seed=3"
  seq0() { "$bin" hash "$t0_store" 2>/dev/null | sed -n 's/^seq //p'; }
  progressed0() { local s; s=$(seq0); [ -n "$s" ] && [ "$s" -gt "$1" ]; }
  if [ -z "$arr" ]; then fail "sbatch (sweep)" "$(cat "$tmp/sbatch.err")"
  else
    jid="${arr}_0"
    log="$tmp/tandem-sweep-${arr}_0.out"
    ok=1
    wait_for 60 "array task 0 runs" is_running_try 0 && wait_for 60 "task 0 commits" progressed0 -1 || ok=0
    if [ $ok = 1 ]; then
      scancel --signal=USR1 --batch "$jid" # the task's script requeues the task itself
      start_now && wait_for 60 "task 0 runs again (Restarts=1)" is_running_try 1 || ok=0
    fi
    done_all() { [ "$(job_field "${arr}_0" JobState)" = COMPLETED ] && [ "$(job_field "${arr}_1" JobState)" = COMPLETED ]; }
    if [ $ok = 1 ] && wait_for 180 "both points complete" done_all; then
      got3=$("$bin" hash "$tmp/study/run.seed=3" 2>&1)
      got4=$("$bin" hash "$tmp/study/run.seed=4" 2>&1)
      problems=()
      [ "$got3" = "$ref" ] || problems+=("point 0 (seed 3) ended elsewhere:" "$got3" "want:" "$ref")
      [ "$got4" = "$ref4" ] || problems+=("point 1 (seed 4) ended elsewhere:" "$got4" "want:" "$ref4")
      grep -q "requeued job" "$log" && grep -q "sweep point 0 of 2" "$log" && grep -q "resuming run-" "$log" ||
        problems+=("task 0's log lacks the requeue, its point or the resume")
      [ "$(job_field "${arr}_1" Restarts)" = 0 ] || problems+=("task 1 was requeued too")
      if [ ${#problems[@]} -eq 0 ]; then
        pass "real Slurm: a 2-point job array; task 0 requeued by USR1 resumed its own point; both end on their direct runs' hashes"
      else
        fail "sweep job array" "${problems[@]}" "log:" "$(tail -n 20 "$log")"
      fi
    fi
  fi
fi
# --- F. a USR1 to the batch shell while srun is still starting its tasks. srun drops a
# signal that comes before its tasks run (a prolog, PMIx, several nodes: on this one node
# the window is ~0.1-0.5 s); the job's srun here is the real one behind a wrapper that
# first spends 4 s "starting" (swallowing USR1 the way srun does) so that the USR1 lands in
# that window for sure. The script must send it again until tandem has it: commit, exit
# 75, requeue, and the run ends on the uninterrupted run's hashes (before: sent once,
# dropped, the run went on to the end with no commit and no requeue).
real_srun=$(command -v srun)
mkdir -p "$tmp/slowsrun"
{
  echo '#!/bin/bash'
  echo "trap 'echo \"srun: USR1 dropped while starting\" >>\"$tmp/early-dropped\"' USR1"
  echo 'end=$((SECONDS + 4))'
  echo 'while [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done'
  echo 'trap - USR1'
  echo "exec \"$real_srun\" \"\$@\""
} >"$tmp/slowsrun/srun"
chmod 755 "$tmp/slowsrun/srun"
rm -f "$tmp/early-dropped"
render "$tmp/early.sbatch" --store "file://$tmp/store-early2" --set cluster.job_name=tandem-early ||
  fail "render early" "$(cat "$tmp/early.sbatch.err")"
jid=$(cd "$tmp" && PATH="$tmp/slowsrun:$PATH" TANDEM_TEST_STEP_DELAY_MS=100 sbatch --parsable "$tmp/early.sbatch" 2>"$tmp/sbatch.err")
jid=${jid%%;*}
log="$tmp/tandem-early-$jid.out"
running() { grep -q "tandem-sbatch: running:" "$log" 2>/dev/null; }
if [ -z "$jid" ]; then fail "sbatch (early USR1)" "$(cat "$tmp/sbatch.err")"
elif wait_for 60 "job $jid starts its step" running; then
  scancel --signal=USR1 --batch "$jid" # right after the job started: srun is still starting
  ok=1
  wait_for 60 "the early USR1's requeue" grep -q "requeued job $jid" "$log" || ok=0
  [ $ok = 1 ] && { start_now && wait_for 60 "job runs again (Restarts=1)" is_running_try 1 || ok=0; }
  if [ $ok = 1 ] && wait_for 180 "job $jid completes" is_state COMPLETED; then
    got=$("$bin" hash "$tmp/store-early2" 2>&1)
    problems=()
    [ -s "$tmp/early-dropped" ] || problems+=("the USR1 missed srun's start-up (the test did not hit the window)")
    [ "$got" = "$ref" ] || problems+=("final hashes differ:" "$got" "want:" "$ref")
    grep -q "got SIGUSR1" "$log" || problems+=("no 'got SIGUSR1' in the log")
    # tandem got it: committed and exited 75 (then resumed), or, where a resend reached it
    # before its handler existed (the ASan build starts slowly), died of it with nothing
    # yet to lose (138) and started again from its seed; either way the job was requeued
    n75=$(grep -c "tandem exited 75" "$log") n138=$(grep -c "tandem exited 138" "$log")
    if [ "$n75" -eq 1 ]; then grep -q "resuming run-" "$log" || problems+=("no resume in the log")
    elif [ "$n138" -ne 1 ]; then problems+=("want one 'tandem exited 75' (or 138: killed before its handler) in the log"); fi
    if [ ${#problems[@]} -eq 0 ]; then
      pass "real Slurm: a USR1 while srun still started its tasks: sent again, reached tandem (exit $([ "$n75" -eq 1 ] && echo 75 || echo '138, before its handler')), requeued; resumed to the uninterrupted hashes"
    else
      fail "real Slurm: early USR1" "${problems[@]}" "log:" "$(grep -v '^episode' "$log" | tail -n 20)"
    fi
  fi
fi
echo "  (took $(($(date +%s) - t_start)) s)"
finish
