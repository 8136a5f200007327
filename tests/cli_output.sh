#!/usr/bin/env bash
# cli_output.sh — what tandem does when its output cannot go where it should, through the
# binary:
#   - started with stdout or stderr closed, a run's files never receive what it prints
#     (the store verifies clean, no event or progress text inside it): descriptors 0-2 are
#     held by /dev/null before anything is opened (cli/main.c);
#   - a command whose standard output cannot be written (/dev/full, closed) exits 1
#     naming the real reason (ENOSPC, EBADF: the first failed write's), never 0 with its
#     table, mixture or manifest lost;
#   - `run --json | reader` whose reader goes away: the run is not killed by SIGPIPE
#     (no stop commit), it says once that its events stop, finishes, and exits 1;
#   - files named by --plot, --svg, --out and --tensorboard are whole or absent: on a full
#     file system (a small tmpfs, where this machine lets root mount one) the command
#     fails naming the path, leaves no file under that name, keeps an earlier good one as
#     it was and leaves no temporary behind; a SIGTERM while writing leaves nothing;
#   - an output path is local: a URL (s3://, gs://, https://, file://) given to --out,
#     --plot, --tensorboard or log.tensorboard is refused (exit 2), nothing written, a
#     secret in it never said;
#   - `tandem metrics`' table gives each domain its whole name (two long names sharing a
#     prefix stay apart) and every row lines up under its header.
# Prints PASS/FAIL lines and "cli_output: N passed, M failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/.." || exit 1
SUITE=cli_output
. tests/lib_cli.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tandem-output-XXXXXX")
mnt=
trap '[ -n "$mnt" ] && umount "$mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
[ -x "$bin" ] || { fail setup "no tandem binary at $bin"; finish; }

"$bin" gen-corpus --out "$tmp/corpus" --names web,code --train-tokens 4k,2k --val-tokens 2k \
  --test-tokens 2k >/dev/null 2>&1 || { fail setup "gen-corpus"; finish; }
conf() { # conf EPISODES EVERY > yaml
  cat <<Y
run: {episodes: $1, seed: 1, device: cpu, threads: 1}
data: {dataset: $tmp/corpus/dataset.yaml, mixing: weight}
model: {layers: 2, channels: 64, heads: 2, ctx: 16}
train: {batch: 2, seq: 16}
tandem: {K: 1, E: 1}
checkpoint: {every_episodes: $2, keep: 0}
Y
}
conf 10 1 >"$tmp/c.yaml"
conf 40 40 >"$tmp/long.yaml"

# ------------------------------------------------ closed descriptors: nothing in the store
# (every episode commits in the background while the main thread prints: before, the first
# object opened took number 1 or 2 and JSON events landed inside states and blobs)
for which in out err; do
  bad=
  for i in 1 2 3; do
    rm -rf "$tmp/s-$which"
    if [ $which = out ]; then "$bin" run "$tmp/c.yaml" --store "$tmp/s-$which" --json >&- 2>"$tmp/err-$which"; rc=$?
    else "$bin" run "$tmp/c.yaml" --store "$tmp/s-$which" 2>&- >/dev/null; rc=$?; fi
    hit=$(grep -rlaE '"event"|tok/s|tandem: ' "$tmp/s-$which" --exclude=.lock)
    "$bin" verify "$tmp/s-$which" >/dev/null 2>&1 || bad="try $i: verify fails"
    [ -n "$hit" ] && bad="try $i: text inside $hit"
    if [ $which = out ]; then
      [ $rc = 1 ] && grep -q "standard output can no longer be written" "$tmp/err-$which" || bad="try $i: exit $rc, $(head -c 300 "$tmp/err-$which")"
    else [ $rc = 0 ] || bad="try $i: exit $rc"; fi
    [ -n "$bad" ] && break
  done
  if [ -z "$bad" ]; then pass "run with std$which closed: the store verifies, no printed text in it$([ $which = out ] && echo ', exit 1 saying the events were lost')"
  else fail "run with std$which closed" "$bad"; fi
done

