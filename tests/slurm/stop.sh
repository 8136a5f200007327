#!/usr/bin/env bash
# tests/slurm/stop.sh — stops what tests/slurm/start.sh DIR started.
#   tests/slurm/stop.sh DIR [--clean]     --clean also removes DIR
# Cancels the jobs still known to this cluster, then stops slurmd, slurmctld and munged
# by the pids recorded in DIR/pids, and only while they still are those daemons (checked
# through /proc), so a recycled pid is never hit. Job processes left behind by slurmd
# (tandem, srun, the batch shell) are found through their SLURM_CONF=DIR/slurm.conf
# environment and stopped too. Idempotent.
set -u
[ $# -ge 1 ] || { echo "usage: $0 DIR [--clean]" >&2; exit 2; }
dir=$1
clean=0
[ "${2:-}" = "--clean" ] && clean=1
[ -d "$dir" ] || exit 0
dir=$(cd "$dir" && pwd)

ours() { # ours PID: is it still one of our daemons?
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  case "$cmd" in
    *munged*"$dir/munge"*|*slurmctld*"$dir/slurm.conf"*|*slurmd*"$dir/slurm.conf"*) return 0 ;;
  esac
  return 1
}

stop_pids() { # stop_pids PID...: TERM, wait up to 5 s, then KILL
  local p still live=()
  for p in "$@"; do kill -TERM "$p" 2>/dev/null && live+=("$p"); done
  for _ in $(seq 1 50); do
    still=()
    for p in "${live[@]+"${live[@]}"}"; do [ -d "/proc/$p" ] && still+=("$p"); done
    [ ${#still[@]} -eq 0 ] && return 0
    sleep 0.1
  done
  for p in "${still[@]}"; do kill -KILL "$p" 2>/dev/null; done
}

if [ -f "$dir/slurm.conf" ] && [ -f "$dir/pids" ]; then
  SLURM_CONF="$dir/slurm.conf" scancel --quiet --full --signal=KILL --user="$(id -un)" 2>/dev/null || true
fi
if [ -f "$dir/pids" ]; then
  read -r -a pids <"$dir/pids" || true
  mine=()
  # reverse order: slurmd, slurmctld, munged
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do ours "${pids[$i]}" && mine+=("${pids[$i]}"); done
  stop_pids "${mine[@]+"${mine[@]}"}"
  rm -f "$dir/pids"
fi
# stray job processes of this cluster (slurmstepd, the batch shell, srun, tandem)
strays=()
for env in /proc/[0-9]*/environ; do
  p=${env#/proc/}; p=${p%/environ}
  [ "$p" = "$$" ] && continue
  if { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qxF "SLURM_CONF=$dir/slurm.conf"; then strays+=("$p"); fi
done
stop_pids "${strays[@]+"${strays[@]}"}"
rm -f "$dir/env"
if [ $clean -eq 1 ]; then rm -rf "$dir"; fi
exit 0
