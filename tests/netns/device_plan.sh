#!/usr/bin/env bash
# Device all-reduces on 2 namespace hosts x 2 ranks through the stand-in CUDA
# driver, each call planned whole (tune/device_cost.h): WEFT_EXPLAIN shows once
# per size class the levels plan (cuda_p2p within each host, staged across) and
# the whole call staged, each as the sum of its parts, and the pick is the
# cheaper. The stand-in's ranks share its one GPU (link class gpu, 170 us a
# barrier): the levels' two barriers outweigh the host call's few shm and tcp
# steps at 8 B, while at 8 MiB staging the whole call copies twice the bytes and
# reduces them through shared memory, so the picks there are staged and levels.
# Every element is checked (weft-perf -c 1). Then WEFT_DEVICE_LEVELS=1 and =0
# decide alone, and WEFT_DEVICE_LEVEL_ROUNDS=4 sends the levels in 4 overlapped
# rounds, the results again checked.
#   device_plan.sh NETNS_TEST WEFT_PERF DRIVER
set -u
netns=$1 perf=$2 driver=$3
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }
sweep() {  # extra environment for the job; the sweep 8 B .. 8 MiB, every 16x
  env "$@" WEFT_EXPLAIN=1 WEFT_TUNE_ONLINE=0 timeout 300 "$netns" run 2 2 "$perf" -- allreduce -b 8 -e 8M -f 16 \
    -n 1 -w 0 -c 1 -d float --device "$driver" >"$out" 2>&1
  local rc=$?
  [ $rc -eq 77 ] && exit 77
  [ $rc -eq 0 ] || fail "the job ($*) exited $rc"
  grep -q "# Out of bounds values : 0 OK" "$out" || fail "wrong results ($*), or none checked"
}
# plan BYTES: prints the pick, after checking each line adds up and the pick is
# the cheapest: levels (one level after another), rounds (levels in overlapped
# rounds: s + e + (R-1) max(s, e), taken only where 10% faster than levels) or staged.
plan() {
  local n
  n=$(grep -c "weft explain: allreduce $1 B (size class [0-9]*) on device memory, 2 hosts x 2 ranks" "$out")
  [ "$n" = 1 ] || fail "$1 B explained $n times (want once)"
  awk -v head="weft explain: allreduce $1 B (size class" '
    function near(a, c) { return a - c < 0.01 + 1e-6 * c && c - a < 0.01 + 1e-6 * c }
    function max(a, b) { return a > b ? a : b }
    index($0, head) == 1 && /on device memory, 2 hosts/ { on = 1; next }
    on && $1 == "weft" && ($3 == "levels" || $3 == "rounds" || $3 == "staged") {
      if (/<- pick/) picks = picks " " $3
      if ($3 == "levels") { lv = $4; if (!near(lv, $14 + $17 + $24)) bad = bad " levels" }
      if ($3 == "staged") { st = $4; if (!near(st, $8 + $15)) bad = bad " staged" }
      if ($3 == "rounds") {
        rd = $4; s = $15 + $18; e = $24; taken = !/not taken/
        if (!near(rd, s + e + ($7 - 1) * max(s, e))) bad = bad " rounds"
      }
      next
    }
    { on = 0 }
    END {
      if (lv == "" || st == "") { print "missing"; exit }
      if (bad != "") { print "not the sum of its parts:" bad; exit }
      if (taken && rd + 0 > 0.9 * lv) { print "rounds taken, not 10% faster than levels"; exit }
      if (rd != "" && !taken && rd + 0 <= 0.9 * lv) { print "rounds 10% faster than levels, not taken"; exit }
      lp = taken ? rd : lv
      want = lp + 0 <= st + 0 ? (taken ? "rounds" : "levels") : "staged"
      if (picks != " " want) { print "picked" picks ", not the cheapest " want; exit }
      print want
    }' "$out"
}
sweep
for bytes in 8 128 2048 32768 524288 8388608; do
  p=$(plan "$bytes")
  case $p in levels | rounds | staged) echo "$bytes B: $p" ;; *) fail "$bytes B: $p" ;; esac
  [ "$bytes" = 8 ] && [ "$p" != staged ] && fail "8 B went $p, want staged"
  [ "$bytes" = 8388608 ] && [ "$p" = staged ] && fail "8 MiB went staged, want levels (in rounds or not)"
done
for forced in 1 0 rounds; do
  case $forced in
    rounds) sweep WEFT_DEVICE_LEVELS=1 WEFT_DEVICE_LEVEL_ROUNDS=4 ;;
    *) sweep WEFT_DEVICE_LEVELS=$forced ;;
  esac
  case $forced in
    1) grep -q "WEFT_DEVICE_LEVELS=1 decides" "$out" || fail "WEFT_DEVICE_LEVELS=1 is not said to decide"
       grep "weft explain:   staged .*<- pick" "$out" && fail "WEFT_DEVICE_LEVELS=1 but a call went staged" ;;
    0) grep -q "on device memory, 2 hosts x 2 ranks" "$out" && fail "WEFT_DEVICE_LEVELS=0 still planned levels" ;;
    rounds) grep -q "rounds .* 4 overlapped rounds .*WEFT_DEVICE_LEVEL_ROUNDS decides  <- pick" "$out" ||
              fail "WEFT_DEVICE_LEVEL_ROUNDS=4: no call explained as going in 4 rounds" ;;
  esac
  echo "WEFT_DEVICE_LEVELS=$forced: results checked"
done
echo "PASS"