# ------------------------------------------------ standard output that cannot be written
st=$tmp/s-err
for cmd in "status $st" "hash $st" "alpha $st" "alpha $st --format json" "mixture $st" \
  "metrics $st --format csv" "verify $st" "version" "manifest slurm $tmp/c.yaml"; do
  # shellcheck disable=SC2086
  # exit 1 for every command, naming the real reason (before: manifest exited 2, the usage
  # code, and said "Input/output error" for both: stdio had lost the failed write's errno)
  out=$("$bin" $cmd 2>&1 >/dev/full); rc=$?
  if [ $rc = 1 ] && grep -q "could not be written (No space left on device)" <<<"$out" &&
     ! grep -q "Input/output error" <<<"$out"; then
    pass "$cmd > /dev/full: exit 1, ENOSPC said"
  else fail "$cmd > /dev/full" "exit $rc" "$out"; fi
  # shellcheck disable=SC2086
  out=$("$bin" $cmd 2>&1 >&-); rc=$?
  if [ $rc = 1 ] && grep -q "could not be written (Bad file descriptor)" <<<"$out" &&
     ! grep -q "Input/output error" <<<"$out"; then pass "$cmd >&-: exit 1, EBADF said"
  else fail "$cmd >&-" "exit $rc" "$out"; fi
done
out=$("$bin" manifest slurm "$tmp/c.yaml" --out /dev/full 2>&1); rc=$?
if [ $rc = 2 ] && grep -q -- "--out /dev/full: .*No space left on device" <<<"$out" && ! grep -q "Input/output" <<<"$out"; then
  pass "manifest --out /dev/full: exit 2 as a file that cannot be written, ENOSPC said"
else fail "manifest --out /dev/full" "exit $rc" "$out"; fi
# a run whose events stop: the reason said at the end is the first one (before: "Input/output
# error" after "No space left on device")
rm -rf "$tmp/s-full"
"$bin" run "$tmp/c.yaml" --store "$tmp/s-full" --json >/dev/full 2>"$tmp/err-full"; rc=$?
if [ $rc = 1 ] && grep -q "standard output could not be written (No space left on device)" "$tmp/err-full" &&
   ! grep -q "Input/output error" "$tmp/err-full"; then pass "run --json > /dev/full: exit 1, ENOSPC said to the end"
else fail "run --json > /dev/full" "exit $rc" "$(tail -c 400 "$tmp/err-full")"; fi

# ------------------------------------------------ a reader of the events that goes away
"$bin" run "$tmp/long.yaml" --store "$tmp/s-pipe" --json 2>"$tmp/err-pipe" | head -c 300 >/dev/null
rc=${PIPESTATUS[0]}
stat=$("$bin" status "$tmp/s-pipe" --json 2>/dev/null)
if [ "$rc" = 1 ] && grep -q "events stop here" "$tmp/err-pipe" && grep -q '"finished":true' <<<"$stat" &&
   "$bin" verify "$tmp/s-pipe" >/dev/null 2>&1; then
  pass "run --json | head: not killed by SIGPIPE; said once, finished, exit 1"
else fail "run --json | head" "exit $rc (141: killed by SIGPIPE)" "$(head -c 400 "$tmp/err-pipe")" "$stat"; fi

