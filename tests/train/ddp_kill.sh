#!/usr/bin/env bash
# A data-parallel (or, with --pp 3 --microbatches 3 as extra arguments,
# pipeline-parallel) weft-train run on 3 ranks with rank 1 killed (SIGKILL)
# mid-run: both survivors exit with weft's error naming the dead rank within the
# deadline, weft-run exits non-zero and names it, nothing is left behind, and the
# last checkpoint resumes in one process with the same global batch (3
# micro-batches). Needs the Debian fortunes corpus (exit 77 = skipped without it).
# usage: ddp_kill.sh WEFT_RUN WEFT_TRAIN [weft-train arguments of the 3-rank run]
set -u
. "$(dirname "$0")/../mp/job_helpers.sh"
run=$1 exe=$2
shift 2
[ -d "${WEFT_FORTUNE_DIR:-/usr/share/games/fortunes}" ] || { echo "SKIPPED: fortunes not installed"; exit 77; }
tmp=$(mktemp -d)
cleanup() { pkill -9 -f -- "--out $tmp/run" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
before=$(shm_segments)
args=(--preset tiny --batch 4 --seq 32 --steps 100000 --save-every 5 --eval-every 0 --sample 0 --data "$tmp/data")
OMP_WAIT_POLICY=passive WEFT_TIMEOUT_MS=10000 timeout 150 "$run" -n 3 --timeout 120 -- \
  "$exe" "${args[@]}" "$@" --out "$tmp/run" >"$tmp/log" 2>&1 &
job=$!
for _ in $(seq 1200); do [ -f "$tmp/run/checkpoint.bin" ] && break; sleep 0.1; done
sleep 0.5  # a few steps past the first checkpoint
victim=$(rank_pid "--out $tmp/run" 1)
fail=0
[ -n "$victim" ] || { echo "FAIL: rank 1 not found (no checkpoint after 120 s?)"; cat "$tmp/log"; exit 1; }
start=$(date +%s.%N)
kill -9 "$victim"
wait $job
rc=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
cat "$tmp/log"
[ $rc -ne 0 ] || { echo "FAIL: weft-run exited 0"; fail=1; }
for r in 0 2; do
  grep -q "^weft-train: rank $r: .*rank 1" "$tmp/log" || { echo "FAIL: rank $r did not name rank 1"; fail=1; }
done
grep -q "weft-run: rank 1 .*signal" "$tmp/log" || { echo "FAIL: weft-run did not report rank 1's death"; fail=1; }
awk -v e="$elapsed" 'BEGIN { exit !(e < 12) }' || { echo "FAIL: took ${elapsed}s (deadline 10 s)"; fail=1; }
sleep 0.5
if pgrep -f -- "--out $tmp/run" >/dev/null; then echo "FAIL: leftover processes"; fail=1; fi
[ "$(shm_segments)" -le "$before" ] || { echo "FAIL: leftover shm segments"; fail=1; }
# The checkpoint's step (int64 after magic, version, 5 config ints, dtype).
step=$(od -An -t d8 -j 36 -N 8 "$tmp/run/checkpoint.bin" | tr -d ' ')
if OMP_WAIT_POLICY=passive timeout 120 "$exe" "${args[@]/100000/$((step + 2))}" --grad-accum 3 \
     --resume "$tmp/run" --out "$tmp/resumed" >"$tmp/resume.log" 2>&1 &&
   grep -q "resumed from .* at step $step" "$tmp/resume.log" && grep -q '^done: 2 steps' "$tmp/resume.log"; then
  echo "resumed the checkpoint of step $step in one process and trained 2 more steps"
else
  cat "$tmp/resume.log"; echo "FAIL: the last checkpoint (step $step) did not resume"; fail=1
fi
[ $fail -eq 0 ] && echo "PASS: survivors named rank 1 ${elapsed}s after the kill; weft-run rc=$rc"
exit $fail
