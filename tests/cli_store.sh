#!/usr/bin/env bash
# cli_store.sh — store hygiene through the binary: what reads never creates, what is
# written is private, and extreme config values end with a clear error.
#
#   TANDEM_BIN=build/rel/tandem bash tests/cli_store.sh
#
#   - verify, status, hash, alpha, mixture, eval, gc and pin on a path that does not
#     exist, on an empty directory and on a file:// URL of a missing path: exit 3 with
#     "no store at URL", and nothing is created (not the path, not a .lock); the same
#     for data.mixture_file naming a missing store (exit 3, naming the key); `tandem
#     run` still creates its store, parents included;
#   - permissions follow the umask: under umask 077, 027 and 000 a run's store holds files
#     0600, 0640, 0666 and directories 0700, 0750, 0777 (the parents it created and .lock
#     included), and a record written after a chmod of the store is not made private again;
#   - nothing outside the store is written or changed: a .lock that is a symbolic link, or
#     a store directory (states/) that is one, is refused (exit 3, named) and the link's
#     target keeps its bytes and its mode;
#   - extreme finite values (optim.lr=1e30, tandem.lr_probe=1e30, tandem.lr_alpha=1e300
#     with the pgd step, tandem.gamma=1e300, optim.weight_decay=1e300, model and batch
#     sizes at their limits) exit 1 or 2 with a message naming the key responsible, and
#     no sanitizer report (the asan build runs this script too); a probe after the decay
#     (optim.lr x optim.weight_decay >= 1) blew u up names optim.weight_decay, not
#     tandem.lr_probe, and the domain by its name;
#   - a run that diverges (exit 5) gives its lease back: status says released;
#   - and it leaves diverged.mp: status (text, --json), mixture (exit 0, as an unfinished
#     run: stderr, the YAML comment, --json) and alpha say where it diverged and the
#     message naming the key; verify notes it, gc and repair keep it, a damaged one is
#     verify's fault and repair's to set aside; the key lowered with --allow-change, the
#     resume removes it and the run reads finished; a record that cannot be written is
#     said and the run still exits 5 with its message;
#   - a config, a shard or a tokenizer that is a FIFO is refused at once (exit 2, "not a regular file"),
#     never blocking the start; a stop signal during start-up is a requeue (exit 75) even
#     when start-up then fails (a config error shows at the next start);
#   - a host name holding a quote, a backslash, a comma and a control character (a UTS
#     namespace; root only) leaves `alpha --format json` valid, holding it exactly;
#   - a lease's host holding escapes, a BEL and a newline is shown with '?' for them by
#     status (its reason too) and by run's takeover notice; an undecodable lease is
#     status's DAMAGED (--json "damaged"), not "none"; a settle_until of 1e300 is said
#     by run as the 7260 s (CKPT_SETTLE_MAX_S) it keeps states for;
#   - a store URL holding user info in any spelling (s3:/K:S@b, s3//K:S@b, K:S@b) is
#     refused by status, run and manifest (exit 2) without the secret (runs/12:00/lr@3 is
#     a path), and
#     s3//bucket/run is the typo of s3:// it is (no local ./s3 store);
#   - the last metrics row deleted, or a FIFO or a directory in its place, is noted by
#     verify and metrics as a missing row (HEAD's state says how many there are); an
#     oversized RUN's advice is a copy, not "a run goes on without it";
#   - a commit written in the background that fails (TANDEM_TEST_FAIL_AT=state-put:1)
#     stops the run at the next step with exit 3 naming the state, not at the next
#     commit; the store then resumes to the tandem hash of a run that never failed;
#   - a live run's lease judged from another PID namespace on the same host name
#     (unshare; root only) is held, not "the holder is gone", and gc there refuses (exit
#     2), both ways round; a holder killed is stale judged from its own namespace;
#   - a dataset moved under a run: the resume's refusal (exit 2) names the --set and
#     --allow-change that go on, and going on ends on the same model (its test losses);
#     a store restored read-only (file modes, or a read-only bind mount as root) exits 3
#     naming .lock and why;
#   - an S3 endpoint whose listings never end (the token handed back, or empty pages with
#     new tokens forever) is an error (exit 3) in status and verify, not a hang.
# Prints PASS/FAIL lines and "cli_store: N passed, M failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/.." || exit 1
SUITE=cli_store
. tests/lib_cli.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tandem-store-XXXXXX")
trap 'chmod -R u+rwx "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
[ -x "$bin" ] || { fail setup "no tandem binary at $bin"; finish; }

"$bin" gen-corpus --out "$tmp/corpus" --train-tokens 20k --val-tokens 3k --test-tokens 3k \
  >/dev/null 2>&1 || { fail setup "gen-corpus"; finish; }
cat >"$tmp/c.yaml" <<EOF
run: {episodes: 3, seed: 7, threads: 1}
data: {dataset: $tmp/corpus/dataset.yaml}
model: {layers: 1, channels: 32, heads: 2, ctx: 32}
train: {batch: 6, seq: 32}
tandem: {K: 2, E: 2}
optim: {lr: 3e-3}
checkpoint: {every_episodes: 1, chunk_kib: 16}
EOF

# ---------------------------------------------------------------- reads create nothing
mkdir -p "$tmp/empty"
for target in "$tmp/no/such/store" "file://$tmp/no/such/store" "$tmp/empty"; do
  for cmd in verify status hash alpha mixture eval "gc --keep 1" "gc --keep 1 --dry-run" "pin 4"; do
    set -- $cmd
    name=$1; shift
    out=$("$bin" "$name" "$target" "$@" 2>&1); rc=$?
    label="$name ${*:+$* }on ${target#"$tmp"/}"
    if [ $rc -eq 3 ] && grep -q "no store at $target" <<<"$out"; then pass "$label: exit 3, no store"
    else fail "$label: exit 3, no store" "exit $rc: $out"; fi
  done
done
if [ ! -e "$tmp/no" ] && [ -z "$(ls -A "$tmp/empty")" ]; then pass "the reads created no path and no file"
else fail "the reads created no path and no file" "$(find "$tmp/no" "$tmp/empty" 2>&1)"; fi

