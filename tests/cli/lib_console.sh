# Shared by the console's tmux tests (sourced after lib_cli.sh): a private tmux server that is
# killed at exit, a UTF-8 locale where there is one, sanitizer reports to
# files (the console keeps stderr aside while it draws), wait_for and wait_gone, which poll the
# screen, and keep, which saves it.
# shellcheck shell=bash
sock=pptrain-test-$$
# tmux on the test's own server. A new-session right after a kill-server can reach the server
# while it exits and fail with "server exited unexpectedly" (14 times in 40 on a 2-core
# machine), so a test would wait on a screen that never opens: new-session is retried.
tm() {
  if [ "$1" = new-session ]; then
    local try
    for try in $(seq 50); do tmux -L "$sock" "$@" 2>/dev/null && return 0; sleep 0.1; done
  fi
  tmux -L "$sock" "$@"
}
trap 'tm kill-server 2>/dev/null; cli_cleanup' EXIT   # cli_cleanup also ends background jobs

# The screens are checked in a UTF-8 locale where there is one (borders are then '│'; in
# ASCII, curses draws them with the terminal's line characters, which tmux captures as 'x').
if locale -a 2>/dev/null | grep -qix 'c.utf-\?8'; then export LC_ALL=C.UTF-8; fi
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$work/asan"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$work/ubsan"

# wait_for SECONDS PATTERN WHAT: polls the screen until the extended regex shows up. SECONDS
# is what an idle 2-core machine needs; the wait allows three times that (it ends as soon as
# the pattern shows), since ctest -j runs these beside other tests that share the cores, and
# a run that finishes in 20 s alone took over 60 s there at a load average of 7.
wait_for() {
  local deadline=$((SECONDS + 3 * $1))
  while [ $SECONDS -le $deadline ]; do
    tm capture-pane -p > "$work/screen.txt" 2>/dev/null
    if grep -Eq -- "$2" "$work/screen.txt"; then pass; return 0; fi
    sleep 0.2
  done
  fail "$3: no '$2' on the screen within $((3 * $1)) s:"
  cat "$work/screen.txt"
  return 1
}

# wait_gone SECONDS PATTERN WHAT: polls the screen until the pattern has left it.
wait_gone() {
  local deadline=$((SECONDS + 3 * $1))
  while [ $SECONDS -le $deadline ]; do
    tm capture-pane -p > "$work/screen.txt" 2>/dev/null
    if ! grep -Eq -- "$2" "$work/screen.txt"; then pass; return 0; fi
    sleep 0.2
  done
  fail "$3: '$2' still on the screen after $((3 * $1)) s:"
  cat "$work/screen.txt"
  return 1
}

keep() {   # keep NAME: save the current screen as a capture
  [ -n "${PPTRAIN_CAPTURE_DIR:-}" ] && tm capture-pane -p > "$PPTRAIN_CAPTURE_DIR/$1.txt"
  return 0
}