# ------------------------------------------------ output files on a full file system
mnt=$tmp/full
mkdir -p "$mnt"
if mount -t tmpfs -o size=12k tmpfs "$mnt" 2>/dev/null; then
  "$bin" alpha "$st" --plot "$mnt/a.svg" >/dev/null 2>&1 # small enough: a good earlier file
  good=$(cksum <"$mnt/a.svg" 2>/dev/null)
  head -c 8000 /dev/zero >"$mnt/filler" 2>/dev/null # what is left no longer holds one
  for cmd in "alpha $st --plot $mnt/a.svg" "metrics $st --plot $mnt/m.svg" \
    "metrics $st --tensorboard $mnt/tb" "mixture $st --out $mnt/mix.yaml" \
    "manifest slurm $tmp/c.yaml --out $mnt/job.sbatch"; do
    # shellcheck disable=SC2086
    out=$("$bin" $cmd 2>&1 >/dev/null); rc=$?
    path=${cmd##* }
    left=$(find "$mnt" -name '*.tmp*' | head -3)
    ok=1
    [ $rc = 2 ] && grep -q "$path" <<<"$out" || ok=0
    [ -z "$left" ] || ok=0
    case $path in
      */a.svg) [ "$(cksum <"$path")" = "$good" ] || ok=0 ;;
      */tb) [ -z "$(find "$path" -type f 2>/dev/null)" ] || ok=0 ;;
      *) [ ! -e "$path" ] || ok=0 ;;
    esac
    if [ $ok = 1 ]; then pass "$cmd on a full disk: exit 2 naming it, nothing cut under its name, no temporary"
    else fail "$cmd on a full disk" "exit $rc" "$out" "left: $left $(ls -la "$mnt" "$mnt/tb" 2>&1 | tr '\n' ' ')"; fi
  done
  # prep whose shards cannot fit: refused before its first byte (before: the disk filled,
  # then exit 1), the space it would need and what is free said
  for i in $(seq 200); do printf '{"text": "%0300d"}\n' "$i"; done >"$tmp/big.jsonl"
  out=$("$bin" prep --domain a="$tmp/big.jsonl" --out "$mnt/corpus" --split 0.5,0.5,0 2>&1); rc=$?
  if [ $rc = 3 ] && grep -q "the shards need" <<<"$out" && [ ! -e "$mnt/corpus" ]; then
    pass "prep into too little space: exit 3 before writing, the sizes said"
  else fail "prep into too little space" "exit $rc" "$out" "$(ls -la "$mnt" 2>&1 | tr '\n' ' ')"; fi
  umount "$mnt"
  mnt=
else
  echo "SKIP full file system: cannot mount a tmpfs here (needs root)"
fi

# ------------------------------------------------ what is at the path decides how it is written
# a link stays a link (the file it names is replaced, keeping its mode); what is not a
# regular file (/dev/stdout, a FIFO) is written directly, a FIFO only once a process reads
# it; a missing directory is exit 2
out=$("$bin" mixture "$st" --out /dev/stdout 2>/dev/null); rc=$?
if [ $rc = 0 ] && grep -q '^mixture:' <<<"$out"; then pass "mixture --out /dev/stdout: the YAML on stdout"
else fail "mixture --out /dev/stdout" "exit $rc" "$out"; fi
echo old >"$tmp/target.yaml"; chmod 640 "$tmp/target.yaml"; ln -sf target.yaml "$tmp/link.yaml"
"$bin" mixture "$st" --out "$tmp/link.yaml" 2>/dev/null; rc=$?
if [ $rc = 0 ] && [ -L "$tmp/link.yaml" ] && grep -q '^mixture:' "$tmp/target.yaml" &&
   [ "$(stat -c %a "$tmp/target.yaml")" = 640 ]; then pass "mixture --out LINK: the link stays, its file replaced with its mode"
else fail "mixture --out LINK" "exit $rc" "$(ls -la "$tmp"/link.yaml "$tmp"/target.yaml)"; fi
mkfifo "$tmp/fifo"
(cat "$tmp/fifo" >"$tmp/fifo.out") & reader=$!
"$bin" alpha "$st" --plot "$tmp/fifo" >/dev/null 2>&1; rc=$?
wait $reader
if [ $rc = 0 ] && grep -q '</svg>' "$tmp/fifo.out" && [ -p "$tmp/fifo" ]; then pass "alpha --plot FIFO: written through it, the FIFO stays"
else fail "alpha --plot FIFO" "exit $rc" "$(head -c 100 "$tmp/fifo.out")"; fi
# a FIFO no process reads: exit 2 naming the option and the path within seconds (before:
# open(2) waited for a reader for ever)
mkfifo "$tmp/lonely"
for c in "manifest slurm $tmp/c.yaml --out" "mixture $st --out" "alpha $st --plot"; do
  out=$(timeout -k 5 30 "$bin" $c "$tmp/lonely" 2>&1 </dev/null); rc=$?
  if [ $rc = 2 ] && grep -q -- "--[a-z]* $tmp/lonely is a FIFO that no process reads" <<<"$out"; then
    pass "${c%% *} into a FIFO without a reader: exit 2 naming it"
  else fail "${c%% *} into a FIFO without a reader" "exit $rc (124: it hung)" "$out"; fi
