#!/usr/bin/env bash
# Kills one rank in the middle of a large all-reduce and checks that every
# survivor reports an error naming it well within the deadline, weft-run exits
# non-zero, and no process or shared-memory segment is left behind.
# usage: kill_rank.sh WEFT_RUN KILL_RANK_EXE [split]
set -u
. "$(dirname "$0")/job_helpers.sh"
run=$1 exe=$2 mode=${3:-}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
before=$(shm_segments)
start=$(date +%s)
WEFT_TIMEOUT_MS=20000 timeout 120 "$run" -n 4 --timeout 90 -- "$exe" 2 $mode >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail=0
[ $rc -ne 0 ] || { echo "FAIL: weft-run exited 0"; fail=1; }
named=$(grep -c "names the dead peer" "$out")
[ "$named" -eq 3 ] || { echo "FAIL: $named of 3 survivors named rank 2"; fail=1; }
[ $elapsed -lt 60 ] || { echo "FAIL: took ${elapsed}s"; fail=1; }
no_leftovers "$exe" "$before" || fail=1
[ $fail -eq 0 ] && echo "PASS: 3 survivors named the dead rank in ${elapsed}s; weft-run rc=$rc"
exit $fail
