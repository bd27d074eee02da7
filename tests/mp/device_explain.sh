#!/bin/sh
# WEFT_EXPLAIN for all-reduces on device memory over cuda_p2p, through the stand-in
# CUDA driver (4 ranks on its one GPU: link class gpu): each size class explained
# once, one-shot against two-shot by tune/device_cost.h with the built-in gpu
# constants (alpha 170 us, beta = gamma = 0.48 ps/B; 4 ranks share the GPU, so
# beta and gamma count 4 times; 32 MiB buffers, R rounds):
#   one-shot R x 170 us + 3N x 4 x 0.48 ps (moved) + 3N x 4 x 0.48 ps (reduced) = R x 170 us + 11.52 ps N
#   two-shot 2R x 170 us + 1.5N x 4 x 0.48 ps + 0.75N x 4 x 0.48 ps        = 2R x 170 us + 4.32 ps N
# two-shot is cheaper once 7.2 ps N > R x 170 us: N > 23.6 MB a round, so
# 1, 4 and 16 MiB go one-shot and 64 MiB (2 rounds: > 47.2 MB) two-shot. Then
# WEFT_P2P_ONESHOT_BYTES=0 forces two-shot at 1 MiB and says so. Results are
# checked on every rank (weft-perf -c 1).
#   device_explain.sh WEFT_RUN WEFT_PERF DRIVER
set -u
run=$1 perf=$2 driver=$3
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }
WEFT_EXPLAIN=1 WEFT_TUNE_ONLINE=0 "$run" -n 4 --timeout 200 -- "$perf" allreduce -n 2 -w 1 -c 1 -b 1M -e 64M -f 4 \
  -d float --device "$driver" >"$log" 2>&1 || fail "weft-perf at 4 ranks"
for want in "1048576 oneshot" "4194304 oneshot" "16777216 oneshot" "67108864 twoshot"; do
  set -- $want
  n=$(grep -c "weft explain: allreduce $1 B (size class [0-9]*) on device memory, 4 ranks over cuda_p2p, link class gpu" "$log")
  [ "$n" = 1 ] || fail "$1 B explained $n times (want once)"
  pick=$(grep -A2 "weft explain: allreduce $1 B .*on device memory" "$log" | sed -n 's/.*weft explain: *\([a-z]*\) .*<- pick/\1/p')
  [ "$pick" = "$2" ] || fail "$1 B: picked '$pick', want $2"
  echo "$1 B: $2"
done
grep -q "# Out of bounds values : 0 OK" "$log" || fail "wrong results (or none checked)"
WEFT_EXPLAIN=1 WEFT_TUNE_ONLINE=0 WEFT_P2P_ONESHOT_BYTES=0 "$run" -n 2 --timeout 100 -- "$perf" allreduce -n 1 -w 0 \
  -c 1 -b 1M -e 1M -d float --device "$driver" >"$log" 2>&1 || fail "weft-perf, WEFT_P2P_ONESHOT_BYTES=0"
grep -q "# Out of bounds values : 0 OK" "$log" || fail "wrong results with two-shot (or none checked)"
grep -q "link class gpu .*WEFT_P2P_ONESHOT_BYTES=0 decides" "$log" || fail "the forced choice is not said"
grep -q "twoshot .*<- pick" "$log" || fail "WEFT_P2P_ONESHOT_BYTES=0 did not force two-shot"
echo "WEFT_P2P_ONESHOT_BYTES=0: twoshot"
