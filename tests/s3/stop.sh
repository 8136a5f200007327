#!/usr/bin/env bash
# tests/s3/stop.sh — stops what tests/s3/start.sh DIR started.
#   tests/s3/stop.sh DIR [--clean]     --clean also removes DIR
# Only kills the pids recorded in DIR/pids, and only while they are still our s3rver /
# proxy.py (checked through /proc), so a recycled pid is never hit. Idempotent.
set -u
[ $# -ge 1 ] || { echo "usage: $0 DIR [--clean]" >&2; exit 2; }
dir=$1
clean=0
[ "${2:-}" = "--clean" ] && clean=1

ours() { # ours PID: is it still a process we started?
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  case "$cmd" in *s3rver.js*|*tests/s3/proxy.py*) return 0 ;; esac
  return 1
}

if [ -f "$dir/pids" ]; then
  read -r -a pids <"$dir/pids" || true
  live=()
  for p in "${pids[@]+"${pids[@]}"}"; do
    if ours "$p"; then kill -TERM "$p" 2>/dev/null && live+=("$p"); fi
  done
  for _ in $(seq 1 50); do
    still=()
    for p in "${live[@]+"${live[@]}"}"; do ours "$p" && still+=("$p"); done
    [ ${#still[@]} -eq 0 ] && break
    sleep 0.1
  done
  for p in "${still[@]+"${still[@]}"}"; do ours "$p" && kill -KILL "$p" 2>/dev/null; done
  rm -f "$dir/pids"
fi
rm -f "$dir/env" "$dir/proxy.ready"
if [ $clean -eq 1 ]; then rm -rf "$dir"; fi
exit 0
