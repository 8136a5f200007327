#!/usr/bin/env bash
# cli_k8s.sh — `tandem manifest k8s` renders Kubernetes objects that the API server would
# accept, and the validator (tests/k8s/validate.py) really rejects what it would not.
#
#   TANDEM_BIN=build/rel/tandem bash tests/cli_k8s.sh
#
# 1. Renders every cloud (none, gke, eks, aks) × spot on/off × one node (Job) and four
#    (Indexed Job + headless Service), with and without GPUs, and validates them all
#    against the strict batch/v1 OpenAPI schema (../shared/k8s) plus the semantic rules.
# 2. Negative tests: each mutation of tests/k8s/mutate.py (misspelled fields at several
#    depths, wrong types, each semantic rule broken) makes the validator exit 1 and name
#    the problem.
# 3. Rendering errors exit 2 naming the key; a credential in cluster.env is refused
#    without echoing it; a file:// store warns.
# 4. The ConfigMap's config round-trips: rendering from it gives the same ConfigMap.
# 5. manifests/job.yaml and manifests/indexed-job.yaml are exactly what the command in
#    their header renders now, and they validate.
# 6. The Dockerfile passes tests/k8s/check_dockerfile.py (no engine runs here).
# 7. Hostile values (tests/k8s/hostile.py): text with YAML 1.1's Unicode line breaks
#    (NEL, U+2028, U+2029), newlines, quotes and YAML-shaped payloads in --set strings, a
#    --sweep value, the store URL and the config's file name: every render is refused or
#    parses (PyYAML) as exactly the ConfigMap and the Job, values read back as given.
# Prints PASS/FAIL lines and "cli_k8s: N passed, M failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/.." || exit 1
SUITE=cli_k8s
. tests/lib_cli.sh
py=/usr/bin/python3
schema=${TANDEM_K8S_SCHEMA:-$root/../shared/k8s/apis__batch__v1_openapi.json}
validate=("$py" "$root/tests/k8s/validate.py" --schema "$schema")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tandem-k8s-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$bin" ] || [ ! -f "$schema" ] || ! "$py" -c 'import jsonschema, yaml' 2>/dev/null; then
  fail setup "needs $bin, $schema and python3-jsonschema, python3-yaml (scripts/deps.sh test)"
  finish
fi

cat >"$tmp/run.yaml" <<'EOF'
run: {episodes: 50, seed: 7, device: cpu}
data: {dataset: /data/corpus/dataset.yaml}
model: {layers: 2, channels: 64, heads: 2, ctx: 64}
tandem: {K: 3, E: 4, lr_alpha: 1.5e-3}
checkpoint: {every_episodes: 2, every_seconds: 120.5}
cluster:
  cpus_per_task: 8
  memory: 64G
  image: registry.example.com/tandem:0.1
  secret_name: tandem-aws
  data_pvc: tandem-corpus
  env: AWS_REGION=us-east-1,TANDEM_S3_CONCURRENCY=16
  tolerations: dedicated=ml:NoSchedule,reserved
  grace_period_s: 30
EOF

# --- 1. every variant renders and validates
files=()
render_errors=()
for cloud in none gke eks aks; do
  for spot in false true; do
    for nodes in 1 4; do
      for gpus in 0 8; do
        [ "$cloud" != none ] && [ "$gpus" = 0 ] && continue
        f="$tmp/$cloud-spot$spot-n$nodes-g$gpus.yaml"
        if "$bin" manifest k8s "$tmp/run.yaml" --store s3://bucket/runs/a \
            --set cluster.cloud=$cloud --set cluster.spot=$spot --set cluster.nodes=$nodes \
            --set cluster.gpus_per_node=$gpus >"$f" 2>"$f.err"; then
          files+=("$f")
        else
          render_errors+=("$(basename "$f"): $(cat "$f.err")")
        fi
      done
    done
  done
