#!/usr/bin/env bash
# tests/slurm/start.sh — a one-node Slurm cluster (munged, slurmctld, slurmd) on loopback.
#
#   tests/slurm/start.sh DIR        # starts it; DIR is created if missing
#   . DIR/env                       # exports SLURM_CONF for sbatch, scontrol, ...
#   tests/slurm/stop.sh DIR [--clean]
#
# Everything lives under DIR: a private munge key and socket (the system's munge, if
# any, is left alone), slurm.conf made from slurm.conf.in with the node's real CPU
# count and memory (`slurmd -C`), the controller's state, slurmd's spool, the logs and
# the pids. The daemons bind two free ports on 127.0.0.1 found at start. Needs root
# (slurmd starts jobs as their user) and the Debian packages slurm-wlm and munge
# (scripts/deps.sh test installs them). On any failure everything started so far is
# stopped and the exit status is non-zero, with the daemons' log tails on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
for b in munged slurmctld slurmd scontrol sinfo; do
  command -v "$b" >/dev/null || PATH=$PATH:/usr/sbin:/sbin
  command -v "$b" >/dev/null || { echo "start.sh: $b not found (apt-get install slurm-wlm munge)" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "start.sh: slurmd must run as root" >&2; exit 1; }

dir=$1
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -f "$dir/pids" ]; then
  echo "start.sh: $dir/pids exists: already running? (tests/slurm/stop.sh $dir)" >&2
  exit 1
fi
rm -rf "$dir/munge" "$dir/ctld" "$dir/slurmd"
mkdir -p "$dir/munge" "$dir/ctld" "$dir/slurmd"
chmod 755 "$dir/munge" # the key inside stays 0400; clients need to reach the socket
rm -f "$dir/env" "$dir"/*.log

pids=()
cleanup_on_fail() {
  local st=$?
  if [ $st -ne 0 ]; then
    for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]+"${pids[@]}"}"; do wait "$p" 2>/dev/null || true; done
    rm -f "$dir/pids" "$dir/env"
    echo "start.sh: failed; logs in $dir" >&2
    for f in munged.log slurmctld.log slurmd.log; do
      [ -s "$dir/$f" ] && { echo "--- $f" >&2; tail -n 20 "$dir/$f" >&2; }
    done
  fi
  exit $st
}
trap cleanup_on_fail EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- munge: a private key and socket
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --foreground --force --key-file="$dir/munge/munge.key" \
  --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" \
  --seed-file="$dir/munge/munged.seed" --log-file="$dir/munged.log" \
  </dev/null >>"$dir/munged.out" 2>&1 &
pids+=($!)
echo "${pids[*]}" >"$dir/pids"
for _ in $(seq 1 100); do
  [ -S "$dir/munge/munge.socket" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "start.sh: munged exited" >&2; exit 1; }
  sleep 0.1
done
[ -S "$dir/munge/munge.socket" ] || { echo "start.sh: munged did not create its socket" >&2; exit 1; }

# --- slurm.conf from the template, with this machine's CPUs and memory
hw=$(slurmd -C | head -n 1)
cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
mem=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
[ -n "$cpus" ] && [ -n "$mem" ] || { echo "start.sh: cannot read CPUs/RealMemory from: $hw" >&2; exit 1; }
mem=$((mem * 9 / 10)) # a little headroom: slurmd refuses a node with less than configured
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
sed -e "s|@DIR@|$dir|g" -e "s|@CPUS@|$cpus|g" -e "s|@MEM@|$mem|g" \
    -e "s|@CTLD_PORT@|$ctld_port|g" -e "s|@SLURMD_PORT@|$slurmd_port|g" \
    -e "s|@USER@|$(id -un)|g" "$here/slurm.conf.in" >"$dir/slurm.conf"
: >"$dir/plugstack.conf"
export SLURM_CONF="$dir/slurm.conf"

# --- the controller and the node daemon, in the foreground of their own processes
slurmctld -D -i -f "$SLURM_CONF" </dev/null >>"$dir/slurmctld.log" 2>&1 &
pids+=($!)
echo "${pids[*]}" >"$dir/pids"
slurmd -D -N localhost -f "$SLURM_CONF" </dev/null >>"$dir/slurmd.log" 2>&1 &
pids+=($!)
echo "${pids[*]}" >"$dir/pids"

state=""
for _ in $(seq 1 300); do
  for i in 1 2; do
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "start.sh: a Slurm daemon exited" >&2; exit 1; }
  done
  state=$(sinfo -h -n localhost -o '%T' 2>/dev/null || true)
  case "$state" in idle|idle*) break ;; esac
  sleep 0.2
done
case "$state" in idle|idle*) ;; *) echo "start.sh: node not idle after 60 s (state '$state')" >&2; exit 1 ;; esac

cat >"$dir/env" <<ENV
export SLURM_CONF='$dir/slurm.conf'
ENV
echo "start.sh: Slurm up in $dir (controller 127.0.0.1:$ctld_port, node localhost, $cpus CPUs)"
