#!/usr/bin/env bash
# Runs a command that must fail in one given way: its exit status is STATUS (a number, or "nonzero"
# for any status but 0) and its output (stdout and stderr) matches every PATTERN (grep -E). For
# tests of error paths, where CTest's WILL_FAIL or PASS_REGULAR_EXPRESSION alone would pass on a
# crash, a start-up failure or a message printed on success.
# Usage: expect_failure.sh STATUS PATTERN... -- COMMAND [ARG...]
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 STATUS PATTERN... -- COMMAND [ARG...]" >&2; exit 2; }
expected=$1
shift
patterns=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  patterns+=("$1")
  shift
done
[ $# -ge 2 ] || { echo "$0: no command after --" >&2; exit 2; }
shift
out=$("$@" 2>&1)
status=$?
printf '%s\n' "$out"
echo "---- exit status $status"
failed=0
if [ "$expected" = nonzero ]; then
  [ "$status" -ne 0 ] || { echo "FAIL: the command succeeded (status 0), it must fail"; failed=1; }
elif [ "$status" -ne "$expected" ]; then
  echo "FAIL: exit status $status, expected $expected"
  failed=1
fi
# A here-string, not a pipe: grep -q stops at its first match, and under pipefail the writer's
# SIGPIPE on a long output (a usage text) would read as no match.
for p in "${patterns[@]}"; do
  grep -Eq -- "$p" <<<"$out" || { echo "FAIL: no line of the output matches: $p"; failed=1; }
done
[ "$failed" -eq 0 ] && echo "PASS: status and message as expected"
exit "$failed"