done
if [ ${#render_errors[@]} -eq 0 ] && [ ${#files[@]} -eq 20 ]; then
  pass "render 20 variants (4 clouds x spot x 1/4 nodes x GPUs)"
else
  fail "render variants" "${render_errors[@]}"
fi
out=$("${validate[@]}" "${files[@]}" 2>&1); st=$?
oks=$(grep -c ': ok (' <<<"$out")
if [ $st -eq 0 ] && [ "$oks" -eq ${#files[@]} ]; then
  pass "validate ${#files[@]} rendered manifests (strict schema + semantic rules)"
else
  fail "validate rendered manifests (exit $st, $oks ok)" "$(head -n 20 <<<"$out")"
fi

# what the variants must contain
expect() { # expect NAME FILE PATTERN... : every grep -F pattern is in FILE
  local name=$1 file=$2; shift 2
  local missing=()
  for p in "$@"; do grep -qF -- "$p" "$file" || missing+=("missing: $p"); done
  if [ ${#missing[@]} -eq 0 ]; then pass "$name"; else fail "$name" "${missing[@]}"; fi
}
absent() { # absent NAME FILE PATTERN...
  local name=$1 file=$2; shift 2
  local found=()
  for p in "$@"; do grep -qF -- "$p" "$file" && found+=("present: $p"); done
  if [ ${#found[@]} -eq 0 ]; then pass "$name"; else fail "$name" "${found[@]}"; fi
}
expect "Job: restartPolicy Never, podFailurePolicy, limits, grace, exec form" \
  "$tmp/none-spotfalse-n1-g8.yaml" "restartPolicy: Never" "podReplacementPolicy: Failed" \
  "backoffLimit: 3" "values: [2, 5]" "values: [75]" "action: FailJob" "type: DisruptionTarget" \
  "terminationGracePeriodSeconds: 30" 'nvidia.com/gpu: "8"' \
  'command: ["/usr/local/bin/tandem", "run", "/etc/tandem/config.yaml", "--store", "s3://bucket/runs/a"]' \
  'secretName: "tandem-aws"' 'claimName: "tandem-corpus"' 'value: "/var/run/secrets/tandem-aws/credentials"'
jn=$(sed -n '/^kind: Job/,$p' "$tmp/none-spotfalse-n4-g8.yaml" | sed -n 's/^  name: "\(.*\)"$/\1/p' | head -n 1)
[[ $jn =~ ^tandem-run-[0-9a-f]{6}$ ]] && pass "the Job's default name: tandem-<config name>-<store hash> ($jn)" ||
  fail "the Job's default name" "got '$jn'"
expect "Indexed Job + headless Service" "$tmp/none-spotfalse-n4-g8.yaml" \
  "completionMode: Indexed" "completions: 4" "backoffLimitPerIndex: 3" "maxFailedIndexes: 0" \
  "clusterIP: None" "subdomain: \"$jn\"" "kind: Service" \
  "value: \"$jn-0.$jn:29500\"" "job-completion-index"
absent "CPU job: no GPU request, no GPU toleration, no /dev/shm" "$tmp/none-spotfalse-n1-g0.yaml" \
  "nvidia.com/gpu" "dshm"
expect "GKE spot H100 labels" "$tmp/gke-spottrue-n1-g8.yaml" \
  '"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"' '"cloud.google.com/gke-spot": "true"' \
  'key: "cloud.google.com/gke-spot"'
expect "EKS spot H100 labels" "$tmp/eks-spottrue-n1-g8.yaml" \
  '"node.kubernetes.io/instance-type": "p5.48xlarge"' '"eks.amazonaws.com/capacityType": "SPOT"'
expect "AKS spot H100 labels and taint" "$tmp/aks-spottrue-n1-g8.yaml" \
  '"node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5"' \
  '"kubernetes.azure.com/scalesetpriority": "spot"' 'key: "kubernetes.azure.com/scalesetpriority"'
absent "on-demand: no spot selector" "$tmp/gke-spotfalse-n1-g8.yaml" "gke-spot"
"$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p --set cluster.cloud=gke \
  --set cluster.gpus_per_node=1 --set cluster.node_selector=cloud.google.com/gke-accelerator=nvidia-h100-mega-80gb,pool=a \
  >"$tmp/override.yaml" 2>/dev/null
expect "cluster.node_selector wins over the cloud's label" "$tmp/override.yaml" \
  '"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"' '"pool": "a"'
# IRSA / Pod Identity: a ServiceAccount instead of a Secret of keys
"$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p --set cluster.service_account=tandem-irsa \
  --set cluster.secret_name= >"$tmp/irsa.yaml" 2>/dev/null
out=$("${validate[@]}" "$tmp/irsa.yaml" 2>&1); st=$?
if [ $st -eq 0 ]; then pass "an IRSA Job validates"; else fail "IRSA validates" "$out"; fi
expect "IRSA: the pods run as the ServiceAccount" "$tmp/irsa.yaml" 'serviceAccountName: "tandem-irsa"'
absent "IRSA: no Secret of keys mounted" "$tmp/irsa.yaml" "secretName:" "AWS_SHARED_CREDENTIALS_FILE"
# the Secret's keys as environment variables instead of mounted files
"$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p --set cluster.secret_as_env=true >"$tmp/senv.yaml" 2>/dev/null
out=$("${validate[@]}" "$tmp/senv.yaml" 2>&1); st=$?
if [ $st -eq 0 ]; then pass "a Job with the Secret as env validates"; else fail "secret as env validates" "$out"; fi
expect "the Secret's keys as env (secretKeyRef; the session token optional)" "$tmp/senv.yaml" \
  "secretKeyRef:" "key: AWS_ACCESS_KEY_ID" "key: AWS_SECRET_ACCESS_KEY" "key: AWS_SESSION_TOKEN" "optional: true"
absent "the Secret as env: no mounted ~/.aws" "$tmp/senv.yaml" "secretName:" "AWS_SHARED_CREDENTIALS_FILE"
# tandem compare's final runs as one Indexed Job (after its DMO job), validated the same way
"$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/cmp --compare finals >"$tmp/finals.yaml" 2>/dev/null
out=$("${validate[@]}" "$tmp/finals.yaml" 2>&1); st=$?
if [ $st -eq 0 ]; then pass "compare's final runs as an Indexed Job validate"; else fail "compare finals validate" "$out"; fi
expect "compare finals: 4 indexes running tandem compare --only final, FailIndex" "$tmp/finals.yaml" \
  "completionMode: Indexed" "completions: 4" "action: FailIndex" "TANDEM_POINT" \
  '"compare", "/etc/tandem/config.yaml", "--store", "s3://bkt/cmp", "--only", "final"]'
"$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/cmp --compare dmo >"$tmp/cmpdmo.yaml" 2>/dev/null
out=$("${validate[@]}" "$tmp/cmpdmo.yaml" 2>&1); st=$?
if [ $st -eq 0 ] && grep -q '"--only", "dmo"]' "$tmp/cmpdmo.yaml" && ! grep -q "completionMode" "$tmp/cmpdmo.yaml"; then
  pass "compare's DMO as one Job validates"
else fail "compare dmo job" "$out"; fi
# a sweep: one Indexed Job of the points, validated like the rest; a bad point is refused
"$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/study --sweep run.seed=1,2,3 \
  --sweep tandem.lr_alpha=2e-3,4e-3 >"$tmp/sweep.yaml" 2>/dev/null
out=$("${validate[@]}" "$tmp/sweep.yaml" 2>&1); st=$?
if [ $st -eq 0 ]; then pass "a sweep's Indexed Job validates"; else fail "sweep validates" "$out"; fi
expect "a sweep: 6 indexes, each its point (TANDEM_POINT), FailIndex on 2 and 5" "$tmp/sweep.yaml" \
  "completionMode: Indexed" "completions: 6" "parallelism: 6" "backoffLimitPerIndex: 3" \
  "action: FailIndex" "name: TANDEM_POINT" "job-completion-index" \
  '"--store", "s3://bkt/study", "--sweep", "run.seed=1,2,3", "--sweep", "tandem.lr_alpha=2e-3,4e-3"]'
absent "a sweep: no coordinator, no Service, no failed-index limit" "$tmp/sweep.yaml" \
  "TANDEM_WORLD_SIZE" "kind: Service" "maxFailedIndexes"
out=$("$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p --sweep optim.lr=1e-3,-2 2>&1 >/dev/null); st=$?
if [ $st -eq 2 ] && grep -q "sweep point 1 (optim.lr=-2)" <<<"$out" && grep -q "optim.lr" <<<"$out"; then
  pass "a sweep point that does not load: exit 2 naming the point and the key"
else fail "bad sweep point" "exit $st: $out"; fi
out=$("$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p --set cluster.nodes=2 --sweep run.seed=1,2 2>&1 >/dev/null); st=$?
if [ $st -eq 2 ] && grep -q "cluster.nodes" <<<"$out"; then pass "a sweep of multi-pod runs: exit 2"
else fail "sweep with nodes 2" "exit $st: $out"; fi
absent "no credentials in the rendered objects" "$tmp/none-spotfalse-n1-g8.yaml" \
  "AWS_SECRET_ACCESS_KEY" "AWS_ACCESS_KEY_ID" "AWS_SESSION_TOKEN"

# --- 2. negative tests: each mutation is caught and named
base1="$tmp/gke-spottrue-n1-g8.yaml"
base4="$tmp/gke-spottrue-n4-g8.yaml"
"${validate[@]}" "$base1" "$base4" >/dev/null 2>&1 || fail "mutation bases validate"
mkdir -p "$tmp/mut"
mut_fail=()
if ! "$py" "$root/tests/k8s/mutate.py" --all "$base1" "$base4" "$tmp/mut" >"$tmp/mut.list" 2>"$tmp/m.err"; then
  mut_fail+=("mutate.py failed: $(cat "$tmp/m.err")")
fi
nmut=$(wc -l <"$tmp/mut.list")
# one validator run over all mutated files; each must get its own report naming the problem
mapfile -t mut_files < <(cut -f1 "$tmp/mut.list")
out=$(cd "$tmp/mut" && "${validate[@]}" "${mut_files[@]}" 2>&1)
while IFS=$'\t' read -r file want; do
  mine=$(grep -- "^${file//./\\.}: " <<<"$out")
  if ! grep -q 'problem(s)$' <<<"$mine"; then
    mut_fail+=("${file%.yaml}: not rejected: $(head -n 3 <<<"$mine")")
  elif ! grep -qF -- "$want" <<<"$mine"; then
    mut_fail+=("${file%.yaml}: report lacks '$want': $(head -n 3 <<<"$mine")")
  fi
done <"$tmp/mut.list"
if [ ${#mut_fail[@]} -eq 0 ] && [ $nmut -ge 40 ]; then
  pass "negative tests: $nmut mutations rejected, each named (misspelled fields, types, every semantic rule)"
else
  fail "negative tests ($nmut mutations)" "${mut_fail[@]}"
fi

# --- 3. rendering errors name the key; credentials are refused unseen
err_case() { # err_case NAME WANT_TEXT ARGS...
  local name=$1 want=$2; shift 2
  local out st
  out=$("$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p "$@" 2>&1 >/dev/null); st=$?
  if [ $st -eq 2 ] && grep -qF -- "$want" <<<"$out"; then pass "$name"
  else fail "$name" "exit $st, want 2 and '$want': $out"; fi
}
err_case "no image: exit 2 naming cluster.image" "cluster.image is required" --set cluster.image=
err_case "bad toleration effect" "cluster.tolerations" --set cluster.tolerations=a=b:NoRun
err_case "bad node label" "cluster.node_selector" --set 'cluster.node_selector=a b=c'
err_case "bad memory" "cluster.memory" --set 'cluster.memory=64 GB'
err_case "bad job name" "cluster.job_name" --set cluster.job_name=My_Job
err_case "indexed name too long" "exceed 63 characters" --set cluster.nodes=100 \
  --set cluster.job_name=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
err_case "unknown cluster key suggests" "did you mean 'cluster.nodes'" --set cluster.node=2
out=$("$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p \
      --set cluster.env=AWS_SECRET_ACCESS_KEY=sekrit-value-123 2>&1 >/dev/null); st=$?
if [ $st -eq 2 ] && grep -q "looks like a credential" <<<"$out" && ! grep -q "sekrit" <<<"$out"; then
  pass "a credential in cluster.env: exit 2, value not echoed"
else
  fail "credential in cluster.env" "exit $st: $out"
fi
out=$("$bin" manifest k8s "$tmp/run.yaml" --store file:///tmp/x 2>&1 >/dev/null); st=$?
if [ $st -eq 0 ] && grep -q "warning: store file:///tmp/x is a file store" <<<"$out"; then
  pass "a file:// store renders with a warning"
else
  fail "file store warning" "exit $st: $out"
fi
if "$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p --out "$tmp/out.yaml" 2>/dev/null &&
   cmp -s "$tmp/out.yaml" <("$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p 2>/dev/null) &&
   [ "$(stat -c %a "$tmp/out.yaml")" = 644 ]; then
  pass "--out writes the same text (mode 644)"
else
  fail "--out"
fi
out=$("$bin" manifest helm "$tmp/run.yaml" 2>&1); st=$?
if [ $st -eq 2 ] && grep -qF "'helm': expected slurm or k8s" <<<"$out"; then pass "unknown kind: exit 2"
else fail "unknown kind" "exit $st: $out"; fi
"$bin" manifest k8s >/dev/null 2>&1; st=$?
[ $st -eq 2 ] && pass "no CONFIG: exit 2" || fail "no CONFIG: exit $st"

# --- 4. the ConfigMap's config renders the same ConfigMap again
"$py" - "$base4" "$tmp/from-cm.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cm = next(d for d in docs if d["kind"] == "ConfigMap")
open(sys.argv[2], "w").write(cm["data"]["config.yaml"])
EOF
"$bin" manifest k8s "$tmp/from-cm.yaml" --store s3://bucket/runs/a >"$tmp/again.yaml" 2>/dev/null
cmdata() { "$py" -c 'import sys, yaml; print(next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "ConfigMap")["data"]["config.yaml"])' "$1"; }
if [ -s "$tmp/again.yaml" ] && [ "$(cmdata "$base4")" = "$(cmdata "$tmp/again.yaml")" ]; then
  pass "the ConfigMap's config.yaml loads back to the same config"
else
  fail "ConfigMap round trip" "$(diff <(cmdata "$base4") <(cmdata "$tmp/again.yaml") | head)"
fi

# --- 4b. two runs of configs of one name in two folders (two stores): two Jobs and two
# ConfigMaps (before: both tandem-run, and applying the second replaced the first run's
# ConfigMap: its next pod loaded the other config, exit 2, FailJob); the same store
# rendered again keeps its names (a resubmit); relative data.mixture_file and model.init
# are warned about (in the pod they resolve against /etc/tandem); a ',' in a cluster.env
# value written '\,'
mkdir -p "$tmp/expa" "$tmp/expb"
cp "$tmp/run.yaml" "$tmp/expa/run.yaml"; cp "$tmp/run.yaml" "$tmp/expb/run.yaml"
(cd "$tmp/expa" && "$bin" manifest k8s run.yaml --store s3://bkt/a >"$tmp/a.yaml" 2>/dev/null &&
  "$bin" manifest k8s run.yaml --store s3://bkt/a/ >"$tmp/a2.yaml" 2>/dev/null)
(cd "$tmp/expb" && "$bin" manifest k8s run.yaml --store s3://bkt/b >"$tmp/b.yaml" 2>/dev/null)
names() { grep -A1 '^metadata:' "$1" | sed -n 's/^  name: //p' | tr '\n' ' '; }
na=$(names "$tmp/a.yaml") na2=$(names "$tmp/a2.yaml") nb=$(names "$tmp/b.yaml")
if [ -n "$na" ] && [ "$na" = "$na2" ] && [ -n "$nb" ] && ! grep -qF -f <(names "$tmp/a.yaml" | tr ' ' '\n' | sed '/^$/d') <<<"$nb"; then
  pass "run.yaml in two folders with two stores: two Jobs and ConfigMaps ($na/ $nb); the same store keeps its names"
else
  fail "Job and ConfigMap names per store" "a: $na" "a/: $na2" "b: $nb"
fi
out=$("$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p --set model.init=hf:./m --set data.mixture=file \
  --set data.mixture_file=mix.yaml --set 'cluster.env=NO_PROXY=localhost\,169.254.169.254' 2>&1 >"$tmp/rel.yaml"); st=$?
if [ $st -eq 0 ] && grep -q "data.mixture_file is a relative path: in the pod it resolves against /etc/tandem" <<<"$out" &&
   grep -q "model.init = hf:./m is a relative path" <<<"$out" &&
   grep -A1 -F -- '- name: "NO_PROXY"' "$tmp/rel.yaml" | grep -qF 'value: "localhost,169.254.169.254"' &&
   "${validate[@]}" "$tmp/rel.yaml" >/dev/null 2>&1; then
  pass "relative data.mixture_file and model.init: warned; a '\,' in cluster.env is a ',' of the value; validates"
else
  fail "relative paths / cluster.env comma (exit $st)" "$out" "$(grep -A1 NO_PROXY "$tmp/rel.yaml")"
fi
out=$("$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p --set cluster.grace_period_s=0 2>&1 >/dev/null)
out2=$("$bin" manifest k8s "$tmp/run.yaml" --store s3://bkt/p --set checkpoint.grace_s=600 2>&1 >/dev/null)
grep -q "cluster.grace_period_s = 0: the kubelet kills tandem at once" <<<"$out" &&
  grep -q "checkpoint.grace_s = 600 is longer than cluster.grace_period_s = 30" <<<"$out2" &&
  pass "grace warnings: a grace of 0, checkpoint.grace_s above the pod's grace" ||
  fail "grace warnings" "$out" "$out2"

# --- 5. the checked-in manifests are current and valid
for f in manifests/job.yaml manifests/indexed-job.yaml; do
  cmd=$(sed -n 's/^#   rendered by: tandem //p' "$f" | head -n 1)
  if [ -z "$cmd" ]; then fail "$f: no 'rendered by' line"; continue; fi
  mapfile -t args < <("$py" -c 'import shlex, sys; print("\n".join(shlex.split(sys.argv[1])))' "$cmd")
  if "$bin" "${args[@]}" >"$tmp/current.yaml" 2>/dev/null && cmp -s "$f" "$tmp/current.yaml"; then
    pass "$f is what 'tandem $cmd' renders"
  else
    fail "$f is stale: regenerate with: ./tandem $cmd > $f" "$(diff "$f" "$tmp/current.yaml" | head -n 10)"
  fi
  out=$("${validate[@]}" "$f" 2>&1) && pass "$f validates" || fail "$f does not validate" "$out"
done

# --- 7. hostile values: no value escapes its place in the YAML
mkdir -p "$tmp/hostile"
out=$("$py" "$root/tests/k8s/hostile.py" "$bin" "$tmp/run.yaml" "$tmp/hostile" 2>&1)
if [[ $out == ok* ]]; then pass "hostile values (Unicode line breaks, YAML payloads) in ${out#ok } renders: none escapes"
else fail "hostile values escape the manifest" "$out"; fi

# --- 6. the Dockerfile
out=$("$py" "$root/tests/k8s/check_dockerfile.py" "$root/Dockerfile" 2>&1) &&
  pass "Dockerfile: syntax and conventions (not built: no container engine here)" ||
  fail "Dockerfile" "$out"

finish