# gc's --keep is required: its usage line says so (it showed "[--keep N]", optional)
out=$("$bin" gc "$tmp/empty" 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -q "^usage: tandem gc STORE --keep N \[--dry-run\]" <<<"$out" && ! grep -q "\[--keep" <<<"$out"
then pass "gc without --keep: exit 2, the usage line shows --keep N as required"
else fail "gc without --keep: exit 2, the usage line shows --keep N as required" "exit $rc: $out"; fi

out=$("$bin" run "$tmp/c.yaml" --store "$tmp/fixed" --quiet --set run.mode=fixed \
      --set data.mixture=file --set "data.mixture_file=file://$tmp/no/mix" 2>&1); rc=$?
if [ $rc -eq 3 ] && grep -q "data.mixture_file" <<<"$out" && grep -q "no store at" <<<"$out" \
   && [ ! -e "$tmp/no" ]; then pass "a mixture_file naming a missing store: exit 3, named, nothing created"
else fail "a mixture_file naming a missing store: exit 3, named, nothing created" "exit $rc: $out"; fi

# ---------------------------------------------------------------- a dataset or a store that moved
# (a hunt moving stores) a resume whose dataset is gone from its path says the way on, and
# following it ends on the same state; a store restored read-only names .lock and the cause
cp -r "$tmp/corpus" "$tmp/movingcorpus"
sed "s|$tmp/corpus|$tmp/movingcorpus|" "$tmp/c.yaml" >"$tmp/cm.yaml"
"$bin" run "$tmp/c.yaml" --store "$tmp/movref" --quiet >/dev/null 2>&1
TANDEM_TEST_SIGNAL_AT=free:3 "$bin" run "$tmp/cm.yaml" --store "$tmp/mov" --quiet >/dev/null 2>&1; st1=$?
mv "$tmp/movingcorpus" "$tmp/movedcorpus"
out=$("$bin" run "$tmp/cm.yaml" --store "$tmp/mov" --quiet 2>&1); rc=$?
out2=$("$bin" run "$tmp/cm.yaml" --store "$tmp/mov" --quiet --set "data.dataset=$tmp/movedcorpus/dataset.yaml" \
       --allow-change data.dataset 2>&1); rc2=$?
# the same model (its test losses, every digit; the manifests differ by the change's generation)
losses() { "$bin" eval "$1" --json 2>/dev/null | grep -o '"loss":[^,}]*'; }
if [ $st1 = 75 ] && [ $rc = 2 ] && grep -q -- "--allow-change data.dataset" <<<"$out" && [ $rc2 = 0 ] &&
   [ -n "$(losses "$tmp/mov")" ] && [ "$(losses "$tmp/mov")" = "$(losses "$tmp/movref")" ]; then
  pass "a dataset moved under a run: the way on is said (exit 2), and it ends on the same state"
else fail "a dataset moved under a run" "first exit $st1; resume exit $rc: $out" "with the new path: exit $rc2: $out2"; fi
cp -r "$tmp/mov" "$tmp/rostore"; rm -f "$tmp/rostore/.lock"
ro_run=("$bin" run "$tmp/cm.yaml" --store "$tmp/rostore" --quiet --set "data.dataset=$tmp/movedcorpus/dataset.yaml")
ro=
if [ "$(id -u)" != 0 ]; then # file modes
  chmod -R a-w "$tmp/rostore"; out=$("${ro_run[@]}" 2>&1); rc=$?; chmod -R u+w "$tmp/rostore"; ro=modes
elif unshare --mount /bin/bash -c 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1"' _ "$tmp/rostore" \
     2>/dev/null; then # root ignores modes: a read-only bind mount (where mounting is allowed)
  out=$(unshare --mount /bin/bash -c 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && "$@"' \
        _ "$tmp/rostore" "${ro_run[@]}" 2>&1); rc=$?; ro="a read-only mount"
fi
if [ -z "$ro" ]; then echo "SKIP a store restored read-only: neither a non-root user nor unshare here; not counted"
elif [ $rc = 3 ] && grep -q "/.lock for writing" <<<"$out" && grep -q "not writable here" <<<"$out"; then
  pass "a store restored read-only ($ro): exit 3 naming .lock and the cause"
else fail "a store restored read-only ($ro)" "exit $rc: $out"; fi

# ---------------------------------------------------------------- start-up: FIFOs and signals
mkfifo "$tmp/fifo.yaml"
out=$(timeout 20 "$bin" run "$tmp/fifo.yaml" --store "$tmp/ff" --quiet 2>&1); rc=$?
if [ $rc = 2 ] && grep -q "not a regular file" <<<"$out"; then pass "a config that is a FIFO: exit 2 at once"
else fail "a FIFO config" "exit $rc: $out"; fi
cp -r "$tmp/corpus" "$tmp/fifocorpus"
shard=$(ls "$tmp"/fifocorpus/*/train_000.bin | head -1)
rm "$shard"; mkfifo "$shard"
sed "s|$tmp/corpus|$tmp/fifocorpus|" "$tmp/c.yaml" >"$tmp/cf.yaml"
out=$(timeout 20 "$bin" run "$tmp/cf.yaml" --store "$tmp/ff" --quiet 2>&1); rc=$?
if [ $rc = 2 ] && grep -q "not a regular file" <<<"$out"; then pass "a shard that is a FIFO: exit 2 at once, named"
else fail "a FIFO shard" "exit $rc: $out"; fi
echo "some text" >"$tmp/t.txt"
out=$(timeout -k 5 20 "$bin" tokenize "$tmp/t.txt" --tokenizer "$tmp/fifo.yaml" 2>&1); rc=$?
if [ $rc = 2 ] && grep -q "tokenizer .*fifo.yaml: not a regular file" <<<"$out"; then pass "a tokenizer that is a FIFO: exit 2 at once, named"
else fail "a FIFO tokenizer" "exit $rc: $out"; fi
out=$(TANDEM_TEST_SIGNAL_AT=setup:1 "$bin" run "$tmp/c.yaml" --store "$tmp/sig" --set 'data.max_epochs=*=0.001' 2>&1); rc=$?
out2=$("$bin" run "$tmp/c.yaml" --store "$tmp/sig" --set 'data.max_epochs=*=0.001' --quiet 2>&1); rc2=$?
if [ $rc = 75 ] && grep -q "stopped by a signal during start-up" <<<"$out" && [ $rc2 = 2 ]; then
  pass "SIGTERM during a start-up that fails: exit 75 (requeue), the config error at the next start (exit 2)"
else fail "a signal during start-up" "exit $rc: $out" "then exit $rc2: $out2"; fi

# ---------------------------------------------------------------- permissions follow the umask
for mm in 077:0600:0700 027:0640:0750 000:0666:0777; do
  IFS=: read -r mask fmode dmode <<<"$mm"
  store="$tmp/perm$mask/a/b/store"
  out=$( (umask $mask; "$bin" run "$tmp/c.yaml" --store "$store" --quiet) 2>&1); rc=$?
  if [ $rc -ne 0 ]; then fail "umask $mask: run" "exit $rc: $out"; continue; fi
  # a write by another command too (pins/ is a new directory)
  (umask $mask; "$bin" pin "$store" 4 >/dev/null 2>&1)
  bad=$(find "$tmp/perm$mask" \( -type f ! -perm "$fmode" \) -o \( -type d ! -perm "$dmode" \) \
        -printf '%m %p\n')
  nfiles=$(find "$store" -type f | wc -l)
  if [ -z "$bad" ] && [ -f "$store/.lock" ] && [ -f "$store/pins/4" ] && [ "$nfiles" -gt 10 ]; then
    pass "umask $mask: $nfiles files $fmode (.lock too), every directory $dmode"
  else
    fail "umask $mask: files $fmode, directories $dmode" "${bad:-no .lock, pin or too few files ($nfiles)}"
  fi
done
# a team's store: made under 077, opened to the group, extended under 007: the new
# records are group-readable (not private again)
store="$tmp/team"
(umask 077; "$bin" run "$tmp/c.yaml" --store "$store" --quiet >/dev/null 2>&1)
chmod -R g+rwX "$store"
(umask 007; "$bin" run "$tmp/c.yaml" --store "$store" --set run.episodes=4 --allow-change run.episodes \
   --quiet >/dev/null 2>&1); rc=$?
m=$(stat -c %a "$store/alpha/3.mp" 2>/dev/null)
if [ $rc = 0 ] && [ "$m" = 660 ]; then pass "a store shared after a chmod: a new record is 660 under umask 007"
else fail "a shared store's new record" "exit $rc, alpha/3.mp mode ${m:-missing}"; fi

# ---------------------------------------------------------------- nothing outside the store
echo "keep me" >"$tmp/outside"; chmod 644 "$tmp/outside"
store="$tmp/lnk"
"$bin" run "$tmp/c.yaml" --store "$store" --quiet --set run.episodes=2 >/dev/null 2>&1
rm -f "$store/.lock"; ln -s "$tmp/outside" "$store/.lock"
out=$("$bin" run "$tmp/c.yaml" --store "$store" --set run.episodes=3 --allow-change run.episodes --quiet 2>&1); rc=$?
if [ $rc = 3 ] && grep -q ".lock is a symbolic link" <<<"$out" && [ "$(cat "$tmp/outside")" = "keep me" ] \
   && [ "$(stat -c %a "$tmp/outside")" = 644 ]; then
  pass "a .lock that is a symbolic link: exit 3, named; its target untouched (644, same bytes)"
else fail "a .lock symlink" "exit $rc: $out" "target: $(stat -c '%a %s' "$tmp/outside")"; fi
rm -f "$store/.lock"
mkdir -p "$tmp/elsewhere"; mv "$store/states" "$tmp/elsewhere/states"; ln -s "$tmp/elsewhere/states" "$store/states"
before=$(ls "$tmp/elsewhere/states" | sort | tr '\n' ' ')
out=$("$bin" run "$tmp/c.yaml" --store "$store" --set run.episodes=3 --allow-change run.episodes --quiet 2>&1); rc=$?
after=$(ls "$tmp/elsewhere/states" | sort | tr '\n' ' ')
if [ $rc = 3 ] && grep -q "is a symbolic link, not a directory of the store" <<<"$out" && [ "$before" = "$after" ]; then
  pass "states/ a symbolic link out of the store: exit 3, named; nothing written there"
else fail "states/ symlink" "exit $rc: $out" "before: $before" "after: $after"; fi

# ---------------------------------------------------------------- a domain named Average
# the mean row of eval, results and compare is "Average": a new run on a domain of that
# name is refused (exit 2, naming it and why), with no RUN written; `eval` still reads
sed 's/name: "d1"/name: "Average"/' "$tmp/corpus/dataset.yaml" >"$tmp/corpus/avg.yaml"
sed "s|dataset: .*|dataset: $tmp/corpus/avg.yaml}|" "$tmp/c.yaml" >"$tmp/avg.yaml"
out=$("$bin" run "$tmp/avg.yaml" --store "$tmp/avg" --quiet 2>&1); rc=$?
if grep -q "Average" "$tmp/corpus/avg.yaml" && [ $rc = 2 ] && grep -q "'Average' is reserved" <<<"$out" &&
   [ ! -e "$tmp/avg/RUN" ]; then pass "a new run on a domain named Average: exit 2 naming why, no RUN"
else fail "a new run on a domain named Average" "exit $rc" "$out" "$(head -c 400 "$tmp/corpus/avg.yaml")"; fi

# ---------------------------------------------------------------- names of the longest length
# two domains of 64 characters (the longest a dataset allows) that differ in the last one:
# the records hold them whole (before: cut to 63 in RUN, data.mp and mixture.mp, so RUN
# named a domain twice and the finished run could be neither resumed nor read)
p63=$(printf 'p%.0s' $(seq 1 63))
sed -e "s/name: \"d0\"/name: \"${p63}a\"/" -e "s/name: \"d1\"/name: \"${p63}b\"/" "$tmp/corpus/dataset.yaml" >"$tmp/corpus/long.yaml"
sed "s|dataset: .*|dataset: $tmp/corpus/long.yaml}|" "$tmp/c.yaml" >"$tmp/long.yaml"
"$bin" run "$tmp/long.yaml" --store "$tmp/long" --quiet >/dev/null 2>&1; rc1=$?
out=$("$bin" run "$tmp/long.yaml" --store "$tmp/long" --quiet 2>&1); rc2=$?
mix=$("$bin" mixture "$tmp/long" 2>&1); rc3=$?
"$bin" verify "$tmp/long" >/dev/null 2>&1; rc4=$?
if grep -q "${p63}b" "$tmp/corpus/long.yaml" && [ "$rc1$rc2$rc3$rc4" = 0000 ] && grep -q "\"${p63}a\": " <<<"$mix" &&
   grep -q "\"${p63}b\": " <<<"$mix"; then pass "64-character domain names: the run resumes, mixture and verify read them whole"
else fail "64-character domain names" "run $rc1, again $rc2, mixture $rc3, verify $rc4" "$out" "$mix"; fi

# ---------------------------------------------------------------- the config's path spelled another way
# a relative data.dataset is pinned joined to the config's directory as given: a resume
# naming the same config as ./c.yaml or by its absolute path (as a rendered Slurm job
# does) is the same run (before: exit 2, "data.dataset: rel/corpus/... -> ./rel/corpus/...")
mkdir -p "$tmp/rel" && cp -r "$tmp/corpus" "$tmp/rel/corpus"
sed "s|dataset: .*|dataset: corpus/dataset.yaml}|" "$tmp/c.yaml" >"$tmp/rel/c.yaml"
got=
for spelling in c.yaml ./c.yaml "$tmp/rel/c.yaml" "$tmp/rel/../rel/c.yaml"; do
  (cd "$tmp/rel" && "$bin" run "$spelling" --store "$tmp/rel/s" --quiet >/dev/null 2>&1); got="$got $?"
done
out=$(cd "$tmp" && "$bin" run rel/c.yaml --store rel/s --quiet 2>&1); rc=$?
if [ "$got" = " 0 0 0 0" ] && [ $rc = 2 ] && grep -q "relative to the directory it was started in" <<<"$out"; then
  pass "a resume naming the config ./c.yaml or by absolute path is the same run; from another directory the pin is explained"
else fail "the config's path spelled another way" "exits$got, from elsewhere $rc" "$out"; fi

# ---------------------------------------------------------------- another seed on a run
# refused, also with --allow-change: everything the run computed derives from its seed
# (the change was recorded, then the load refused the states, and even the original
# command was refused after it: the finished run stranded)
"$bin" run "$tmp/c.yaml" --store "$tmp/seedrun" --quiet >/dev/null 2>&1
out=$("$bin" run "$tmp/c.yaml" --store "$tmp/seedrun" --quiet --set run.seed=8 --allow-change run.seed 2>&1); rc=$?
"$bin" run "$tmp/c.yaml" --store "$tmp/seedrun" --quiet >/dev/null 2>&1; rc2=$?
if [ $rc = 2 ] && grep -q "cannot change its seed" <<<"$out" && [ $rc2 = 0 ] && [ ! -e "$tmp/seedrun/configs/0.mp" ] &&
   "$bin" verify "$tmp/seedrun" >/dev/null 2>&1; then
  pass "--allow-change run.seed: refused (exit 2), nothing recorded, the run resumes as before"
else fail "--allow-change run.seed" "exit $rc, then $rc2" "$out" "$(ls "$tmp/seedrun/configs" 2>&1)"; fi

# ---------------------------------------------------------------- the mixture of an unfinished run
# printed (useful while it runs), but said on stderr and in the comment not to be alpha*
TANDEM_TEST_KILL_AT=alpha:2 "$bin" run "$tmp/c.yaml" --store "$tmp/unfin" --quiet >/dev/null 2>&1
out=$("$bin" mixture "$tmp/unfin" 2>"$tmp/unfin.err"); rc=$?
if [ $rc = 0 ] && grep -q "is not finished (1 of 3 episodes)" "$tmp/unfin.err" && grep -q "unfinished: the run has 3" <<<"$out"; then
  pass "mixture of an unfinished run: printed, said not to be alpha*"
else fail "mixture of an unfinished run" "exit $rc" "$out" "$(cat "$tmp/unfin.err")"; fi
"$bin" run "$tmp/c.yaml" --store "$tmp/unfin" --quiet >/dev/null 2>&1
out=$("$bin" mixture "$tmp/unfin" 2>&1)
if ! grep -q "not finished\|unfinished" <<<"$out"; then pass "mixture of the finished run: no such word"
else fail "mixture of the finished run" "$out"; fi

# ---------------------------------------------------------------- what a fixed run has at risk
# no α records tell how far it went past its last state: its metrics rows do (it said 0).
# The state of position 12 is written in the background while episode 7 trains; a slowed
# store (200 ms a chunk) keeps it unfinished at the kill, which a fast writer under a
# loaded CI machine once beat (then nothing was at risk and this failed).
TANDEM_TEST_BLOB_DELAY_MS=200 TANDEM_TEST_KILL_AT=metrics:7 "$bin" run "$tmp/c.yaml" --store "$tmp/fixrisk" --quiet --set run.mode=fixed \
  --set run.episodes=8 --set checkpoint.every_episodes=2 >/dev/null 2>&1
out=$("$bin" status "$tmp/fixrisk" 2>&1)
js=$("$bin" status "$tmp/fixrisk" --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["at_risk_steps"])')
if grep -qE "^at risk +[1-9][0-9]* steps since the last full state \(metrics rows reach run position 12\)" <<<"$out" &&
   [ "${js:-0}" -gt 0 ]; then pass "status of a killed fixed run: the steps past its last state, from its metrics rows"
else fail "status of a killed fixed run" "$out" "json at_risk_steps: $js"; fi

# ---------------------------------------------------------------- extreme values
# KEY=VALUE...|expected exit codes|what the message must name
# (the probe's keys with tandem.alpha_cut=any: under the default hold nothing overfits in
# this run, α is pinned and no twins run, so lr_probe, lr_alpha and gamma are never used)
cases=(
  "optim.lr=1e30|5|lower optim.lr"
  "tandem.alpha_cut=any tandem.lr_probe=1e30|5|lower tandem.lr_probe"
  "tandem.alpha_cut=any tandem.alpha_step=pgd tandem.lr_alpha=1e300|5|lower tandem.lr_alpha"
  "tandem.alpha_cut=any tandem.alpha_step=pgd tandem.lr_alpha=1e308 tandem.gamma=100|5|the update of domain 'd0' is not finite"
  "tandem.alpha_cut=any tandem.gamma=1e300|5|lower tandem.gamma"
  "optim.weight_decay=1e300|5|lower optim.weight_decay"
  "model.layers=1024 model.channels=65536 model.heads=1|2|model.layers"
  "model.channels=65536 model.heads=65536|2|model.channels"
  "train.batch=16777216|2|train.batch"
  "train.batch=2147483647|2|train.batch"
  "tandem.val_batch=2147483647|2|tandem.val_batch"
  "tandem.val_batch=16777216|2|tandem.val_batch"
  "model.vocab=65536 train.batch=1000000|2|train.batch"
  "model.ctx=2147483647|2|model.ctx"
)
i=0
for c in "${cases[@]}"; do
  IFS='|' read -r kvs want key <<<"$c"
  args=()
  for kv in $kvs; do args+=(--set "$kv"); done
  i=$((i + 1))
  out=$("$bin" run "$tmp/c.yaml" --store "$tmp/x$i" --quiet "${args[@]}" 2>&1); rc=$?
  if [ "$rc" = "$want" ] && grep -qF -- "$key" <<<"$out" && \
     ! grep -qE "runtime error|AddressSanitizer|LeakSanitizer" <<<"$out"; then
    pass "$kvs: exit $rc naming $key"
  else
    fail "$kvs: exit $want naming $key" "exit $rc: $(tail -c 600 <<<"$out")"
  fi
done

# a u blown up by the decay (optim.lr x optim.weight_decay >= 1: each free step scales it by
# -2) stays finite long enough to start a probe, whose twins then overflow at any
# tandem.lr_probe: the message names the decay's keys and the domain by its name (it said
# "loss on domain 0 ... lower tandem.lr_probe", which lowering never cured); the loss as NaN
# or Inf (printf's "-nan" before)
out=$("$bin" run "$tmp/c.yaml" --store "$tmp/decay" --quiet --set run.episodes=200 --set optim.lr=1 \
  --set optim.weight_decay=3 --set tandem.alpha_cut=any --set tandem.lr_probe=1e-8 2>&1); rc=$?
if [ $rc = 5 ] && grep -Eq "twin w diverged \(its loss on domain 'd0' is (NaN|-?Inf|[0-9]).*lower optim.weight_decay$" <<<"$out" &&
   ! grep -q "lower tandem.lr_probe" <<<"$out"; then
  pass "a probe after u blew up by the decay: exit 5 naming optim.weight_decay and the domain"
else fail "a probe after u blew up by the decay: exit 5 naming optim.weight_decay" "exit $rc: $out"; fi

# the diverged run gave its lease back (it ended: no holder is left behind)
out=$("$bin" status "$tmp/x1" 2>&1)
if grep -q "released" <<<"$out"; then pass "a diverged run released its lease"
else fail "a diverged run released its lease" "$out"; fi

# ---------------------------------------------------------------- a diverged run in its store
# A run that exits 5 leaves diverged.mp: status (text and --json), mixture (stderr, the YAML
# comment, --json) and alpha say where it diverged and the message naming the key; verify
# notes it (exit 0), repair leaves it, gc keeps it; a resume with the key lowered removes it
# and the run reads as running/finished again. A record that cannot be written is said,
# and the run still exits 5 with its message. (Before: nothing in the store said it.)
out=$("$bin" status "$tmp/decay" 2>&1); rc=$?
if [ $rc = 0 ] && grep -q "^diverged  YES: at episode [0-9]*, probe step (run position [0-9]*)" <<<"$out" &&
   grep -q "twin w diverged .*lower optim.weight_decay$" <<<"$out" && grep -q "^finished  no" <<<"$out"; then
  pass "status of a run that diverged in a probe: where, and the message naming optim.weight_decay"
else fail "status of a run that diverged in a probe" "exit $rc: $out"; fi
div="$tmp/div"
out=$("$bin" run "$tmp/c.yaml" --store "$div" --quiet --set optim.lr=1e30 2>&1); rc=$?
if [ $rc = 5 ] && grep -q "lower optim.lr" <<<"$out" && [ -f "$div/diverged.mp" ] &&
   ! grep -q "could not be recorded" <<<"$out"; then pass "a diverging run: exit 5, diverged.mp written"
else fail "a diverging run: exit 5, diverged.mp written" "exit $rc: $out" "$(ls "$div" 2>&1)"; fi
out=$("$bin" status "$div" 2>&1); rc=$?
if [ $rc = 0 ] && grep -q "^diverged  YES: at episode 0, free step 2 (run position 3)" <<<"$out" &&
   grep -q "^          episode 0, free step 2 of 2 (run position 3): AdamW step 2 of u: .*lower optim.lr$" <<<"$out" &&
   grep -q "no full state before it: a resume starts from the beginning; change the key" <<<"$out" &&
   grep -q "released" <<<"$out"; then pass "status: diverged at episode 0, free step 2, the message, released"
else fail "status of a diverged run" "exit $rc: $out"; fi
got=$("$bin" status "$div" --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)["diverged"]
ok = d and d["episode"] == 0 and d["step"] == "free" and d["free_step"] == 2 and d["seq"] == 3 and d["state_seq"] == 0 and \
     d["message"].endswith("lower optim.lr") and d["time"] > 1.6e9 and d["time_iso"] and d["epoch"] >= 1
print("ok" if ok else "diverged: %r" % d)' 2>&1)
if [ "$got" = ok ]; then pass "status --json: the diverged member"
else fail "status --json: the diverged member" "$got"; fi
out=$("$bin" mixture "$div" 2>"$tmp/mix.err"); rc=$?
if [ $rc = 0 ] && grep -q "diverged at episode 0 (free step, run position 3; exit 5): episode 0, free step 2 of 2 (run position 3): .*lower optim.lr" \
     "$tmp/mix.err" && grep -q "not its alpha\*" "$tmp/mix.err" && ! grep -q "is not finished" "$tmp/mix.err" &&
   grep -q "^# .*before it diverged (at episode 0; not its alpha\*" <<<"$out"; then
  pass "mixture of a diverged run: exit 0 (as unfinished), says it diverged on stderr and in the YAML"
else fail "mixture of a diverged run" "exit $rc: $out" "$(cat "$tmp/mix.err")"; fi
got=$("$bin" mixture "$div" --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)["diverged"]
print("ok" if d and d["episode"] == 0 and d["step"] == "free" and "optim.lr" in d["message"] else "%r" % d)' 2>&1)
if [ "$got" = ok ]; then pass "mixture --json: the diverged member"
else fail "mixture --json: the diverged member" "$got"; fi
out=$("$bin" alpha "$div" 2>&1 >/dev/null); rc=$?
if [ $rc = 0 ] && grep -q "note: .* diverged at episode 0 .*lower optim.lr" <<<"$out"; then
  pass "alpha of a diverged run: a note on stderr"
else fail "alpha of a diverged run: a note on stderr" "exit $rc: $out"; fi
out=$("$bin" verify "$div" 2>&1); rc=$?
if [ $rc = 0 ] && grep -q "^note  diverged.mp: the run diverged at episode 0 (free step" <<<"$out"; then
  pass "verify: diverged.mp decodes, a note (exit 0)"
else fail "verify of a diverged run" "exit $rc: $out"; fi
out=$("$bin" repair "$div" 2>&1); rc=$?
out2=$("$bin" gc "$div" --keep 1 2>&1); rc2=$?
if [ $rc = 0 ] && ! grep -q "diverged.mp" <<<"$out" && [ $rc2 = 0 ] && [ -f "$div/diverged.mp" ] &&
   "$bin" status "$div" 2>&1 | grep -q "^diverged  YES"; then
  pass "repair plans nothing for it, gc keeps it: status still says diverged"
else fail "repair and gc of a diverged run" "repair exit $rc: $out" "gc exit $rc2: $out2"; fi
# a damaged record: verify's fault, repair sets it aside, status says it cannot tell
cp "$div/diverged.mp" "$tmp/diverged.keep"
printf 'x' >>"$div/diverged.mp"
out=$("$bin" verify "$div" 2>&1); rc=$?
st=$("$bin" status "$div" 2>&1)
rp=$("$bin" repair "$div" --apply 2>&1); rrc=$?
if [ $rc = 3 ] && grep -q "diverged.mp.*cannot say whether the run diverged" <<<"$out" &&
   grep -q "^diverged  unknown: diverged.mp cannot be read" <<<"$st" && [ $rrc = 0 ] && [ ! -e "$div/diverged.mp" ] &&
   ls "$div"/quarantine/*/diverged.mp >/dev/null 2>&1; then
  pass "a damaged diverged.mp: verify's fault (exit 3), status says unknown, repair --apply sets it aside"
else fail "a damaged diverged.mp" "verify exit $rc: $out" "status: $st" "repair exit $rrc: $rp"; fi
cp "$tmp/diverged.keep" "$div/diverged.mp"
# the key lowered (pinned: --allow-change), the run resumes, finishes, and is no longer diverged
out=$("$bin" run "$tmp/c.yaml" --store "$div" --quiet --set optim.lr=3e-3 --allow-change optim.lr 2>&1); rc=$?
st=$("$bin" status "$div" 2>&1)
js=$("$bin" status "$div" --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys; d = json.load(sys.stdin); print(d["diverged"], d["finished"])' 2>&1)
mx=$("$bin" mixture "$div" 2>&1 >/dev/null)
if [ $rc = 0 ] && grep -q "divergence recorded at episode 0 (free step, run position 3) is cleared" <<<"$out" &&
   [ ! -e "$div/diverged.mp" ] && ! grep -q "^diverged" <<<"$st" && grep -q "^finished  yes" <<<"$st" &&
   [ "$js" = "None True" ] && ! grep -q "diverged" <<<"$mx"; then
  pass "lowered and resumed: diverged.mp removed at the start; status, --json and mixture say finished"
else fail "lowered and resumed" "exit $rc: $out" "status: $st" "json: $js" "mixture: $mx"; fi
# diverged in episode 0's probe, before any alpha record: mixture refuses (exit 2, as with
# none yet) naming the divergence and the key
"$bin" run "$tmp/c.yaml" --store "$tmp/div-probe" --quiet --set tandem.alpha_cut=any \
  --set tandem.lr_probe=1e30 >/dev/null 2>&1; rc=$?
out=$("$bin" mixture "$tmp/div-probe" 2>&1); rc2=$?
if [ $rc = 5 ] && [ $rc2 = 2 ] &&
   grep -q "has no alpha records: it diverged at episode 0 (probe step, run position 0; exit 5): .*lower tandem.lr_probe" <<<"$out"; then
  pass "mixture of a run that diverged before its first alpha record: exit 2 naming the divergence"
else fail "mixture of a run that diverged before its first alpha record" "run exit $rc, mixture exit $rc2: $out"; fi
# the record cannot be written: exit 5 all the same, with the message and a line saying so
out=$(TANDEM_TEST_FAIL_AT=diverged-put:1 "$bin" run "$tmp/c.yaml" --store "$tmp/div-nowrite" --quiet \
      --set optim.lr=1e30 2>&1); rc=$?
if [ $rc = 5 ] && grep -q "lower optim.lr$" <<<"$out" &&
   grep -q "the divergence could not be recorded in .*diverged.mp .*refused the write" <<<"$out" &&
   [ ! -e "$tmp/div-nowrite/diverged.mp" ]; then
  pass "diverged.mp not written: exit 5, the message, and a line saying it could not be recorded"
else fail "diverged.mp not written" "exit $rc: $out"; fi

# ---------------------------------------------------------------- numbers from the environment
# A number a user sets in the environment and mistypes is refused at start (exit 2, naming
# the variable), before the store is created. Before: the lock timeout read "2m" as 2 s and
# "nan" as waiting for ever, "24 G" of TANDEM_MEM_AVAILABLE was passed over for the whole
# node's memory ("0" turned the memory check off, "0x10" was 16 bytes), and a grace period
# of "30s" was taken for none known.
for kv in "TANDEM_STORE_LOCK_TIMEOUT_S=2m" "TANDEM_STORE_LOCK_TIMEOUT_S=nan" "TANDEM_STORE_LOCK_TIMEOUT_S=0" \
          "TANDEM_MEM_AVAILABLE=24 G" "TANDEM_MEM_AVAILABLE=24X" "TANDEM_MEM_AVAILABLE=0" "TANDEM_MEM_AVAILABLE=0x10" \
          "TANDEM_GRACE_S=30s" "TANDEM_GRACE_S=-1"; do
  var=${kv%%=*}
  rm -rf "$tmp/envnum"
  out=$(env "$kv" "$bin" run "$tmp/c.yaml" --store "$tmp/envnum" --quiet 2>&1); rc=$?
  if [ $rc = 2 ] && grep -q "^tandem run: $var = '" <<<"$out" && [ ! -e "$tmp/envnum" ]; then
    pass "$kv: exit 2 naming $var, no store created"
  else fail "$kv: exit 2 naming $var, no store created" "exit $rc, store $(ls -d "$tmp/envnum" 2>/dev/null)" "$out"; fi
done
out=$(TANDEM_STORE_LOCK_TIMEOUT_S=0.5 TANDEM_MEM_AVAILABLE=1.5GiB TANDEM_GRACE_S=30 "$bin" run "$tmp/c.yaml" \
      --store "$tmp/envnum" --quiet 2>&1); rc=$?
if [ $rc = 0 ]; then pass "numbers in the environment that are numbers: the run goes (exit 0)"
else fail "numbers in the environment that are numbers" "exit $rc" "$out"; fi

# ---------------------------------------------------------------- hostile text in JSON
# A host name with a quote, a backslash, a comma and a control character (set in a UTS
# namespace of its own; root only) lands in every alpha record: `alpha --format json`
# must still be valid JSON holding it exactly.
hostile='a"b\\c,d'$'\x01''e'
if unshare --uts true 2>/dev/null; then
  out=$(unshare --uts /bin/sh -c '/usr/bin/python3 -c "import socket,sys; socket.sethostname(sys.argv[1])" "$1" &&
        exec "$2" run "$3" --store "$4" --quiet' sh "$hostile" "$bin" "$tmp/c.yaml" "$tmp/host" 2>&1); rc=$?
  got=$("$bin" alpha "$tmp/host" --format json 2>&1 | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print("ok" if d and all(r["host"] == sys.argv[1] for r in d) else "host %r" % d[0]["host"])' "$hostile" 2>&1)
  if [ $rc -eq 0 ] && [ "$got" = ok ]; then pass "a host name with quote, backslash, comma and a control character: alpha --format json is valid and holds it"
  else fail "alpha --format json with a hostile host name" "run exit $rc: $out" "$got"; fi
else
  echo "SKIP hostile host name: no UTS namespace here (needs root)"
fi

# ---------------------------------------------------------------- the lease's own text
# A lease whose host holds an escape sequence, a BEL and a newline (a damaged or hostile
# store) is shown with them as '?' everywhere people read it: status's lease line and its
# reason ("held from host ..."), run's notice as it takes the lease over (before: raw in
# the last two, so the store could recolour the terminal and forge a log line). A lease
# that does not decode is status's DAMAGED, naming the key and that the next run replaces
# it, and "damaged" with its fault in --json (before: "none", while verify calls it a fault).
"$bin" run "$tmp/c.yaml" --store "$tmp/ctl" --quiet >/dev/null 2>&1
/usr/bin/python3 - "$tmp/ctl/lease" <<'PY'
import struct, sys, time
def s(x): b = x.encode(); return bytes([0xd9, len(b)]) + b
m = {'format': b'\x01', 'epoch': b'\x01', 'host': s('ev\x1b[31mIL\x07\nFAKE: run finished OK'),
     'pid': b'\xcf' + struct.pack('>Q', 999999), 'attempt': b'\x00',
     'time': b'\xcb' + struct.pack('>d', time.time() - 60), 'released': b'\xc2',
     'pid_ns': b'\xcf' + struct.pack('>Q', 4026531836), 'boot_id': s('x')}
out = bytes([0x80 | len(m)])
for k, v in m.items(): out += s(k) + v
open(sys.argv[1], 'wb').write(out)
PY
st=$("$bin" status "$tmp/ctl" 2>&1)
rn=$("$bin" run "$tmp/c.yaml" --store "$tmp/ctl" --set run.episodes=4 --allow-change run.episodes 2>&1 >/dev/null); rc=$?
if [ $rc = 0 ] && ! grep -qaP '\x1b|\x07' <<<"$st$rn" && ! grep -qa '^FAKE' <<<"$st
$rn" && grep -q 'held from host ev?\[31mIL??FAKE: run finished OK (this is' <<<"$st" &&
   grep -q 'taking over the lease of writer epoch 1 (host ev?\[31mIL??FAKE: run finished OK, pid' <<<"$rn"; then
  pass "a lease's host with escapes, BEL and a newline: '?' in status's reason and run's takeover notice"
else fail "control characters of a lease's host" "status: $(cat -v <<<"$st")" "run exit $rc: $(cat -v <<<"$rn")"; fi
echo junk >"$tmp/ctl/lease"
st=$("$bin" status "$tmp/ctl" 2>&1); rc=$?
js=$("$bin" status "$tmp/ctl" --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
l = json.load(sys.stdin)["lease"]
print(l["state"], "lease" in l.get("fault", ""))' 2>&1)
if [ $rc = 0 ] && grep -q "^lease     DAMAGED: lease: .*the next tandem run replaces it" <<<"$st" &&
   [ "$js" = "damaged True" ]; then
  pass "status shows an undecodable lease as DAMAGED, naming it (--json: $js)"
else fail "status of an undecodable lease" "exit $rc: $st" "json: $js"; fi

# A released lease whose settle_until is far off (1e300: a clock far ahead, a damaged
# record) is believed for CKPT_SETTLE_MAX_S at most, and the run's notice says that
# figure and the cap (before: a 300-digit count of seconds, not what was kept).
/usr/bin/python3 - "$tmp/ctl/lease" <<'PY'
import struct, sys, time
def s(x): b = x.encode(); return bytes([0xd9, len(b)]) + b
def f(x): return b'\xcb' + struct.pack('>d', x)
m = {'format': b'\x01', 'epoch': b'\x07', 'host': s('vm'), 'pid': b'\xcf' + struct.pack('>Q', 999999),
     'attempt': b'\x00', 'time': f(time.time()), 'released': b'\xc3', 'settle_until': f(1e300)}
out = bytes([0x80 | len(m)])
for k, v in m.items(): out += s(k) + v
open(sys.argv[1], 'wb').write(out)
PY
rn=$("$bin" run "$tmp/c.yaml" --store "$tmp/ctl" --set run.episodes=5 --allow-change run.episodes 2>&1 >/dev/null); rc=$?
line=$(grep "may still land" <<<"$rn")
if [ $rc = 0 ] && [ ${#line} -lt 300 ] &&
   grep -q "epoch 7 gave up on may still land, its lease says for more than 7260 s.*kept for 7260 s" <<<"$line"; then
  pass "a lease's settle_until of 1e300: the run says the 7260 s it keeps states for, and that it is capped"
else fail "a lease's far settle_until in run's notice" "exit $rc: ${rn:0:600}"; fi

# ---------------------------------------------------------------- run --json
# stdout holds JSON lines alone (each an event with a unix time), stderr no JSON; a
# finished run ends with "end" carrying the mixture, a diverged one with "error" code 5.
check_events() { # check_events FILE WANT_CODE: prints ok or what is wrong
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
try:
    ev = [json.loads(l) for l in open(sys.argv[1])]
except Exception as x:
    print("stdout is not JSON lines:", x); sys.exit()
want = int(sys.argv[2])
names = [e.get("event") for e in ev]
bad = []
if not all(isinstance(e.get("time"), (int, float)) and e["time"] > 1.6e9 for e in ev): bad.append("time")
if [e["time"] for e in ev] != sorted(e["time"] for e in ev): bad.append("time order")
if not names or names[0] != "memory" or "start" not in names or names[-1] != "end": bad.append("order")
end = ev[-1] if ev else {}
if end.get("code") != want: bad.append("end code %r" % end.get("code"))
if want == 0:
    if [e["episode"] for e in ev if e["event"] == "episode"] != [1, 2, 3]: bad.append("episodes")
    if names.count("commit") < 2: bad.append("commits")
    mix = end.get("mixture") or {}
    if len(mix) != 3 or abs(sum(mix.values()) - 1) > 1e-9: bad.append("mixture %r" % mix)
else:
    err = [e for e in ev if e["event"] == "error"]
    if len(err) != 1 or err[0].get("code") != want or "lower optim.lr" not in err[0].get("message", ""):
        bad.append("error %r" % err)
print("ok" if not bad else "%s: %r" % (bad, names))
PY
}
"$bin" run "$tmp/c.yaml" --store "$tmp/json" --json >"$tmp/json.out" 2>"$tmp/json.err"; rc=$?
got=$(check_events "$tmp/json.out" 0)
if [ $rc -eq 0 ] && [ "$got" = ok ] && ! grep -q '^{' "$tmp/json.err"; then
  pass "run --json: events on stdout only (memory, start, 3 episodes, commits, end with the mixture)"
else fail "run --json" "exit $rc: $got" "stderr: $(head -c 300 "$tmp/json.err")"; fi
"$bin" run "$tmp/c.yaml" --store "$tmp/json-div" --json --set optim.lr=1e30 >"$tmp/div.out" 2>"$tmp/div.err"; rc=$?
got=$(check_events "$tmp/div.out" 5)
if [ $rc -eq 5 ] && [ "$got" = ok ] && grep -q "lower optim.lr" "$tmp/div.err"; then
  pass "run --json, diverged: exit 5, an error event with code 5 and the message, then end"
else fail "run --json, diverged" "exit $rc: $got" "stderr: $(head -c 300 "$tmp/div.err")"; fi

# ---------------------------------------------------------------- --version
# The version line names this checkout's revision (the build's, when the tree is git);
# --json is one valid object; an unknown option is a usage error.
out=$("$bin" --version 2>&1); rc=$?
rev=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ $rc -eq 0 ] && [[ "$out" == "tandem "*"(git $rev"* ]] && [[ "$out" == *"cuda:"* ]] && [[ "$out" == *"nccl:"* ]]; then
  pass "tandem --version names the revision $rev and the backends"
else fail "tandem --version" "exit $rc: $out" "want git $rev"; fi
got=$("$bin" version --json 2>&1 | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
ok = set(d) >= {"version", "git", "cpu", "mpi", "cuda", "nccl"} and d["git"].startswith(sys.argv[1])
ok = ok and all(isinstance(d[k], bool) for k in ("mpi", "cuda", "nccl")) and (d["cuda"] or not d["nccl"])
print("ok" if ok else repr(d))' "$rev" 2>&1)
if [ "$got" = ok ]; then pass "tandem version --json is one object with version, git, cpu, mpi, cuda, nccl"
else fail "tandem version --json" "$got"; fi
"$bin" --version --bogus >/dev/null 2>&1; rc=$?
if [ $rc -eq 2 ]; then pass "tandem --version --bogus: exit 2"; else fail "tandem --version --bogus" "exit $rc"; fi

# ---------------------------------------------------------------- a damaged metrics row
# Metrics rows are not part of the audit trail: verify notes one that cannot be read (exit
# 0, its key in damaged_metrics), tandem metrics skips it (the chaos harness checks that a
# run passing the episode again writes it again, and that verify's note agrees with it).
"$bin" run "$tmp/c.yaml" --store "$tmp/rows" --quiet >/dev/null 2>&1
head -c 40 "$tmp/rows/metrics/1.mp" >"$tmp/cut" && mv "$tmp/cut" "$tmp/rows/metrics/1.mp"
out=$("$bin" verify "$tmp/rows" 2>&1); rc=$?
js=$("$bin" verify "$tmp/rows" --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["damaged_metrics"])')
if [ $rc = 0 ] && grep -q "^note  metrics/1.mp cannot be read" <<<"$out" && [ "$js" = "['metrics/1.mp']" ]; then
  pass "verify notes a damaged metrics row (exit 0, damaged_metrics $js)"
else fail "verify and a damaged metrics row" "exit $rc: $out" "json: $js"; fi
n=$("$bin" metrics "$tmp/rows" --format jsonl 2>/dev/null | wc -l)
dw=$("$bin" metrics "$tmp/rows" 2>&1 >/dev/null)
if [ "$n" = 2 ] && grep -q "metrics/1.mp" <<<"$dw" && ! grep -q "has no row" <<<"$dw"; then
  pass "tandem metrics skips the damaged row (2 of 3 rows), said once as damaged, not as missing"
else fail "metrics skips the damaged row" "$n rows" "$dw"; fi
# a row deleted: verify notes the gap as it notes a damaged row, metrics and alpha --plot
# say theirs (before: episodes 0 and 2 listed as if whole, verify silent, the chart cut
# at the hole without a word)
rm -f "$tmp/rows/metrics/1.mp"
out=$("$bin" verify "$tmp/rows" 2>&1); rc=$?
mw=$("$bin" metrics "$tmp/rows" 2>&1 >/dev/null)
cp -r "$tmp/rows" "$tmp/rows-hole" && rm -f "$tmp/rows-hole/alpha/1.mp"
aw=$("$bin" alpha "$tmp/rows-hole" --plot "$tmp/hole.svg" 2>&1)
if [ $rc = 0 ] && grep -q "^note  metrics/1.mp is missing" <<<"$out" && grep -q "episode 1 has no row" <<<"$mw" &&
   grep -q "warning: alpha/1.mp is missing.*the chart stops there" <<<"$aw"; then
  pass "a deleted metrics row noted by verify and metrics, an α hole by alpha --plot"
else fail "gaps in the history" "verify $rc: $out" "metrics: $mw" "alpha --plot: $aw"; fi

# The last row of a finished run, deleted or replaced by a FIFO or a directory (a listing
# shows regular files only): verify and metrics say it as they say a hole in the middle
# (before: silently left out, the run's episodes seemingly all there). HEAD's state says
# how many episodes have their rows.
"$bin" run "$tmp/c.yaml" --store "$tmp/lastrow" --quiet >/dev/null 2>&1
for kind in rm fifo dir; do
  rm -rf "$tmp/lastcopy" && cp -r "$tmp/lastrow" "$tmp/lastcopy" && rm -f "$tmp/lastcopy/metrics/2.mp"
  case $kind in fifo) mkfifo "$tmp/lastcopy/metrics/2.mp" ;; dir) mkdir "$tmp/lastcopy/metrics/2.mp" ;; esac
  out=$(timeout -k 5 30 "$bin" verify "$tmp/lastcopy" 2>&1); rc=$?
  mw=$(timeout -k 5 30 "$bin" metrics "$tmp/lastcopy" 2>&1 >/dev/null); mrc=$?
  if [ $rc = 0 ] && [ $mrc = 0 ] && grep -q "^note  metrics/2.mp is missing" <<<"$out" &&
     grep -q "episode 2 has no row (metrics/2.mp is missing)" <<<"$mw"; then
    pass "the last metrics row ($kind) noted by verify and metrics"
  else fail "the last metrics row ($kind)" "verify exit $rc: $out" "metrics exit $mrc: $mw"; fi
done

# An object past the size bound (store.h) is refused as damage; for RUN the advice does not
# say that a run goes on without it (no run resumes without RUN: only a copy restores it).
rm -rf "$tmp/bigrun" && cp -r "$tmp/lastrow" "$tmp/bigrun" && truncate -s 300M "$tmp/bigrun/RUN"
out=$("$bin" status "$tmp/bigrun" 2>&1); rc=$?
if [ $rc = 3 ] && grep -q "RUN is 314572800 bytes.*restore it from a copy.*not without RUN.*only a copy restores" <<<"$out" &&
   ! grep -q "a run then goes on as without it" <<<"$out"; then
  pass "an oversized RUN: exit 3, the advice a copy (not 'a run goes on without it')"
else fail "an oversized RUN's advice" "exit $rc: $out"; fi

# ---------------------------------------------------------------- a FIFO in an object's place
# A FIFO where RUN, HEAD or a state should be: every command refuses it as what it is (exit
# 3, the key named) instead of waiting for a writer that never comes (before: status, verify
# and run blocked in open(2) for ever).
"$bin" run "$tmp/c.yaml" --store "$tmp/fifostore" --quiet >/dev/null 2>&1
for key in RUN HEAD states/8.mp; do
  rm -rf "$tmp/fifocopy" && cp -r "$tmp/fifostore" "$tmp/fifocopy" && rm -f "$tmp/fifocopy/$key" && mkfifo "$tmp/fifocopy/$key"
  for cmd in status verify run; do
    if [ $cmd = run ]; then args=("$tmp/c.yaml" --store "$tmp/fifocopy" --quiet --set run.episodes=4 --allow-change run.episodes)
    else args=("$tmp/fifocopy"); fi
    out=$(timeout -k 5 30 "$bin" $cmd "${args[@]}" 2>&1); rc=$?
    if [ $key = states/8.mp ]; then
      # a listing shows regular files only: a FIFO there is no state (a middle one, not
      # needed), the run goes on from HEAD; what matters is that nothing waits on it
      if [ $rc -le 3 ] && ! grep -q "states/8.mp" <<<"$out"; then pass "$cmd with a FIFO at $key: exit $rc, not read"
      else fail "$cmd with a FIFO at $key" "exit $rc (124: held for ever)" "$out"; fi
    elif [ $rc = 3 ] && grep -q "$key is not a regular file" <<<"$out"; then pass "$cmd with a FIFO at $key: exit 3, named"
    else fail "$cmd with a FIFO at $key" "exit $rc (124: held for ever)" "$out"; fi
  done
done

# A directory where the run writes an object (mixture.mp, replaced at the end): the same
# words, naming it (before: "cannot replace mixture.mp: Is a directory").
rm -rf "$tmp/fifocopy" && cp -r "$tmp/fifostore" "$tmp/fifocopy" && rm -f "$tmp/fifocopy/mixture.mp" &&
  mkdir "$tmp/fifocopy/mixture.mp"
out=$(timeout -k 5 60 "$bin" run "$tmp/c.yaml" --store "$tmp/fifocopy" --quiet --set run.episodes=4 \
      --allow-change run.episodes 2>&1); rc=$?
if [ $rc = 3 ] && grep -q "mixture.mp is not a regular file" <<<"$out"; then pass "run with a directory at mixture.mp: exit 3, named"
else fail "run with a directory at mixture.mp" "exit $rc" "$out"; fi

# ---------------------------------------------------------------- endpoints that answer wrongly
# tests/s3/hostile_s3.py MODE on loopback: hostile_start MODE starts it (port in $port),
# hostile_run CMD runs `tandem CMD s3://bucket/run` against it (out, rc), hostile_stop.
# timeout's SIGKILL follows 5 s after its SIGTERM, which tandem takes as a preemption.
hostile_start() {
  rm -f "$tmp/port"
  /usr/bin/python3 tests/s3/hostile_s3.py "$1" "$tmp/port" & srv=$!
  for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
  port=$(cat "$tmp/port" 2>/dev/null)
}
hostile_run() {
  out=$(AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=hostile \
        AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
        TANDEM_TEST_LIST_MAX_KEYS=20000 timeout -k 5 60 "$bin" "$1" s3://bucket/run 2>&1); rc=$?
}
hostile_stop() { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; }

# Listings that never end (repeat: a continuation token handed back; empty: empty pages
# with new tokens): every command that lists ends with exit 3 naming the endpoint's fault,
# within seconds, instead of running (and growing) forever. Ranged reads whose 206 names
# another range than the one asked for, or a size no store holds (2^64-1: believed, it was
# an allocation of 16 EiB and exit 1 "out of memory"; a size that is not a number was
# retried 8 times as corruption): exit 3, the Content-Range shown, the endpoint named. A
# size S3 allows but this process cannot hold (5 TiB: allocated at once, exit 1 "out of
# memory"): exit 3, said before the allocation. A listing whose keys keep rising with new
# tokens (rising: it listed until memory ran out) stops past a bound of keys (2^25; 20000
# here): exit 3, named.
# Listings S3 would never give: a key outside the prefix (stripped, it read past the key's
# end), a key twice (a listed index twice read as a missing record, and repair rolled a
# sound run back), a page past max-keys (a flood filled memory): exit 3, named.
for case in "repeat:answers listings wrongly" "empty:answers listings wrongly" \
            "list-foreign:a key outside the prefix asked for" "list-dupes:a key twice, or keys out of order" \
            "list-flood:more than the 1000 asked for" "list-cut:ends before </ListBucketResult>" \
            "range-huge:answers ranged reads wrongly" "range-garbage:answers ranged reads wrongly" \
            "range-offset:answers ranged reads wrongly" "rising:goes on past 20000 keys" \
            "range-big:more than this process may allocate"; do
  mode=${case%%:*} want=${case#*:}
  hostile_start "$mode"
  for cmd in status verify; do
    hostile_run "$cmd"
    if [ $rc = 3 ] && grep -q "$want" <<<"$out" && { [ "${mode#range}" = "$mode" ] || [ $mode = range-big ] || grep -q "Content-Range 'bytes" <<<"$out"; }; then
      pass "$cmd on an endpoint that $want ($mode): exit 3, named"
    else fail "$cmd on an endpoint that $want ($mode)" "exit $rc (124: still at it after 60 s)" "$out"; fi
  done
  hostile_stop
done

# An error answer, a listing and a ranged read whose bodies never end (no Content-Length,
# gigabytes on): each is stopped at the bound such an answer has (1 MiB, 64 MiB, the range
# asked for) and the command ends with exit 3 naming it. Before, tandem took all the memory
# it could (12-16 GB here) and ran past 60 s. The same wrong answer twice is the
# endpoint's: no third attempt (all 8 read 2 GiB of a record's 256 MiB bound: 13 s, and
# past 60 s under ASan on a loaded machine).
for mode in endless-error endless-list endless-range ignore-range-endless; do
  hostile_start "$mode"
  hostile_run status
  if [ $rc = 3 ] && grep -q "answered wrongly: a body (HTTP [0-9]*) longer than" <<<"$out" &&
     { [ $mode = endless-range ] || grep -q "failed after 2 attempts" <<<"$out"; }; then
    pass "status on an endpoint whose answers never end ($mode): exit 3, named"
  else fail "status on an endpoint whose answers never end ($mode)" "exit $rc (124: still reading after 60 s)" "$out"; fi
  hostile_stop
done

# a write answered with an ETag longer than any S3 ETag: cut short, it never matched again
# and every compare-and-swap read as another writer's ("fenced out"); now exit 3, named
hostile_start long-etag
out=$(AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=hostile \
      AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
      timeout -k 5 60 "$bin" run "$tmp/c.yaml" --store s3://bucket/le --quiet 2>&1); rc=$?
if [ $rc = 3 ] && grep -q "ETag is longer than 127 bytes" <<<"$out" && grep -q "s3://bucket/le" <<<"$out"; then
  pass "a run on an endpoint whose ETags are too long: exit 3, named"
else fail "a run on an endpoint whose ETags are too long" "exit $rc" "$out"; fi
hostile_stop

# a bucket in another region than the requests are signed for (S3: a 301 PermanentRedirect
# naming it in x-amz-bucket-region, or a 400 AuthorizationHeaderMalformed with <Region>):
# exit 3 saying which region to set, for a read (status) and for a new run (its first
# request, the listing of its prefix, meets it; the PUTs answer the same); an
# endpoint that redirects elsewhere: not followed (the signed request would go to another
# host), the message says so; a <Region> that echoes the session token is not printed
for mode in redirect region-400 redirect-elsewhere region-echo; do
  want=$(case $mode in redirect) echo "set AWS_REGION=eu-central-1";; region-400) echo "set AWS_REGION=ap-south-1";;
         *) echo "does not follow redirects";; esac)
  [ $mode = region-echo ] && want="HTTP 400 AuthorizationHeaderMalformed"
  hostile_start $mode
  hostile_run status; st_out=$out; st_rc=$rc
  out=$(AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=hostile \
        AWS_SESSION_TOKEN=tok-secret-$$ AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null \
        AWS_SHARED_CREDENTIALS_FILE=/dev/null timeout -k 5 60 "$bin" run "$tmp/c.yaml" --store s3://bucket/rg \
        --quiet 2>&1); rc=$?
  hostile_stop
  if [ $st_rc = 3 ] && [ $rc = 3 ] && grep -q "$want" <<<"$st_out" && grep -q "$want" <<<"$out" &&
     grep -q "s3://bucket/rg" <<<"$out" && ! grep -q "tok-secret" <<<"$out$st_out" &&
     { [ $mode != region-echo ] || ! grep -q "the bucket is in region" <<<"$out"; }; then
    pass "an endpoint answering $mode: status and run exit 3 with '$want'"
  else fail "an endpoint answering $mode" "status exit $st_rc, run exit $rc (want '$want')" "$st_out" "$out"; fi
done

# credentials-bearing URLs are refused before any request, and their secret is not repeated:
# a store URL or endpoint with user info (s3://KEY:SECRET@bucket went into errors, argv and
# rendered jobs; the endpoint's went into the Host header), and a container-credentials
# URL whose host only looks like loopback (http://127.0.0.1@elsewhere/ sent the
# authorization token there in clear text)
for case in "store|s3://AKIDX:urlsecret$$@bucket/run|user info" \
            "store-slash|s3://AKIDX:url/secret$$/x@bucket/run|user info" \
            "endpoint|s3://bucket/run|user info" \
            "container-userinfo|s3://bucket/run|user info" \
            "container-lookalike|s3://bucket/run|plain http is allowed only"; do
  IFS='|' read -r what url want <<<"$case"
  envs=(AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true)
  case $what in
    store*) envs+=(AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=x AWS_ENDPOINT_URL=http://127.0.0.1:9) ;;
    endpoint) envs+=(AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=x "AWS_ENDPOINT_URL=http://minio:urlsecret$$@127.0.0.1:9") ;;
    container-userinfo) envs+=("AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:urlsecret$$@192.0.2.2:9/creds" AWS_ENDPOINT_URL=http://127.0.0.1:9) ;;
    container-lookalike) envs+=(AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1.example.com/creds AWS_ENDPOINT_URL=http://127.0.0.1:9) ;;
  esac
  out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE "${envs[@]}" \
        timeout -k 5 30 "$bin" status "$url" --json 2>&1); rc=$?
  if [ $rc = 2 ] && grep -q "$want" <<<"$out" && ! grep -q "urlsecret\|secret$$" <<<"$out"; then
    pass "a URL with credentials ($what): exit 2 before any request, the secret not repeated"
  else fail "a URL with credentials ($what)" "exit $rc" "$out"; fi
done

# a store URL holding user info in any spelling — a mistyped scheme ("s3:/K:S@b", "s3//K:S@b",
# "s3:\\K:S@b"), none ("K:S@b") — is refused (exit 2) and not
# repeated, also through manifest --store and --set store=: before, the "did you mean" hint
# repeated it, and "s3//K:S@b/run" ran to exit 0 writing a local store ./s3/K:S@b/run whose
# RUN pinned the secret. "s3//bucket/run" without one is caught as the typo of s3:// it is.
for url in "s3:/AKIA:urlsecret$$@bkt-a/run" "s3:AKIA:urlsecret$$@bkt-a/run" "s3:///AKIA:urlsecret$$@bkt-a" \
           "AKIA:urlsecret$$@bkt-a" "file:u:urlsecret$$@x" 's3:\\AKIA:urlsecret'$$'@bkt-a' \
           "s3//AKIA:urlsecret$$@bkt-a/run"; do
  out=$(cd "$tmp" && "$bin" status "$url" 2>&1); rc=$?
  out2=$(cd "$tmp" && "$bin" run "$tmp/c.yaml" --store "$url" --quiet 2>&1); rc2=$?
  out3=$("$bin" manifest slurm "$tmp/c.yaml" --store "$url" 2>&1); rc3=$?
  out4=$("$bin" manifest slurm "$tmp/c.yaml" --store s3://bkt-a/run --set "store=$url" 2>&1); rc4=$?
  if [ "$rc$rc2$rc3$rc4" = 2222 ] && grep -q "user info" <<<"$out$out2" && [ ! -e "$tmp/s3" ] && [ ! -e "$tmp/runs" ] &&
     ! grep -q "urlsecret" <<<"$out$out2$out3$out4"; then
    pass "store URL '${url%%:*}...' with user info: status, run and manifest exit 2, the secret not repeated"
  else fail "store URL '${url%%:*}...' with user info" "exit $rc/$rc2/$rc3/$rc4" "$out" "$out2" "$out3" "$out4"; fi
  rm -rf "$tmp/s3" "$tmp/runs"
done
out=$(cd "$tmp" && "$bin" run "$tmp/c.yaml" --store s3//bkt-a/run --quiet 2>&1); rc=$?
if [ $rc = 2 ] && grep -q "did you mean s3://bkt-a/run?" <<<"$out" && [ ! -e "$tmp/s3" ]; then
  pass "run --store s3//bkt-a/run: exit 2, did you mean s3://bkt-a/run, no ./s3 written"
else fail "run --store s3//bkt-a/run" "exit $rc, ./s3 $( [ -e "$tmp/s3" ] && echo written || echo absent)" "$out"; fi
rm -rf "$tmp/s3"
# a ':' and an '@' further on in a path are no user info: a local store so named runs
out=$(cd "$tmp" && "$bin" run "$tmp/c.yaml" --store "runs/12:00/lr@3" --set run.episodes=1 --quiet 2>&1); rc=$?
if [ $rc = 0 ] && [ -e "$tmp/runs/12:00/lr@3/RUN" ]; then pass "a local store runs/12:00/lr@3 (':' and '@' in its path) runs"
else fail "a local store runs/12:00/lr@3" "exit $rc" "$out"; fi
rm -rf "$tmp/runs"

# an endpoint that echoes the session token it was sent in its error code: the token is
# in no message (it was printed as the "code"), and the rest of the code is said
hostile_start echo-token
tok="hostile-session-token-$$-0123456789"
out=$(AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=hostile \
      AWS_SESSION_TOKEN="$tok" AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
      timeout -k 5 60 "$bin" status s3://bucket/run --json 2>&1); rc=$?
if [ $rc = 3 ] && ! grep -qF "$tok" <<<"$out" && grep -q "HTTP 403 \[redacted\]" <<<"$out"; then
  pass "an endpoint that echoes the session token as its error code: redacted, exit 3"
else fail "an endpoint that echoes the session token" "exit $rc" "$out"; fi
hostile_stop

# an endpoint that echoes pieces of a long session token (real ones are 600-1500
# characters, more than any error buffer holds): from its middle as the error code and
# message, or in a Content-Range; no 12 characters of it in any message (before, only the
# whole token or its first 16 characters were found, and the middle was printed)
tok=$(/usr/bin/python3 -c 'import random,string; r=random.Random(7); print("".join(r.choice(string.ascii_letters+string.digits+"+/") for _ in range(700)))')
# the first run of 12 characters of SECRET found in TEXT ("" when none): what redaction
# promises to leave out of a message
secret_piece() { # also as the output reads with its escapes undone (%2F, \/)
  /usr/bin/python3 -c 'import sys, urllib.parse; t = sys.argv[1]
for o in (sys.argv[2], urllib.parse.unquote(sys.argv[2]).replace("\\/", "/")):
    p = next((o[i:i + 12] for i in range(len(o) - 11) if o[i:i + 12] in t), "")
    if p:
        print(p)
        break' "$1" "$2"
}
for case in "echo-token-piece:HTTP 403 \[redacted\]" "echo-token-escaped:HTTP 403 \[redacted\]" \
            "range-echo:Content-Range 'bytes 0-9/*\[redacted\]'"; do
  mode=${case%%:*} want=${case#*:}
  hostile_start "$mode"
  out=$(AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=hostile \
        AWS_SESSION_TOKEN="$tok" AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
        timeout -k 5 60 "$bin" status s3://bucket/run --json 2>&1); rc=$?
  piece=$(secret_piece "$tok" "$out")
  if [ $rc = 3 ] && [ -z "$piece" ] && grep -q "$want" <<<"$out"; then
    pass "an endpoint that echoes pieces of the session token ($mode): none printed, exit 3"
  else fail "an endpoint that echoes pieces of the session token ($mode)" "exit $rc, piece '$piece'" "$out"; fi
  hostile_stop
done

# a credential endpoint whose Expiration is a piece of the authorization token it was
# sent: exit 3 saying the Expiration is not a time, no piece of the token in the message
# (before: 60 characters of it were printed)
hostile_start creds-echo
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
      AWS_CONTAINER_CREDENTIALS_FULL_URI="http://127.0.0.1:$port/creds" AWS_CONTAINER_AUTHORIZATION_TOKEN="$tok" \
      AWS_ENDPOINT_URL=http://127.0.0.1:9 AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null \
      AWS_SHARED_CREDENTIALS_FILE=/dev/null timeout -k 5 60 "$bin" status s3://bucket/run 2>&1); rc=$?
piece=$(secret_piece "$tok" "$out")
if [ $rc = 3 ] && [ -z "$piece" ] && grep -q "Expiration '\[redacted\]' is not a time" <<<"$out"; then
  pass "a credential endpoint that echoes its authorization token as the Expiration: not printed, exit 3"
else fail "a credential endpoint that echoes its authorization token" "exit $rc, piece '$piece'" "$out"; fi
hostile_stop

# the same from a credential endpoint (container credentials): stopped at 1 MiB, exit 3
# naming the source (before: 3.9 GB and 33 s here)
hostile_start endless-error
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
      AWS_CONTAINER_CREDENTIALS_FULL_URI="http://127.0.0.1:$port/creds" AWS_ENDPOINT_URL=http://127.0.0.1:9 \
      AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
      timeout -k 5 60 "$bin" status s3://bucket/run 2>&1); rc=$?
if [ $rc = 3 ] && grep -q "container credentials.*longer than 1 MiB" <<<"$out"; then
  pass "container credentials whose answer never ends: exit 3, named"
else fail "container credentials whose answer never ends" "exit $rc" "$out"; fi
hostile_stop

# ---------------------------------------------------------------- secrets in the environment
# Any variable whose name says it holds a secret (the container authorization token, a
# password meant for another tool), not only the two AWS keys: no core file may hold it,
# also in a process that never opens an S3 store (a core of a file-store run held it)
for var in AWS_CONTAINER_AUTHORIZATION_TOKEN db_password; do
  env "$var=core-secret-$$" TANDEM_TEST_STEP_DELAY_MS=100 "$bin" run "$tmp/c.yaml" --store "$tmp/core-$var" --quiet & pid=$!
  lim=
  for _ in $(seq 50); do
    lim=$(awk '/^Max core file size/ {print $5, $6}' "/proc/$pid/limits" 2>/dev/null)
    [ -n "$lim" ] && grep -q tandem "/proc/$pid/cmdline" 2>/dev/null && break
    sleep 0.05
  done
  sleep 0.2
  lim=$(awk '/^Max core file size/ {print $5, $6}' "/proc/$pid/limits" 2>/dev/null)
  kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  if [ "$lim" = "0 0" ]; then pass "$var in the environment: the process can write no core file"
  else fail "$var in the environment: core file limit" "'$lim' (want 0 0)"; fi
done

# ---------------------------------------------------------------- a credential_process that misbehaves
# A profile's credential_process that hangs, leaves a child behind, closes its output and
# hangs, or prints without end: exit 3 naming the profile and what it did, within the limit
# (2 s here; 60 s by default), with no process of it left running. Before, the last two held
# tandem for ever (waitpid after the output ended) and a hung one's child outlived tandem.
# (the sleeps carry this script's pid: the rel and asan runs of this script may run at once,
# and each looks for and kills only its own)
mark="$$s"
printf '[profile hang]\ncredential_process = sleep 987651.%s; echo\n[profile hangbg]\ncredential_process = echo; sleep 987652.%s & wait\n[profile closes]\ncredential_process = exec >&-; sleep 987653.%s\n[profile long]\ncredential_process = head -c 3000000 /dev/zero; sleep 987654.%s\n' \
  "$mark" "$mark" "$mark" "$mark" >"$tmp/cp.cfg"
for p in hang:"ran past 2 s" hangbg:"ran past 2 s" closes:"ran past 2 s" long:"more than 1 MiB"; do
  prof=${p%%:*} want=${p#*:}
  t0=$SECONDS
  out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN AWS_PROFILE="$prof" \
        AWS_CONFIG_FILE="$tmp/cp.cfg" AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_ENDPOINT_URL=http://127.0.0.1:9 \
        AWS_REGION=us-east-1 TANDEM_TEST_CREDENTIAL_PROCESS_S=2 timeout -k 5 60 "$bin" status s3://bucket/run 2>&1 </dev/null); rc=$?
  left=$(grep -ls "9876[5][1-4][.]$mark" /proc/[0-9]*/cmdline 2>/dev/null | wc -l) # no pgrep on a bare machine
  if [ $rc = 3 ] && grep -q "credential_process of profile '$prof'.*$want" <<<"$out" && [ "$left" = 0 ] &&
     [ $((SECONDS - t0)) -le 10 ]; then pass "a credential_process that misbehaves ($prof): exit 3, named, stopped"
  else fail "a credential_process that misbehaves ($prof)" "exit $rc (124: held for ever), $left of its processes left" "$out"; fi
  for f in $(grep -ls "9876[5][1-4][.]$mark" /proc/[0-9]*/cmdline 2>/dev/null); do f=${f#/proc/}; kill -9 "${f%/cmdline}" 2>/dev/null; done
done

# ---------------------------------------------------------------- gc on a broken α chain
# A run whose config changed (run.episodes 10 -> 20) and whose alpha/5.mp is lost: repair
# rolls it back to a state from before the break. gc --keep 1 deleted those states (it
# kept one older state that verifies by its chunks, not by the chain it vouches for): the
# run could then not be replayed under the changed config, and repair refused ("cannot
# heal this"). gc now refuses a store whose chain is broken below what HEAD vouches for,
# deleting nothing; after repair it collects, and the run finishes.
gcb="$tmp/gc-broken"
mkdir -p "$gcb"
"$bin" gen-corpus --out "$gcb/corpus" --names big,mid,small --train-tokens 20k,8k,3k --val-tokens 2k \
  --test-tokens 2k --seed 4 >/dev/null 2>&1
cat >"$gcb/g.yaml" <<EOF
run: {episodes: 20, seed: 3, threads: 1}
data: {dataset: $gcb/corpus/dataset.yaml}
model: {layers: 1, channels: 32, heads: 2, ctx: 32}
train: {batch: 4, seq: 32}
tandem: {K: 1, E: 1}
optim: {lr: 3e-3}
checkpoint: {every_episodes: 1, keep: 0}
EOF
"$bin" run "$gcb/g.yaml" --store "$gcb/s" --set run.episodes=10 --quiet >/dev/null 2>&1
"$bin" run "$gcb/g.yaml" --store "$gcb/s" --allow-change run.episodes --quiet >/dev/null 2>&1
cp -a "$gcb/s" "$gcb/t"
rm -f "$gcb/s/alpha/5.mp"
before=$(ls "$gcb/s/states" | wc -l)
out=$("$bin" gc "$gcb/s" --keep 1 2>&1); rc=$?
after=$(ls "$gcb/s/states" | wc -l)
"$bin" repair "$gcb/s" --apply >/dev/null 2>&1; rrc=$?
out2=$("$bin" gc "$gcb/s" --keep 1 2>&1); rc2=$?
"$bin" run "$gcb/g.yaml" --store "$gcb/s" --allow-change run.episodes --quiet >/dev/null 2>&1; rc3=$?
if [ $rc = 3 ] && grep -q "refusing to collect garbage: alpha/5.mp is missing.*run tandem repair first" <<<"$out" &&
   [ "$before" -gt 2 ] && [ "$before" = "$after" ] && [ $rrc = 0 ] && [ $rc2 = 0 ] && [ $rc3 = 0 ] &&
   "$bin" verify "$gcb/s" >/dev/null 2>&1; then
  pass "gc refuses a store whose alpha chain is broken below HEAD (nothing deleted); after repair it collects and the run finishes"
else fail "gc on a broken alpha chain" "gc exit $rc ($before -> $after states): $out" "repair $rrc, gc again $rc2: $out2, run $rc3"; fi
# the chain's end lost (alpha/15.mp on): it reads as whole up to alpha/14.mp, while HEAD's
# state vouches for 20 records; gc refuses the same, and repair sets the states aside
rm -f "$gcb"/t/alpha/1[5-9].mp
before=$(ls "$gcb/t/states" | wc -l)
out=$("$bin" gc "$gcb/t" --keep 1 2>&1); rc=$?
after=$(ls "$gcb/t/states" | wc -l)
out2=$("$bin" repair "$gcb/t" 2>&1); rc2=$?
if [ $rc = 3 ] && grep -q "refusing to collect garbage: alpha/15.mp is missing" <<<"$out" && [ "$before" = "$after" ] &&
   [ $rc2 = 0 ] && grep -q "set aside.*alpha/15.mp" <<<"$out2"; then
  pass "gc refuses a store whose alpha chain lost its end below HEAD; repair plans the states that vouch for it"
else fail "gc on an alpha chain that lost its end" "gc exit $rc ($before -> $after states): $out" "repair exit $rc2: $out2"; fi

# ---------------------------------------------------------------- run.threads 0 across resumes
# run.threads 0 ("all cores") was resolved again at every start: a run stopped on 2 threads
# and resumed with OMP_NUM_THREADS=1 (another node, another cpus-per-task) ended on other
# bits, exit 0 and verify clean. It is resolved when the run is created and pinned: the
# resume keeps 2 threads, says so, and ends on the uninterrupted run's hash.
if [ "$(nproc)" -ge 2 ]; then
  thr="$tmp/threads"
  mkdir -p "$thr"
  "$bin" gen-corpus --out "$thr/corpus" --names big,mid,small --train-tokens 20k,8k,3k --val-tokens 2k \
    --test-tokens 2k --seed 4 >/dev/null 2>&1
  cat >"$thr/c.yaml" <<EOF
run: {episodes: 6, seed: 3}
data: {dataset: $thr/corpus/dataset.yaml}
model: {layers: 2, channels: 128, heads: 4, ctx: 64}
train: {batch: 8, seq: 64}
tandem: {K: 1, E: 2, alpha_cut: any}
optim: {lr: 3e-3}
checkpoint: {every_episodes: 3}
EOF
  OMP_NUM_THREADS=2 "$bin" run "$thr/c.yaml" --store "$thr/ref" --quiet >/dev/null 2>&1; r0=$?
  OMP_NUM_THREADS=2 TANDEM_TEST_SIGNAL_AT=free:7 "$bin" run "$thr/c.yaml" --store "$thr/s" --quiet >/dev/null 2>&1; r1=$?
  out=$(OMP_NUM_THREADS=1 "$bin" run "$thr/c.yaml" --store "$thr/s" --quiet 2>&1); r2=$?
  h0=$("$bin" hash "$thr/ref" 2>&1 | head -1) h1=$("$bin" hash "$thr/s" 2>&1 | head -1)
  if [ $r0 = 0 ] && [ $r1 = 75 ] && [ $r2 = 0 ] && [ "$h0" = "$h1" ] &&
     grep -q "run.threads 0 resolved to 2 threads when this run was created" <<<"$out"; then
    pass "run.threads 0 is pinned as resolved: stopped on 2 threads, resumed with OMP_NUM_THREADS=1, the uninterrupted hash"
  else fail "run.threads 0 across resumes" "exits $r0 $r1 $r2; $h0 vs $h1" "$out"; fi
else echo "SKIP run.threads 0 across resumes: needs 2 cores; not counted"; fi

# ---------------------------------------------------------------- a start after a kill before the first state
# A run SIGKILLed before its first full state (RUN and alpha records written) started
# again saying "new run run-<the same id>"; it says it starts again from its seed now.
nr="$tmp/newrun"
mkdir -p "$nr"
sed 's/episodes: 3,/episodes: 12,/; s/every_episodes: 1,/every_episodes: 6,/' "$tmp/c.yaml" >"$nr/c.yaml"
TANDEM_TEST_STEP_DELAY_MS=50 "$bin" run "$nr/c.yaml" --store "$nr/s" --quiet >/dev/null 2>&1 & p=$!
t=0; while [ ! -e "$nr/s/alpha/1.mp" ] && [ $t -lt 600 ]; do sleep 0.05; t=$((t + 1)); done
kill -KILL $p 2>/dev/null; wait $p 2>/dev/null
out=$("$bin" run "$nr/c.yaml" --store "$nr/s" 2>&1); rc=$?
if [ $rc = 0 ] && grep -q "again from its seed (12 episodes): it stopped before its first full state" <<<"$out" &&
   ! grep -q "new run" <<<"$out"; then pass "a start after a kill before the first full state says it starts again, not 'new run'"
else fail "a start after a kill before the first full state" "exit $rc" "$(head -5 <<<"$out")"; fi

# ---------------------------------------------------------------- OpenBLAS kernels
# On a CPU with AVX2 or AVX-512 that this OpenBLAS does not know, tandem must not compute
# with the generic Prescott kernels (2-3.5x slower; model/blas_core.c); a user's
# OPENBLAS_CORETYPE is kept as given.
core=$(env -u OPENBLAS_CORETYPE "$bin" version --json | sed -n 's/.*"blas_core": "\([A-Za-z0-9]*\)".*/\1/p')
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  if [ -n "$core" ] && [ "$core" != Prescott ]; then pass "OpenBLAS runs its $core kernels on this AVX2 CPU"
  else fail "OpenBLAS kernels on an AVX2 CPU" "got '$core'"; fi
else pass "OpenBLAS kernels: no AVX2 here, OpenBLAS's own choice ($core)"; fi
core=$(OPENBLAS_CORETYPE=Prescott "$bin" version --json | sed -n 's/.*"blas_core": "\([A-Za-z0-9]*\)".*/\1/p')
if [ "$core" = Prescott ]; then pass "OPENBLAS_CORETYPE set by the user is kept"
else fail "OPENBLAS_CORETYPE=Prescott" "got '$core'"; fi


# ---------------------------------------------------------------- limits of the process
# A write past the file-size limit (ulimit -f) ended the run by SIGXFSZ: exit 153, nothing
# said, the lease held and a temporary left. It is a store error now (exit 3 naming the
# object and the limit, the lease released, no temporary), and the run resumes to the
# uninterrupted hash. A store path too long for the objects under it was pinned and
# failed at its first commit; it is refused at once (exit 2), nothing created. A store
# directory that cannot be read was "no store at ...: nothing is there"; it is said to be
# unreadable (as another user: root reads anything).
lim="$tmp/limits"
mkdir -p "$lim"
"$bin" run "$tmp/c.yaml" --store "$lim/ref" --quiet >/dev/null 2>&1
out=$( (ulimit -f 4; "$bin" run "$tmp/c.yaml" --store "$lim/f" --quiet) 2>&1 ); rc=$?
lease=$("$bin" status "$lim/f" 2>&1 | grep '^lease')
tmps=$(find "$lim/f" -name '.tmp-*' | wc -l)
"$bin" run "$tmp/c.yaml" --store "$lim/f" --quiet >/dev/null 2>&1; r2=$?
if [ $rc = 3 ] && grep -q "File too large (the process's file-size limit, ulimit -f" <<<"$out" &&
   grep -q "released" <<<"$lease" && [ "$tmps" = 0 ] && [ $r2 = 0 ] &&
   [ "$("$bin" hash "$lim/f" 2>&1)" = "$("$bin" hash "$lim/ref" 2>&1)" ]; then
  pass "a write past ulimit -f: exit 3 naming the limit, the lease released, no temporary; the resume ends on the uninterrupted hash"
else fail "a write past ulimit -f" "exit $rc, then $r2; $lease; $tmps temporaries" "$out"; fi
long="$lim/$(head -c 250 /dev/zero | tr '\0' a)"
for i in $(seq 1 15); do long="$long/$(head -c 250 /dev/zero | tr '\0' b)"; done
out=$("$bin" run "$tmp/c.yaml" --store "$long" 2>&1); rc=$?
if [ $rc = 2 ] && grep -q "bytes long, and the objects under it need up to .* (PATH_MAX): choose a shorter path" <<<"$out" &&
   [ ! -e "$lim/$(head -c 250 /dev/zero | tr '\0' a)" ]; then
  pass "a store path too long for its objects is refused at once (exit 2), nothing created"
else fail "a store path near PATH_MAX" "exit $rc (${#long} bytes)" "$out"; fi
# an address-space limit (ulimit -v, Grid Engine's h_vmem) is part of the memory check: a
# model that fits MemAvailable but not the limit is refused before anything is written
# (exit 2, naming the limit), not "out of memory" (exit 1) later (ASan maps terabytes of
# shadow memory: not under its build)
case $bin in
  */asan/*) echo "SKIP ulimit -v in the memory check: not under ASan; not counted" ;;
  *)
    out=$( (ulimit -v 1500000; "$bin" run "$tmp/c.yaml" --store "$lim/v" --set model.channels=1024 \
      --set model.layers=8 --set model.heads=8) 2>&1 ); rc=$?
    if [ $rc = 2 ] && grep -q "are available (the address-space limit (ulimit -v, RLIMIT_AS))" <<<"$out" &&
       [ ! -e "$lim/v/RUN" ]; then pass "a model past ulimit -v is refused by the memory check (exit 2), nothing written"
    else fail "ulimit -v in the memory check" "exit $rc" "$(tail -3 <<<"$out")"; fi ;;
esac
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  cp -r "$lim/ref" "$lim/closed" && chmod 000 "$lim/closed" && chmod o+x "$tmp" "$lim"
  out=$(setpriv --reuid 65534 --regid 65534 --clear-groups "$bin" verify "$lim/closed" 2>&1); rc=$?
  chmod 700 "$lim/closed" "$tmp"
  if [ $rc = 3 ] && grep -q "cannot read the directory .*Permission denied" <<<"$out" && ! grep -q "no store at" <<<"$out"; then
    pass "a store directory another user cannot read is said to be unreadable, not missing"
  else fail "an unreadable store directory" "exit $rc" "$out"; fi
else echo "SKIP an unreadable store directory: needs root and setpriv; not counted"; fi

# ---------------------------------------------------------------- OpenBLAS kernels pinned in a run
# OpenBLAS picks its kernels by the CPU, and their matmuls round differently: a run
# stopped under one node's kernels and resumed on a node whose OpenBLAS picked others
# ended on other bits (exit 0, verify clean). run.blas_kernels auto is pinned at creation
# as the kernels' name; a resume under others starts again with them (the uninterrupted
# hash), one on a CPU that cannot run them is refused (exit 2, nothing written) until
# the key is changed; tandem eval computes with them too. Two kernel sets this CPU runs:
# SkylakeX and Haswell with AVX-512, Haswell and Sandybridge with AVX2 only.
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo &&
   grep -qw avx512dq /proc/cpuinfo; then ka=SkylakeX kb=Haswell lack=avx512
elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then ka=Haswell kb=Sandybridge lack=avx2
else ka=; fi
if [ -n "$ka" ]; then
  bk="$tmp/blaspin"
  mkdir -p "$bk"
  "$bin" gen-corpus --out "$bk/corpus" --names big,mid,small --train-tokens 20k,8k,3k --val-tokens 2k \
    --test-tokens 2k --seed 4 >/dev/null 2>&1
  cat >"$bk/c.yaml" <<EOF
run: {episodes: 6, seed: 3, threads: 1}
data: {dataset: $bk/corpus/dataset.yaml}
model: {layers: 2, channels: 128, heads: 4, ctx: 64}
train: {batch: 8, seq: 64}
tandem: {K: 1, E: 2}
optim: {lr: 3e-3}
checkpoint: {every_episodes: 3}
EOF
  OPENBLAS_CORETYPE=$ka "$bin" run "$bk/c.yaml" --store "$bk/ref" --quiet >/dev/null 2>&1; r0=$?
  OPENBLAS_CORETYPE=$kb "$bin" run "$bk/c.yaml" --store "$bk/other" --quiet >/dev/null 2>&1
  h0=$("$bin" hash "$bk/ref" 2>&1 | head -1) hb=$("$bin" hash "$bk/other" 2>&1 | head -1)
  OPENBLAS_CORETYPE=$ka TANDEM_TEST_SIGNAL_AT=free:7 "$bin" run "$bk/c.yaml" --store "$bk/s" --quiet >/dev/null 2>&1; r1=$?
  out=$(OPENBLAS_CORETYPE=$kb "$bin" run "$bk/c.yaml" --store "$bk/s" --quiet 2>&1); r2=$?
  h1=$("$bin" hash "$bk/s" 2>&1 | head -1)
  # (the two kernel sets give other bits here, or the resume proves nothing)
  if [ $r0 = 0 ] && [ $r1 = 75 ] && [ $r2 = 0 ] && [ "$h0" = "$h1" ] && [ "$h0" != "$hb" ] &&
     grep -q "OpenBLAS's $ka kernels (pinned when it was created.*starting again with OPENBLAS_CORETYPE=$ka" <<<"$out"; then
    pass "run.blas_kernels: stopped under $ka, resumed where OpenBLAS picked $kb, starts again with $ka: the uninterrupted hash"
  else fail "run.blas_kernels across resumes" "exits $r0 $r1 $r2; $h0 vs $h1 (other kernels: $hb)" "$out"; fi
  e1=$(OPENBLAS_CORETYPE=$ka "$bin" eval "$bk/ref" --json 2>&1) e2=$(OPENBLAS_CORETYPE=$kb "$bin" eval "$bk/ref" --json 2>/dev/null)
  e3=$(OPENBLAS_CORETYPE=$kb "$bin" eval "$bk/other" --json 2>/dev/null)
  if [ -n "$e1" ] && [ "$e1" = "$e2" ] && [ "$e2" != "$e3" ]; then
    pass "tandem eval of a run pinned to $ka computes with $ka whatever this node's OpenBLAS picked"
  else fail "tandem eval with the run's kernels" "$e1" "$e2"; fi
  OPENBLAS_CORETYPE=$ka TANDEM_TEST_SIGNAL_AT=free:7 "$bin" run "$bk/c.yaml" --store "$bk/n" --quiet >/dev/null 2>&1
  before=$("$bin" status "$bk/n" 2>&1 | grep '^position') n0=$(find "$bk/n" -type f | wc -l)
  out=$(OPENBLAS_CORETYPE=$kb TANDEM_TEST_CPU_LACKS=$lack "$bin" run "$bk/c.yaml" --store "$bk/n" 2>&1); r3=$?
  after=$("$bin" status "$bk/n" 2>&1 | grep '^position') n1=$(find "$bk/n" -type f | wc -l)
  out2=$(OPENBLAS_CORETYPE=$kb TANDEM_TEST_CPU_LACKS=$lack "$bin" run "$bk/c.yaml" --store "$bk/n" \
    --set run.blas_kernels=$kb --allow-change run.blas_kernels --quiet 2>&1); r4=$?
  if [ $r3 = 2 ] && [ "$before" = "$after" ] && [ "$n0" = "$n1" ] &&
     grep -q "run.blas_kernels = $ka: .*this CPU lacks .*--set run.blas_kernels=$kb --allow-change run.blas_kernels" <<<"$out" &&
     [ $r4 = 0 ] && "$bin" verify "$bk/n" >/dev/null 2>&1; then
    pass "run.blas_kernels: a CPU that cannot run the pinned $ka kernels is refused (exit 2, nothing written) until the key changes"
  else fail "run.blas_kernels on a CPU without them" "exits $r3 $r4; $before / $after; files $n0 / $n1" "$out" "$out2"; fi
  # one command meets runs pinned to two kernel sets (a sweep's points): results
  # evaluates both with the kernels in use, says so once, and does not start itself again
  # and again (it did, for ever); tandem eval on a CPU that cannot run a run's kernels
  # evaluates with its own, said, instead of a refusal
  for p in 0 1; do
    OPENBLAS_CORETYPE=$ka "$bin" run "$bk/c.yaml" --store "$bk/sw" --sweep run.blas_kernels=$ka,$kb --point $p \
      --quiet >/dev/null 2>&1
  done
  out=$(OPENBLAS_CORETYPE=$ka timeout 120 "$bin" results "$bk/sw" 2>&1); r5=$?
  out2=$(OPENBLAS_CORETYPE=$kb TANDEM_TEST_CPU_LACKS=$lack "$bin" eval "$bk/ref" --json 2>&1); r6=$?
  if [ $r5 = 0 ] && [ "$(grep -c "note: evaluating with OpenBLAS's $ka kernels, not the $kb ones" <<<"$out")" = 1 ] &&
     ! grep -q "starting again" <<<"$out" && [ $r6 = 0 ] && grep -q '"average_ppl"' <<<"$out2" &&
     grep -q "note: evaluating with OpenBLAS's $kb kernels, not the $ka ones the run pinned" <<<"$out2"; then
    pass "runs pinned to two kernel sets in one command (results), and eval where the pinned ones cannot run: the kernels in use, said once"
  else fail "results and eval across pinned kernels" "exits $r5 $r6" "$(tail -5 <<<"$out")" "$(tail -3 <<<"$out2")"; fi
else echo "SKIP run.blas_kernels: neither AVX-512 nor AVX2 here; not counted"; fi

# ---------------------------------------------------------------- a background commit that fails
# A commit written in the background that fails stops the run at the next step, with the
# error naming the object (exit 3), not at the next commit a whole checkpoint interval
# later (meanwhile nothing was saved: a SIGKILL then lost two intervals). The store
# resumes to the bits of a run that never failed.
bf="$tmp/bgfail"
mkdir -p "$bf"
sed 's/episodes: 3,/episodes: 9,/; s/every_episodes: 1,/every_episodes: 3,/' "$tmp/c.yaml" >"$bf/c.yaml"
# the manifest of the commit at episode 3 is refused; the next commit would be at episode 6
out=$(TANDEM_TEST_FAIL_AT=state-put:1 TANDEM_TEST_STEP_DELAY_MS=100 "$bin" run "$bf/c.yaml" --store "$bf/s" \
      --quiet 2>&1); rc=$?
rows=$(ls "$bf/s/metrics" 2>/dev/null | grep -c '\.mp$')
if [ $rc = 3 ] && grep -q "$bf/s/states/[0-9]*\.mp: the store refused the write" <<<"$out" && [ "$rows" -le 4 ]; then
  pass "a failed background commit stops the run at the next step (exit 3 naming the state, $rows episodes, not 6)"
else fail "a failed background commit stops the run at the next step" "exit $rc, $rows episodes ran" "$out"; fi
out=$("$bin" run "$bf/c.yaml" --store "$bf/s" --quiet 2>&1); rc=$?
"$bin" run "$bf/c.yaml" --store "$bf/ref" --quiet >/dev/null 2>&1; rc2=$?
h1=$("$bin" hash "$bf/s" 2>&1); h2=$("$bin" hash "$bf/ref" 2>&1)
if [ $rc = 0 ] && [ $rc2 = 0 ] && [ -n "$h1" ] && [ "$h1" = "$h2" ]; then
  pass "resumed after the failed commit: the same tandem hash as a run that never failed"
else fail "resumed after the failed commit" "exit $rc / $rc2" "$out" "$h1" "$h2"; fi

# ---------------------------------------------------------------- a holder in another PID namespace
# From another PID namespace on the same host name (a container sharing the node's name)
# a live run's pid does not exist: status called it "STALE ... the holder is gone" and gc
# went ahead beside it. The lease records the holder's namespace and boot; a pid is
# judged only from the same ones, elsewhere by the holder's last sign of life (root only:
# unshare).
if unshare --pid --fork --mount-proc true 2>/dev/null; then
  ns="$tmp/pidns"
  mkdir -p "$ns"
  sed 's/episodes: 3,/episodes: 400,/' "$tmp/c.yaml" >"$ns/c.yaml"
  live() { # waits (up to 60 s) for the run to hold the lease and commit a state
    local t=0
    while [ $t -lt 600 ] && ! { [ -e "$1/HEAD" ] && "$bin" status "$1" 2>/dev/null | grep -q "^lease .*held since"; }; do
      sleep 0.1; t=$((t + 1))
    done
  }
  # a live holder here, judged from a new PID namespace: held, gc refuses
  TANDEM_TEST_STEP_DELAY_MS=20 "$bin" run "$ns/c.yaml" --store "$ns/a" --quiet >/dev/null 2>&1 & p=$!
  live "$ns/a"
  st=$(unshare --pid --fork --mount-proc "$bin" status "$ns/a" 2>&1)
  gc=$(unshare --pid --fork --mount-proc "$bin" gc "$ns/a" --keep 1 2>&1); gcrc=$?
  here=$("$bin" status "$ns/a" 2>&1)
  if grep -q "^lease .*held since .*another PID namespace" <<<"$st" && ! grep -q STALE <<<"$st" &&
     [ $gcrc = 2 ] && grep -q "holds the lease" <<<"$gc" && grep -q "pid $p is alive on this host" <<<"$here"; then
    pass "a live holder seen from another PID namespace: held, gc refuses (exit 2)"
  else fail "a live holder seen from another PID namespace" "status there: $st" "gc there: exit $gcrc: $gc" "here: $here"; fi
  # killed: in its own namespace it is still recognised as gone
  kill -KILL $p 2>/dev/null; wait $p 2>/dev/null
  st=$("$bin" status "$ns/a" 2>&1)
  if grep -q "^lease .*STALE.*no process $p on this host" <<<"$st"; then
    pass "the killed holder, judged from its own namespace: stale"
  else fail "the killed holder, judged from its own namespace" "$st"; fi
  # the other way: a holder inside a PID namespace, judged from here (held) and, once
  # killed, from inside its namespace (stale), while gc here still refuses
  unshare --pid --fork --mount-proc /bin/bash -c '
    TANDEM_TEST_STEP_DELAY_MS=20 "$1" run "$2/c.yaml" --store "$2/b" --quiet >/dev/null 2>&1 & p=$!
    t=0; while [ $t -lt 600 ] && ! { [ -e "$2/b/HEAD" ] && "$1" status "$2/b" 2>/dev/null | grep -q "^lease .*held since"; }; do
      sleep 0.1; t=$((t + 1)); done
    touch "$2/ready"
    t=0; while [ $t -lt 600 ] && [ ! -e "$2/go" ]; do sleep 0.1; t=$((t + 1)); done
    kill -KILL $p; wait $p 2>/dev/null
    echo "inside after the kill: $("$1" status "$2/b" 2>&1 | grep "^lease")"' _ "$bin" "$ns" >"$ns/inside.txt" 2>&1 & q=$!
  t=0; while [ $t -lt 600 ] && [ ! -e "$ns/ready" ]; do sleep 0.1; t=$((t + 1)); done
  st=$("$bin" status "$ns/b" 2>&1)
  touch "$ns/go"; wait $q
  out=$(cat "$ns/inside.txt")
  gc=$("$bin" gc "$ns/b" --keep 1 2>&1); gcrc=$?
  if grep -q "^lease .*held since .*another PID namespace" <<<"$st" &&
     grep -q "^inside after the kill: lease .*STALE.*no process [0-9]* on this host" <<<"$out" &&
     [ $gcrc = 2 ] && grep -q "holds the lease.*another PID namespace" <<<"$gc"; then
    pass "a holder in a PID namespace: held from here, stale there once killed; gc here refuses (exit 2)"
  else fail "a holder in a PID namespace, judged from here and from there" "from here, live: $st" "$out" \
            "gc here: exit $gcrc: $gc"; fi
else echo "SKIP a holder in another PID namespace: no unshare --pid here (not root); not counted"; fi

# ---------------------------------------------------------------- a stop while .lock is held
# A writer frozen inside a compare-and-swap holds STORE/.lock (flock stands for it). A stop
# signal during the wait for it was heard only once the lock was free: at start-up past
# the grace period (exit 75 27.8 s after SIGTERM with 10 s of grace), mid-run the wait ran
# the lock timeout twice and exited 3, which no scheduler requeues (hunt). Now the wait
# ends at the stop's deadline (grace less 2 s), or without a grace at the timeout once,
# and the run exits 75; the store verifies, and once the lock is free the run finishes.
lk="$tmp/lockwait"
mkdir -p "$lk"
sed "s/episodes: 3/episodes: 400/" "$tmp/c.yaml" >"$lk/c.yaml"
"$bin" run "$lk/c.yaml" --store "$lk/s" --quiet >/dev/null 2>&1 & p=$!
t=0; while [ $t -lt 300 ] && [ ! -e "$lk/s/HEAD" ]; do sleep 0.1; t=$((t + 1)); done
kill -TERM $p; wait $p; st0=$?
flock "$lk/s/.lock" sleep 60 & fp=$!
sleep 0.3
TANDEM_GRACE_S=6 "$bin" run "$lk/c.yaml" --store "$lk/s" >/dev/null 2>"$lk/e1" & p=$!
sleep 1; kill -TERM $p; t0=$(date +%s%N); wait $p; st1=$?; t1=$(( ($(date +%s%N) - t0) / 1000000 ))
kill $fp; wait $fp 2>/dev/null
TANDEM_STORE_LOCK_TIMEOUT_S=3 "$bin" run "$lk/c.yaml" --store "$lk/s" >/dev/null 2>"$lk/e2" & p=$!
sleep 1.5
flock "$lk/s/.lock" sleep 60 & fp=$!
sleep 0.3; kill -TERM $p; t0=$(date +%s%N); wait $p; st2=$?; t2=$(( ($(date +%s%N) - t0) / 1000000 ))
kill $fp; wait $fp 2>/dev/null
"$bin" verify "$lk/s" >"$lk/v" 2>&1; st3=$?
if [ $st0 = 75 ] && [ $st1 = 75 ] && [ $t1 -lt 6000 ] && grep -q "given up for the stop" "$lk/e1" &&
   [ $st2 = 75 ] && [ $t2 -lt 6000 ] && [ "$(grep -c "waiting for .*\.lock" "$lk/e2")" -le 1 ] && [ $st3 = 0 ]; then
  pass "a stop while .lock is held: exit 75 at the stop's deadline (start-up) or after one timeout (mid-run), store sound"
else fail "a stop while .lock is held" "exits $st0 $st1 (${t1} ms) $st2 (${t2} ms), verify $st3" "$(tail -2 "$lk/e1")" \
  "$(tail -3 "$lk/e2")"; fi
rm -rf "$lk"

finish
