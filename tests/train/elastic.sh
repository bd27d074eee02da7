#!/usr/bin/env bash
# weft-train --elastic under weft-run --elastic: 4 ranks x --grad-accum 3; rank
# VICTIM is SIGKILLed after the first checkpoint. The survivors must name it,
# shrink to 3 ranks x --grad-accum 4, reload the last checkpoint and finish, and
# every step they trained must match an uninterrupted one-process run with
# --grad-accum 12 (the same batches; only the reduction order differs). Nothing
# may be left behind. Needs the Debian fortunes corpus (exit 77 = skipped).
# usage: elastic.sh WEFT_RUN WEFT_TRAIN VICTIM
set -u
. "$(dirname "$0")/../mp/job_helpers.sh"
run=$1 exe=$2 victim_rank=$3
[ -d "${WEFT_FORTUNE_DIR:-/usr/share/games/fortunes}" ] || { echo "SKIPPED: fortunes not installed"; exit 77; }
tmp=$(mktemp -d)
cleanup() { pkill -9 -f -- "--out $tmp/" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
before=$(shm_segments)
args=(--preset tiny --batch 4 --seq 32 --steps 40 --eval-every 0 --sample 0 --log-every 1 --data "$tmp/data")
# The data files first, so that both runs read the same tokens.
timeout 120 "$exe" --prepare-data --data "$tmp/data" >/dev/null || { echo "FAIL: --prepare-data"; exit 1; }
OMP_WAIT_POLICY=passive WEFT_TIMEOUT_MS=10000 timeout 200 "$run" --elastic -n 4 --timeout 180 -- \
  "$exe" "${args[@]}" --grad-accum 3 --save-every 5 --elastic --out "$tmp/run" >"$tmp/log" 2>&1 &
job=$!
for _ in $(seq 1200); do [ -f "$tmp/run/checkpoint.bin" ] && break; sleep 0.1; done
sleep 0.5  # a few steps past the first checkpoint
victim=$(rank_pid "--out $tmp/run" "$victim_rank")
fail=0
[ -n "$victim" ] || { echo "FAIL: rank $victim_rank not found (no checkpoint after 120 s?)"; cat "$tmp/log"; exit 1; }
kill -9 "$victim"
wait $job
rc=$?
cat "$tmp/log"
[ $rc -eq 0 ] || { echo "FAIL: weft-run exited $rc"; fail=1; }
named=$(grep -c "^rank [0-9]: lost rank $victim_rank " "$tmp/log")
[ "$named" -eq 3 ] || { echo "FAIL: $named of 3 survivors named rank $victim_rank"; fail=1; }
grep -q "^elastic: going on with 3 ranks x --grad-accum 4 .* from the last checkpoint" "$tmp/log" ||
  { echo "FAIL: no recovery from the checkpoint"; fail=1; }
step=$(sed -n 's/^resumed from .* at step \([0-9]*\) .*/\1/p' "$tmp/log" | tail -1)
[ -n "$step" ] || { echo "FAIL: the survivors did not resume"; fail=1; step=0; }
grep -q "^done: $((40 - step)) steps" "$tmp/log" || { echo "FAIL: the survivors did not finish step 40"; fail=1; }
sleep 0.5
if pgrep -f -- "--out $tmp/run" >/dev/null; then echo "FAIL: leftover processes"; fail=1; fi
[ "$(shm_segments)" -le "$before" ] || { echo "FAIL: leftover shm segments"; fail=1; }
# The reference: one process, the same 12 micro-batches per step, never interrupted.
OMP_WAIT_POLICY=passive timeout 300 "$exe" "${args[@]}" --grad-accum 12 --out "$tmp/ref" >"$tmp/ref.log" 2>&1 ||
  { cat "$tmp/ref.log"; echo "FAIL: reference run"; exit 1; }
# Per step the last complete row (steps redone after the recovery come later in the file).
python3 - "$tmp/run/metrics.csv" "$tmp/ref/metrics.csv" "$step" <<'PY' || fail=1
import sys
def rows(path):
    out = {}
    for line in open(path).read().splitlines()[1:]:
        f = line.split(",")
        if len(f) == 14 and f[0] and f[1]:
            out[int(f[0])] = (float(f[1]), float(f[2]) if f[2] else None)
    return out
run, ref, resumed = rows(sys.argv[1]), rows(sys.argv[2]), int(sys.argv[3])
steps = [s for s in range(resumed + 1, 41)]
missing = [s for s in steps if s not in run]
if missing:
    sys.exit(f"FAIL: steps {missing} missing from the elastic run's metrics")
worst = max(abs(run[s][0] - ref[s][0]) for s in steps)
val = abs(run[40][1] - ref[40][1])
print(f"steps {resumed + 1}-40 on 3 ranks vs one process: largest loss difference {worst:.2e}, "
      f"final val loss {run[40][1]:.5f} vs {ref[40][1]:.5f}")
if worst > 1e-3 or val > 1e-3:
    sys.exit("FAIL: the elastic run left the reference's trajectory")
PY
[ $fail -eq 0 ] && echo "PASS: rank $victim_rank lost at step > 5; 3 ranks resumed step $step and matched the reference"
exit $fail
