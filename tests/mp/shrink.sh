#!/usr/bin/env bash
# weftCommShrink under `weft-run --elastic`: ranks die (or leave) and the rest
# shrink and go on, checked exactly by weft-shrink; then no process or
# shared-memory segment may be left.
# usage: shrink.sh WEFT_RUN SHRINK_EXE MODE SURVIVORS
set -u
. "$(dirname "$0")/job_helpers.sh"
run=$1 exe=$2 mode=$3 survivors=$4
out=$(mktemp)
trap 'rm -f "$out"' EXIT
before=$(shm_segments)
start=$(date +%s)
WEFT_TIMEOUT_MS=${WEFT_TIMEOUT_MS:-10000} timeout 150 "$run" --elastic -n 4 --timeout 120 -- "$exe" "$mode" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail=0
if [ "$mode" = mismatch ]; then
  ok=$(grep -c "failed after .* as it should" "$out")
  want_rc=0
else
  ok=$(grep -c ": PASS" "$out")
  want_rc=0
fi
[ "$ok" -eq "$survivors" ] || { echo "FAIL: $ok of $survivors ranks passed"; fail=1; }
[ $rc -eq $want_rc ] || { echo "FAIL: weft-run exited $rc"; fail=1; }
if grep -q "FAIL" "$out"; then fail=1; fi
no_leftovers "$exe" "$before" || fail=1
[ $fail -eq 0 ] && echo "PASS: $mode: $survivors ranks went on in ${elapsed}s; weft-run rc=$rc"
exit $fail
