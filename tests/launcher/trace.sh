#!/bin/sh
# WEFT_TRACE under weft-run -n 2: weft-perf all-reduce (checked, -c 1, online tuning
# on) and sendrecv each write one trace per rank (%r); tools/weft-trace/merge.py joins
# them and trace_check.py checks them (calls alike on both ranks, steps inside their
# calls, bytes sent per all-reduce at least the least any algorithm sends). Then a
# rank SIGKILLed in the middle of its all-reduces (weft-kill-rank) must leave a
# trace of the calls it finished, which merge.py reads.
# usage: trace.sh WEFT_RUN WEFT_PERF WEFT_KILL_RANK
set -u
run=$1 perf=$2 kill_rank=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for sub in allreduce sendrecv; do
  WEFT_TRACE="$tmp/$sub-%r.json" timeout 100 "$run" -n 2 --timeout 90 -- "$perf" $sub -b 8 -e 1M -f 16 -c 1 -n 3 -w 1 \
    >"$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: weft-perf $sub with WEFT_TRACE"; exit 1; }
  python3 "$here/../../tools/weft-trace/merge.py" "$tmp/$sub.json" "$tmp/$sub-0.json" "$tmp/$sub-1.json" || exit 1
  extra=""
  [ $sub = sendrecv ] && extra=--p2p
  python3 "$here/trace_check.py" "$tmp/$sub.json" "$tmp/$sub-0.json" "$tmp/$sub-1.json" $extra || exit 1
done
WEFT_TRACE="$tmp/kill-%r.json" WEFT_TIMEOUT_MS=20000 timeout 100 "$run" -n 3 --timeout 90 -- "$kill_rank" 1 \
  >"$tmp/out" 2>&1
python3 "$here/../../tools/weft-trace/merge.py" "$tmp/kill.json" "$tmp"/kill-[012].json >"$tmp/merge.out" ||
  { cat "$tmp/out" "$tmp/merge.out"; echo "FAIL: the traces of a job with a killed rank do not merge"; exit 1; }
cat "$tmp/merge.out"
python3 - "$tmp/kill.json" <<'PY' || exit 1
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
for rank in range(3):
    calls = [e for e in events if e["ph"] == "X" and e["cat"] == "coll" and e["pid"] == rank and e["args"]["ok"]]
    if not calls:
        sys.exit(f"FAIL: no finished all-reduce of rank {rank} in the trace")
    print(f"rank {rank}: {len(calls)} finished all-reduces traced")
PY
grep -q "kill-1.json cut short" "$tmp/merge.out" || { echo "FAIL: the killed rank's trace was closed?"; exit 1; }
echo "PASS: the killed rank left the trace of the calls it finished"
