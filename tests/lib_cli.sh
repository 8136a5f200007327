# lib_cli.sh — what every tests/cli_*.sh script shares (named apart: tests/run.sh runs
# every cli_*.sh). Sourced after `cd` to the repository root, with SUITE set to the
# script's name:
#   root, bin   the repository and the tandem binary under test ($TANDEM_BIN, absolute)
#   pass NAME / fail NAME [DETAIL ...]   a PASS or FAIL line, counted
#   finish      "SUITE: N passed, M failed" (the line tests/run.sh adds up), and exit
#               non-zero when something failed
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
finish() {
  echo "$SUITE: $passed passed, $failed failed"
  [ $failed -eq 0 ]
  exit
}
