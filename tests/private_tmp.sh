#!/bin/sh
# tests/private_tmp.sh: runs one test command with a temporary folder of its own.
#   sh tests/private_tmp.sh COMMAND ARGS...
# ctest runs tests in parallel (-j), and every tool they start keeps its scratch files under
# TMPDIR: Open MPI's session directory (TMPDIR/ompi.HOST.UID/pid.N), mktemp, sqlite's temp
# files. Two mpiruns sharing one TMPDIR race on the session directory's parent: one job's
# cleanup removes it while the other creates its pid.N below it ("orte_session_dir failed"),
# which failed the suite at random. With a folder per test nothing under TMPDIR is shared.
# The folder is removed when the command ends, whatever its status.
set -u
dir=$(mktemp -d "${TMPDIR:-/tmp}/pptrain-test.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
TMPDIR=$dir
export TMPDIR
"$@"
