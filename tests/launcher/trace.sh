#!/bin/sh
# WEFT_TRACE under weft-run -n 2: weft-perf all-reduce (checked, -c 1, online tuning
# on) and sendrecv each write one trace per rank (%r); tools/weft-trace/merge.py joins
# them and trace_check.py checks them (calls alike on both ranks, steps inside their
# calls, bytes sent per all-reduce at least the least any algorithm sends).
# usage: trace.sh WEFT_RUN WEFT_PERF
set -u
run=$1 perf=$2
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
