#!/usr/bin/env bash
# The stuck-call diagnosis, end to end: 4 ranks, one misbehaves at all-reduce #6
# (weft-stuck-call), and every other rank's error must name it and say how; the
# lowest rank that answered prints the table once; nothing is left behind.
# usage: stuck_call.sh WEFT_RUN STUCK_CALL_EXE
set -u
run=$1 exe=$2
out=$(mktemp)
name=$(basename "$exe")
cleanup() { pkill -9 -x "$name" 2>/dev/null; rm -f "$out"; }
trap cleanup EXIT
before=$(ls /dev/shm | grep -c '^weft-' || true)
fail=0 checks=0
# case MODE VICTIM NEEDLE: every rank but the victim fails naming rank VICTIM and NEEDLE.
case_() {
  local mode=$1 victim=$2 needle=$3
  local start=$(date +%s%N)
  WEFT_TIMEOUT_MS=1500 timeout 60 "$run" -n 4 --timeout 40 -- "$exe" "$mode" "$victim" >"$out" 2>&1
  local rc=$? ms=$(( ($(date +%s%N) - start) / 1000000 ))
  pkill -9 -x "$name" 2>/dev/null  # a stopped victim outlives weft-run's grace only by accident
  local ok=1
  for r in 0 1 2 3; do
    [ "$r" -eq "$victim" ] && continue
    line=$(grep "^RESULT rank=$r " "$out" | head -1)
    if ! [[ "$line" =~ rank\ $victim[^0-9] ]] || [[ "$line" != *"$needle"* ]]; then
      echo "FAIL [$mode $victim]: rank $r: ${line:-no RESULT line}"
      ok=0
    fi
  done
  [ "$rc" -ne 0 ] || { echo "FAIL [$mode $victim]: weft-run exited 0"; ok=0; }
  checks=$((checks + 1))
  if [ $ok -eq 1 ]; then echo "ok [$mode $victim] in ${ms} ms"; else fail=1; cat "$out"; fi
}
table() {  # the table was printed exactly once
  local n=$(grep -c "^weft diagnosis (rank" "$out")
  checks=$((checks + 1))
  [ "$n" -eq 1 ] || { echo "FAIL [$1]: the table was printed $n times"; fail=1; }
}
case_ skip 2 "has not entered allreduce #6"; table skip
# outside() MODE: the victim left #5 about when the others entered #6, which they
# waited in for WEFT_TIMEOUT_MS=1500 ms: the diagnosis gives it at least 1000 ms.
outside() {
  local ms
  ms=$(grep -o "is outside weft after #5, for [0-9]* ms" "$out" | head -1 | grep -o "for [0-9]*" | grep -o "[0-9]*")
  checks=$((checks + 1))
  [ -n "$ms" ] && [ "$ms" -ge 1000 ] || { echo "FAIL [$1]: how long the victim was outside weft: '${ms}'"; fail=1; }
}
outside skip
case_ sleep 1 "has not entered allreduce #6"; table sleep; outside sleep
case_ stop 2 "did not answer"; table stop
grep -q "weft-run: rank 1 .*rank 2 (pid [0-9]*) is stopped (SIGSTOP)\|weft-run: rank [0-3] .*rank 2 (pid [0-9]*) is stopped (SIGSTOP)" "$out" ||
  { echo "FAIL [stop 2]: weft-run did not name the stopped rank"; grep "^weft-run" "$out"; fail=1; }
checks=$((checks + 1))
# Rank 0's process runs the bootstrap root: stopped, it cannot gather the table;
# the survivors ask each other's status listeners instead, name rank 0 as not
# answering, and the lowest of them prints the table.
case_ stop 0 "did not answer"; table "stop 0"
checks=$((checks + 1))
grep -q "^RESULT rank=1 .*asked rank to rank" "$out" || { echo "FAIL [stop 0]: not asked rank to rank"; fail=1; }
# A different collective: the transfer sizes disagree, and the ranks say so.
case_ other 2 "mismatched calls"
# dump_case MODE VICTIM PATTERN: the victim asks for a dump while outside weft and
# the others wait in #6; PATTERN is found in the output, every rank then completes #6.
dump_case() {
  local mode=$1 victim=$2 pattern=$3
  WEFT_TIMEOUT_MS=3000 timeout 60 "$run" -n 4 --timeout 40 -- "$exe" "$mode" "$victim" >"$out" 2>&1
  local rc=$?
  checks=$((checks + 1))
  if [ $rc -eq 0 ] && grep -q "$pattern" "$out" && [ "$(grep -c '^RESULT rank=[0-3] rc=0 : ok' "$out")" -eq 4 ]; then
    echo "ok [$mode $victim]"
  else
    echo "FAIL [$mode $victim]: rc=$rc"; cat "$out"; fail=1
  fi
  table "$mode"
}
dump_case dump 3 "^DUMP rank=3 rc=0 : rank 3 (.*has not entered allreduce #6"
# The same through SIGUSR1: rank 0 prints the table as a status dump.
dump_case usr1 1 "^weft diagnosis (rank 0 of the communicator, status dump): rank 1 (.*has not entered allreduce #6"
sleep 0.3
if pgrep -x "$name" >/dev/null; then echo "FAIL: leftover processes"; fail=1; fi
after=$(ls /dev/shm | grep -c '^weft-' || true)
[ "$after" -le "$before" ] || { echo "FAIL: leftover shm segments"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: $checks checks"
exit $fail
