# lib_cli.sh — what every tests/cli_*.sh script shares (named apart: tests/run.sh runs
# every cli_*.sh). Sourced after `cd` to the repository root, with SUITE set to the
# script's name:
#   root, bin   the repository and the tandem binary under test ($TANDEM_BIN, absolute)
#   pass NAME / fail NAME [DETAIL ...]   a PASS or FAIL line, counted
#   finish      "SUITE: N passed, M failed" (the line tests/run.sh adds up), and exit
#               non-zero when something failed
#   wait_catches PID   waits (up to 60 s) until PID runs $bin (not the shell that forked
#               it) and catches SIGTERM (its SigCgt in /proc): from then on a signal is the
#               program's to handle, however slowly the machine started it; status 1 if
#               the process ended first
root=$PWD
bin=${TANDEM_BIN:-./tandem}
case $bin in /*) ;; *) bin=$root/$bin ;; esac
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() {
  failed=$((failed + 1)); echo "FAIL $1"; shift
  for l in "$@"; do printf '  %s\n' "$l"; done
}
wait_catches() {
  local i mask exe want
  want=$(readlink -f "$bin")
  for ((i = 0; i < 12000; i++)); do
    mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$mask" ] || return 1
    exe=$(readlink "/proc/$1/exe" 2>/dev/null)
    [ "$exe" = "$want" ] && (( (16#$mask >> 14) & 1 )) && return 0
    sleep 0.005
  done
  return 1
}
finish() {
  echo "$SUITE: $passed passed, $failed failed"
  [ $failed -eq 0 ]
  exit
}