done
for kind in slurm k8s; do
  out=$("$bin" manifest $kind "$tmp/c.yaml" --out "$tmp/no/such/dir/job" 2>&1); rc=$?
  if [ $rc = 2 ] && grep -q "no/such/dir/job" <<<"$out"; then pass "manifest $kind --out in a missing directory: exit 2 naming it"
  else fail "manifest $kind --out in a missing directory" "exit $rc (139: a crash)" "$out"; fi
done

# ------------------------------------------------ a SIGTERM while the history is written
"$bin" run "$tmp/long.yaml" --store "$tmp/s-tb" --quiet >/dev/null 2>&1
"$bin" metrics "$tmp/s-tb" --tensorboard "$tmp/tb-ref" >/dev/null 2>&1
full=$(cat "$tmp"/tb-ref/* | wc -c)
if command -v strace >/dev/null; then
  strace -f -o /dev/null -e trace=write -e inject=write:delay_enter=200000 \
    "$bin" metrics "$tmp/s-tb" --tensorboard "$tmp/tb" >/dev/null 2>&1 &
  sp=$!
  for _ in $(seq 100); do pid=$(pgrep -P $sp -x tandem) && [ -n "$(ls -A "$tmp/tb" 2>/dev/null)" ] && break; sleep 0.05; done
  sleep 0.5
  kill -TERM "$pid" 2>/dev/null
  wait $sp
  left=$(find "$tmp/tb" -type f -printf '%f (%s bytes) ')
  if [ -z "$left" ] && [ "$full" -gt 1000 ]; then pass "SIGTERM while --tensorboard writes: nothing left (a whole file has $full bytes)"
  else fail "SIGTERM while --tensorboard writes" "left: $left" "(whole: $full bytes)"; fi
else
  echo "SKIP SIGTERM while --tensorboard writes: no strace to slow the writes"
fi
# the same for prep's shards and an export's weights (before: three shard-sized
# temporaries, and one as large as the model, were left until a later run swept them); and
# for every stop signal, not TERM, INT and HUP alone (QUIT and USR2 left prep's shards)
if command -v strace >/dev/null; then
  ulimit -c 0 # SIGQUIT's default action dumps core (into the repository, the working directory)
  printf '{"text": "%s"}\n' $(seq 2000) >"$tmp/slow.jsonl"
  "$bin" run "$tmp/c.yaml" --store "$tmp/s-exp" --quiet >/dev/null 2>&1
  for case in prep:TERM export:TERM prep:QUIT prep:USR2; do
    what=${case%%:*} sig=${case#*:}
    rm -rf "$tmp/slow-out"
    if [ $what = prep ]; then args=(prep --domain a="$tmp/slow.jsonl" --out "$tmp/slow-out" --split 0.5,0.5,0 --shard-tokens 256)
    else mkdir -p "$tmp/slow-out"; args=(export "$tmp/s-exp" --out "$tmp/slow-out"); fi
    strace -f -o /dev/null -e trace=write -e inject=write:delay_enter=100000 "$bin" "${args[@]}" >/dev/null 2>&1 &
    sp=$!
    pid=
    # export: the weights' temporary, as large as the model (it comes last)
    pat='*tmp*'; [ $what = export ] && pat='model.safetensors.tmp*'
    for _ in $(seq 200); do pid=$(pgrep -P $sp -x tandem) && [ -n "$(find "$tmp/slow-out" -name "$pat" 2>/dev/null)" ] && break; sleep 0.05; done
    seen=$(find "$tmp/slow-out" -name "$pat" | wc -l)
    kill -"$sig" "$pid" 2>/dev/null
    wait $sp
    left=$(find "$tmp/slow-out" -name '*tmp*' -printf '%f ')
    if [ "$seen" -gt 0 ] && [ -z "$left" ]; then pass "SIG$sig while $what writes: its temporaries removed"
    else fail "SIG$sig while $what writes" "seen $seen temporaries, left: $left"; fi
  done
fi
# ------------------------------------------------ a live log's name already taken
# events.out.tfevents.<second>.<host>.<pid> of an earlier life: a container's PID 1
# restarted within the same second (before: exit 2, "fix the path", a config error that
# fails a Kubernetes Job for good); the run takes NAME.1 and logs there. The pid is the
# shell's, kept by exec.
mkdir -p "$tmp/tb-taken"
out=$(sh -c 'now=$(date +%s); for s in $(seq $now $((now + 20))); do : >"$1/events.out.tfevents.$s.$(uname -n).$$"; done
             exec "$2" run "$3" --store "$4" --quiet --set log.tensorboard="$1"' \
        sh "$tmp/tb-taken" "$bin" "$tmp/c.yaml" "$tmp/s-taken" 2>&1); rc=$?
"$bin" metrics "$tmp/s-taken" --format jsonl >"$tmp/taken.jsonl" 2>/dev/null
logged=$(find "$tmp/tb-taken" -name 'events.out.tfevents.*.1' -size +0)
chk=$([ -n "$logged" ] && /usr/bin/python3 tests/metrics/tfcheck.py "$tmp/taken.jsonl" $logged)
if [ $rc = 0 ] && [ "$(find "$tmp/tb-taken" -type f -size 0 | wc -l)" = 21 ] && [ "${chk%% *}" = ok ]; then
  pass "a live log's name taken (a PID 1 restarted in the same second): exit 0, logged as NAME.1 ($chk)"
else fail "a live log's name taken" "exit $rc: $out" "logged: $logged: $chk"; fi
# ------------------------------------------------ the metrics table: whole domain names
"$bin" gen-corpus --out "$tmp/longnames" --names changelog_upstream,changelog_debian,js \
  --train-tokens 3k --val-tokens 2k --test-tokens 2k >/dev/null 2>&1
conf 3 3 | sed -e "s|$tmp/corpus/|$tmp/longnames/|" -e "s|batch: 2,|batch: 3,|" >"$tmp/ln.yaml"
"$bin" run "$tmp/ln.yaml" --store "$tmp/s-ln" --quiet >/dev/null 2>&1
tab=$("$bin" metrics "$tmp/s-ln" 2>&1)
# every name whole in each of the three groups (loss, alpha, epochs); the first row's
# numbers end where the header's names end (right-aligned columns of the same width)
hdr=$(sed -n 1p <<<"$tab"); row=$(sed -n 3p <<<"$tab")
n_up=$(grep -o "changelog_upstream" <<<"$hdr" | wc -l); n_deb=$(grep -o "changelog_debian" <<<"$hdr" | wc -l)
ends() { # ends LINE: the column where each '|' stands
  awk -v s="$1" 'BEGIN { for (i = 1; i <= length(s); i++) if (substr(s, i, 1) == "|") printf "%d ", i }'
}
if [ "$n_up" = 3 ] && [ "$n_deb" = 3 ] && [ -n "$(ends "$hdr")" ] && [ "$(ends "$hdr")" = "$(ends "$row")" ] &&
   [ "$(wc -l <<<"$tab")" = 5 ]; then
  pass "metrics table: long domain names whole in all three groups, rows aligned under them"
else fail "metrics table with long domain names" "$tab"; fi
# names longer than a header (32 characters) sharing a 40-character prefix: each header
# keeps the start and the end around a '~', so they stay apart (before: both cut to the
# same 32 characters, though the docs said the width keeps them apart)
P=slimpajama_commoncrawl_2023_dedup_shard_
"$bin" gen-corpus --out "$tmp/longer" --names ${P}a,${P}b,js \
  --train-tokens 3k --val-tokens 2k --test-tokens 2k >/dev/null 2>&1
conf 3 3 | sed -e "s|$tmp/corpus/|$tmp/longer/|" -e "s|batch: 2,|batch: 3,|" >"$tmp/ln2.yaml"
"$bin" run "$tmp/ln2.yaml" --store "$tmp/s-ln2" --quiet >/dev/null 2>&1
tab=$("$bin" metrics "$tmp/s-ln2" 2>&1)
hdr=$(sed -n 1p <<<"$tab"); row=$(sed -n 3p <<<"$tab")
labels=$(grep -o "slimpajama[^ ]*" <<<"$hdr")
if [ "$(wc -l <<<"$labels")" = 6 ] && [ "$(sort -u <<<"$labels" | wc -l)" = 2 ] &&
   [ "$(ends "$hdr")" = "$(ends "$row")" ]; then
  pass "metrics table: names longer than a header sharing a prefix stay apart ($(sort -u <<<"$labels" | tr '\n' ' '))"
else fail "metrics table with names longer than a header" "$tab"; fi

# ------------------------------------------------ a chart and a listing format at once
# --plot (or --tensorboard) replaces the listing: a --format beside it was silently ignored
# (exit 0, nothing on stdout); now exit 2 saying so, and no chart written
bad=
for c in "alpha $st --format csv --plot $tmp/fa.svg" "metrics $st --format csv --plot $tmp/fm.svg" \
         "metrics $st --format jsonl --tensorboard $tmp/ftb"; do
  out=$("$bin" $c 2>&1); rc=$?
  [ $rc = 2 ] && grep -q "give one" <<<"$out" || bad="$bad [$c: exit $rc: $out]"
done
if [ -z "$bad" ] && [ ! -e "$tmp/fa.svg" ] && [ ! -e "$tmp/fm.svg" ] && [ ! -e "$tmp/ftb" ]; then
  pass "--format beside --plot or --tensorboard: exit 2 saying which, nothing written"
else fail "--format beside --plot" "$bad"; fi
# an empty path is said as such (before: "--plot : cannot put it in place: No such file")
o1=$("$bin" alpha "$st" --plot '' 2>&1); e1=$?
o2=$("$bin" export "$st" --out '' 2>&1); e2=$?
if [ "$e1$e2" = 22 ] && grep -q -- "--plot: an empty path" <<<"$o1" && grep -q -- "--out: an empty path" <<<"$o2"; then
  pass "an empty --plot or --out path: exit 2, said as such"
else fail "an empty --plot or --out path" "exits $e1 $e2" "$o1" "$o2"; fi

# ------------------------------------------------ one prep into one --out at a time
# while another holds DIR/.tandem-prep.lock (flock(1) stands in for a prep that is
# writing), prep and gen-corpus into DIR are refused (exit 2, saying why) and write nothing
# (before: both ran, one description over the other's shards); after, they run
printf '{"text": "one"}\n{"text": "two"}\n{"text": "three"}\n' >"$tmp/three.jsonl"
mkdir -p "$tmp/locked"
flock "$tmp/locked/.tandem-prep.lock" sleep 4 &
holder=$!
sleep 0.5
p_out=$("$bin" prep --domain a="$tmp/three.jsonl" --out "$tmp/locked" --split 0.5,0.5,0 2>&1); p_rc=$?
g_out=$("$bin" gen-corpus --out "$tmp/locked" --names a,b --train-tokens 1k --val-tokens 1k --test-tokens 1k 2>&1); g_rc=$?
left=$(ls "$tmp/locked")
wait $holder
"$bin" prep --domain a="$tmp/three.jsonl" --out "$tmp/locked" --split 0.5,0.5,0 >/dev/null 2>&1; after=$?
if [ $p_rc = 2 ] && [ $g_rc = 2 ] && grep -q "another tandem prep or gen-corpus is writing" <<<"$p_out$g_out" &&
   [ -z "$left" ] && [ $after = 0 ]; then pass "prep and gen-corpus into an --out being written: exit 2, nothing written; after, prep runs"
else fail "prep into an --out being written" "prep $p_rc, gen-corpus $g_rc, after $after, left: $left" "$p_out" "$g_out"; fi

# a dataset folder shared with another user (group-writable, the lock file theirs, 0644):
# the lock needs no write access to that file (before: exit 2, "cannot create
# ds/.tandem-prep.lock: Permission denied"); root only (setpriv to nobody)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  shared=$(mktemp -d /tmp/tandem-shared-XXXXXX) && chmod 755 "$shared"
  cp "$tmp/three.jsonl" "$shared/in.jsonl" && chmod 644 "$shared/in.jsonl"
  "$bin" prep --domain a="$shared/in.jsonl" --out "$shared/ds" --split 0.5,0.5,0 >/dev/null 2>&1
  chmod -R a+rwX "$shared/ds" && chmod 644 "$shared/ds/.tandem-prep.lock"
  out=$(cd / && setpriv --reuid=65534 --regid=65534 --clear-groups "$(realpath "$bin")" prep --domain a="$shared/in.jsonl" \
        --out "$shared/ds" --split 0.5,0.5,0 2>&1); rc=$?
  owner=$(stat -c %u "$shared/ds/dataset.yaml" 2>/dev/null)
  rm -rf "$shared"
  if [ $rc = 0 ] && [ "$owner" = 65534 ]; then pass "prep by another user into a shared folder: the lock taken read-only, exit 0"
  else fail "prep by another user into a shared folder" "exit $rc, dataset.yaml owned by $owner" "$out"; fi
fi

# an --out that cannot be made (its parent read-only to this user): exit 2 saying the
# folder and the permission denied (before: "cannot create ro/gc/.tandem-prep.lock: No such
# file or directory", the lock file's read-only retry's errno); root only (setpriv)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  shared=$(mktemp -d /tmp/tandem-ro-XXXXXX) && chmod 755 "$shared" && mkdir "$shared/ro" && chmod 555 "$shared/ro"
  for c in "gen-corpus --train-tokens 1k --val-tokens 1k --test-tokens 1k" \
           "prep --domain a=$shared/in.jsonl --split 0.5,0.5,0"; do
    cp "$tmp/three.jsonl" "$shared/in.jsonl" && chmod 644 "$shared/in.jsonl"
    # shellcheck disable=SC2086
    out=$(cd "$shared" && setpriv --reuid=65534 --regid=65534 --clear-groups "$(realpath "$bin")" $c --out ro/gc 2>&1); rc=$?
    if [ $rc = 2 ] && grep -q "cannot create the folder ro/gc (--out): Permission denied" <<<"$out"; then
      pass "${c%% *} --out in a read-only folder: exit 2, permission denied on the folder said"
    else fail "${c%% *} --out in a read-only folder" "exit $rc" "$out"; fi
  done
  rm -rf "$shared"
fi

# ------------------------------------------------ never over a store's own objects
# --out, --plot and --tensorboard naming a store's object or folder (or a link to one, or a
# path that leads there through ..) are refused (exit 2, naming the store), the object
# untouched; a file of another name beside them is written (before: `mixture --out s/RUN`
# exit 0, and the run could never be resumed)
st="$tmp/own"
"$bin" run "$tmp/c.yaml" --store "$st" --quiet >/dev/null 2>&1
ln -s "$st/RUN" "$tmp/to-run"
ln -s "$st/alpha/99.mp" "$tmp/dangling.svg" # a link to where nothing is yet: written through
sums() { md5sum "$st/RUN" "$st/HEAD" | cut -c1-32 | tr '\n' ' '; ls "$st/states" | wc -l; }
before=$(sums)
bad=
for c in "mixture $st --out $st/RUN" "alpha $st --plot $st/RUN" "metrics $st --plot $st/HEAD" \
         "alpha $st --plot $tmp/to-run" "alpha $st --plot $st/states/../RUN" "alpha $st --plot $st/states/p.svg" \
         "metrics $st --tensorboard $st/states" "alpha $st --plot $tmp/dangling.svg" \
         "metrics $st --tensorboard $st/nx/../states" "manifest slurm $tmp/c.yaml --store $st --out $st/RUN"; do
  out=$("$bin" $c 2>&1); rc=$?
  if [ $rc != 2 ] || ! grep -q "is inside the store" <<<"$out"; then bad="$bad [$c: exit $rc: $out]"; fi
done
"$bin" alpha "$st" --plot "$st/alpha.svg" >/dev/null 2>&1; rc=$?
"$bin" verify "$st" >/dev/null 2>&1; v=$?
if [ -z "$bad" ] && [ "$(sums)" = "$before" ] && [ $rc = 0 ] && [ -s "$st/alpha.svg" ] && [ $v = 0 ] &&
   [ ! -e "$st/alpha/99.mp" ] && [ ! -e "$st/nx" ]; then
  pass "outputs over a store's objects refused (10 ways), the store unchanged; a plot beside them written"
else fail "outputs over a store's objects" "$bad" "alpha.svg exit $rc, verify $v, $(sums) vs $before"; fi
# ------------------------------------------------ output paths are local: no URL
# --out, --plot, --svg and --tensorboard naming a URL (s3://, gs://, https://, s3:/, file://)
# are refused with exit 2 before anything is written, in the folder the command ran in
# nothing made (before: metrics --tensorboard s3://b/tb and mixture --out s3://... exited 0,
# metrics saying "wrote s3://b/tb/events...", into a local folder ./s3:/b/...); a URL with
# user info is shown masked, its secret in no message and no path; a run given
# log.tensorboard=s3://... is refused the same (it ran, pinned the URL in RUN and wrote
# ./s3:/...). A folder really named "s3:" is still written as ./s3:/...
st="$tmp/urls"
"$bin" run "$tmp/c.yaml" --store "$st" --quiet >/dev/null 2>&1
w="$tmp/urls-cwd"
mkdir -p "$w"
bad=
for c in "export $st --out s3://bkt/model" "alpha $st --plot s3://bkt/a.svg" "metrics $st --tensorboard s3://bkt/tb" \
         "metrics $st --plot gs://bkt/m.svg" "mixture $st --out s3://bkt/m.yaml" "mixture $st --out s3:/bkt/m.yaml" \
         "mixture $st --out https://host/m.yaml" "manifest slurm $tmp/c.yaml --store $st --out s3://bkt/run.sbatch" \
         "alpha $st --plot file://$w/a.svg" "mixture $st --out s3://AKIAX:s3cr3t-out@bkt/m.yaml" \
         "metrics $st --tensorboard s3://s3cr3t-user@bkt/tb" "run $tmp/c.yaml --store $w/s --set log.tensorboard=s3://bkt/tb" \
         "run $tmp/c.yaml --store $w/s --set log.tensorboard=s3://AKIAX:s3cr3t-tb@bkt/tb" \
         "gen-corpus --out s3://bkt/corpus" "gen-corpus --out s3://AKIAX:s3cr3t-gc@bkt/corpus" \
         "prep --domain a=$tmp/c.yaml --out s3://bkt/prep"; do
  # shellcheck disable=SC2086
  (cd "$w" && "$bin" $c >"$tmp/url-out" 2>"$tmp/url-err"); rc=$?
  err=$(cat "$tmp/url-err")
  case $c in
    *file://*) want="a file:// URL is not taken here: name the local path itself" ;;
    *s3cr3t*) want="holds user info" ;;
    *) want="is not supported here: write it locally and copy it" ;;
  esac
  [ $rc = 2 ] && grep -qF "$want" <<<"$err" || bad="$bad [$c: exit $rc: $err]"
  grep -q "wrote" <<<"$err" && bad="$bad [$c: says it wrote: $err]"
  grep -qa s3cr3t "$tmp/url-out" "$tmp/url-err" && bad="$bad [$c: the secret in its output: $err]"
  case $c in *s3cr3t*) grep -qF '***@bkt' <<<"$err" || bad="$bad [$c: not shown masked: $err]" ;; esac
  [ -s "$tmp/url-out" ] && bad="$bad [$c: printed $(head -c 200 "$tmp/url-out")]"
  [ -n "$(ls -A "$w")" ] && bad="$bad [$c: made $(cd "$w" && find . | head -5 | tr '\n' ' ')]" && rm -rf "${w:?}"/*
done
grep -rqa s3cr3t "$st" && bad="$bad [the secret in the store]"
# the escape: a folder named s3: written as ./s3:/... (the user said so)
(cd "$w" && "$bin" metrics "$st" --tensorboard ./s3:/tb >/dev/null 2>"$tmp/url-err"); rc=$?
ls "$w/s3:/tb/"events.out.tfevents.* >/dev/null 2>&1 || bad="$bad [./s3:/tb: exit $rc, $(cat "$tmp/url-err"), no event file]"
if [ -z "$bad" ]; then pass "output paths that are URLs refused (16 ways, exit 2, nothing written, no secret said); ./s3:/tb written"
else fail "output paths that are URLs" "$bad"; fi
finish
