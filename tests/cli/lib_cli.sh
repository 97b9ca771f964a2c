# Shared by the tests/cli/cli_*.sh scripts (sourced, not a test itself): the arguments every
# script gets from ctest, a private working directory that is removed at exit, and the
# check/finish pair that counts and reports like test_util.h does.
#   source "$(dirname "$0")/lib_cli.sh" "$@"
#   check "what it proves" command args...
#   pass / fail "what went wrong"      # count a result the script decided itself
#   cli_finish                       # prints "N passed, N failed"; exits non-zero on a failure
# shellcheck shell=bash
set -u
bin=$1
src=${2:-}
work=${KEEP_WORK:-$(mktemp -d)}   # KEEP_WORK=DIR keeps a run's files for a look afterwards
cli_cleanup() {
  local jobs_left
  jobs_left=$(jobs -p)
  [ -z "$jobs_left" ] || kill -9 $jobs_left 2>/dev/null
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
}
trap cli_cleanup EXIT
cd "$work" || exit 1
passed=0
failed=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
check() {   # check "what" command...: counts a pass when the command succeeds
  local what=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $what"; fi
}
# ckpt_of DIR RUN STEP: the folder run RUN (of some store) wrote for STEP under --ckpt-dir DIR,
# DIR/run-RUN-<tag>/step-STEP; RUN '' for a run without a store (DIR/run-<tag>/step-STEP).
ckpt_of() {
  local found
  found=$(ls -d "$1"/run-"${2:+$2-}"[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]/step-"$(printf %06d "$3")" 2>/dev/null | head -1)
  echo "${found:-$1/run-${2:+$2-}NONE/step-$(printf %06d "$3")}"
}
cli_finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
