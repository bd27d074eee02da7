#!/bin/sh
# weft-perf --explain (WEFT_EXPLAIN=1) under weft-run -n 2: rank 0 explains every
# size class of the sweep exactly once (its candidates with latency, bandwidth and
# reduction terms, one pick), and online tuning reports measured times beside the
# predictions. Only rank 0 explains.
# usage: explain.sh WEFT_RUN WEFT_PERF
set -u
run=$1 perf=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 100 "$run" -n 2 --timeout 90 -- "$perf" allreduce -b 8 -e 262144 -f 8 --explain >"$tmp/out" 2>"$tmp/err" ||
  { cat "$tmp/out" "$tmp/err"; echo "FAIL: weft-perf --explain"; exit 1; }
fail=0
for bytes in 8 64 512 4096 32768 262144; do
  n=$(grep -c "^weft explain: allreduce $bytes B (size class [0-9]*), 2 ranks, link class shm:" "$tmp/err")
  [ "$n" = 1 ] || { echo "FAIL: $bytes B explained $n times"; fail=1; }
done
# Each explanation: candidate lines with the three terms, exactly one pick.
awk '/^weft explain: allreduce [0-9]+ B \(size class [0-9]+\), / { if (h) check(); h = $0; c = 0; p = 0; next }
     /^weft explain:   .* us = latency .* \+ bandwidth .* \+ reduction / { c++; if (/<- pick/) p++ }
     function check() { if (c < 2 || p != 1) { print "FAIL: " h ": " c " candidates, " p " picks"; bad = 1 } }
     END { if (h) check(); exit bad }' "$tmp/err" || fail=1
grep -q "^weft explain: allreduce [0-9]* B (size class [0-9]*) measured by online tuning, slowest rank: .*predicted" \
  "$tmp/err" || { echo "FAIL: no measured times"; fail=1; }
grep -c "^weft explain: allreduce" "$tmp/err" | xargs echo "explanation lines:"
grep -m 3 "^weft explain" "$tmp/err"
[ $fail -eq 0 ] && echo PASS
exit $fail
