#!/usr/bin/env bash
# weft-perf -a all / --calibrate end to end: every algorithm really runs (its own
# forced communicator, seen in the COLL log), and auto too; results are checked
# (-c 1); -a all's JSON holds every sample; the --calibrate file has a
# line per (algorithm, size segment), calibrations of other rank counts and
# collectives are kept while a repeat replaces its own block, the file loads as
# WEFT_TUNING_FILE, and misuse is refused with a message.
# Usage: test_calibrate.sh path/to/weft-run path/to/weft-perf
set -u
WR=${1:?usage: test_calibrate.sh weft-run weft-perf}
PERF=${2:?usage: test_calibrate.sh weft-run weft-perf}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-calibrate-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
FILE=$TMP/tuning.txt
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok:   $*"; }
# weft-run's own --timeout ends every rank; `timeout` guards weft-run itself.
calibrate() {
  local n=$1; shift
  timeout -s KILL 200 "$WR" -n "$n" --timeout 180 -- "$PERF" "$@" --calibrate "$FILE" >"$TMP/out" 2>"$TMP/err"
}
block() { grep -c "^# weft-perf --calibrate $1 $2 ranks shm:" "$FILE"; }

WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=COLL calibrate 3 allreduce -b 8 -e 4M -f 8 -w 1 -c 1
rc=$?
if [ $rc != 0 ]; then fail "3-rank calibration: exit $rc: $(tail -5 "$TMP/err")"; else
  algos=$(awk '/^# +size /{for (i = 3; $i != "fastest"; ++i) print $i}' "$TMP/out")
  [ "$(echo "$algos" | wc -w)" -ge 8 ] || fail "table lists too few algorithms: $algos"
  for a in $algos; do
    # "algorithm hierarchical [ring / - / -], 12 steps": the choices inside it after the name
    grep -Eq "allreduce count [0-9]*: algorithm $a( \[[^]]*\])?," "$TMP/err" || fail "$a never ran (no COLL line)"
    for from in 0 65536 2097152; do
      grep -q "^shm allreduce $a 3 $from " "$FILE" || fail "no line for $a at 3 ranks from $from B"
    done
  done
  grep -q "auto within 10% of the fastest at [0-9]* of 7 sizes" "$TMP/out" || fail "no auto summary"
  grep -q "the pick's own time is within 10% of the fastest at [0-9]* of 7 sizes" "$TMP/out" || fail "no pick summary"
  pass "3 ranks: $(echo $algos | wc -w) algorithms ran and were fitted"
fi

calibrate 2 allreduce -b 8 -e 1M -f 16 -w 1 -c 1 || fail "2-rank calibration: $(tail -3 "$TMP/err")"

# -a all without --calibrate: the table and a JSON of every sample, no file change.
before=$(md5sum <"$FILE")
timeout -s KILL 100 "$WR" -n 2 --timeout 90 -- "$PERF" allreduce -b 8 -e 64K -f 64 -a all -c 1 \
  --json "$TMP/all.json" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc = 0 ] && python3 - "$TMP/all.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["nranks"] == 2 and d["rounds"] == 3, d
assert [p["bytes"] for p in d["points"]] == [8, 512, 32768], d["points"]
for p in d["points"]:
    s = p["samples_us"]
    assert "auto" in s and "ring" in s and len(s) >= 9, sorted(s)
    assert all(len(v) == 3 and min(v) > 0 for v in s.values()), s
    assert p["pick"] in s, p["pick"]
PY
then pass "-a all: table and JSON"; else fail "-a all: exit $rc $(tail -3 "$TMP/err")"; fi
[ "$before" = "$(md5sum <"$FILE")" ] || fail "-a all changed the tuning file"
# --round-ms: 8-byte calls' batches take ~10 ms at most, so 200 ms of them needs more
# than --rounds 2; every algorithm gets the same number of rounds.
timeout -s KILL 100 "$WR" -n 2 --timeout 90 -- "$PERF" allreduce -b 8 -e 8 -a all -c 0 --rounds 2 --round-ms 200 \
  --json "$TMP/more.json" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc = 0 ] && python3 - "$TMP/more.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
counts = {len(v) for v in d["points"][0]["samples_us"].values()}
assert len(counts) == 1 and counts.pop() > 2, d["points"][0]["samples_us"]
PY
then pass "--round-ms: more rounds, the same for every algorithm"; else fail "--round-ms: exit $rc $(tail -3 "$TMP/err")"; fi
timeout -s KILL 60 "$WR" -n 2 --timeout 50 -- "$PERF" allreduce -b 8 -e 8 --round-ms 100 >"$TMP/out" 2>"$TMP/err"
[ $? = 2 ] && grep -q "are for -a all" "$TMP/err" && pass "--round-ms without -a all refused" ||
  fail "--round-ms without -a all: $(cat "$TMP/err")"
calibrate 2 reducescatter -b 1K -e 1M -f 8 -w 1 -c 1 || fail "reducescatter calibration: $(tail -3 "$TMP/err")"
calibrate 3 allreduce -b 64 -e 1M -f 16 -w 1 -c 0 || fail "3-rank repeat: $(tail -3 "$TMP/err")"
[ "$(block allreduce 3)" = 1 ] && [ "$(block allreduce 2)" = 1 ] && [ "$(block reducescatter 2)" = 1 ] &&
  pass "blocks kept and replaced" || fail "blocks wrong: $(grep '^# weft-perf' "$FILE")"

WEFT_TUNING_FILE=$FILE WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=TUNE timeout -s KILL 100 "$WR" -n 3 --timeout 90 -- \
  "$PERF" allreduce -b 8 -e 256K -f 8 -n 2 -w 1 -c 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 0 ] && grep -q "constants from $FILE" "$TMP/err" && pass "the file loads as WEFT_TUNING_FILE" ||
  fail "using the file: exit $rc: $(grep -m3 -i 'error\|warn' "$TMP/err")"

timeout -s KILL 60 "$WR" -n 2 --timeout 50 -- "$PERF" allreduce -a ring --calibrate "$FILE" >"$TMP/out" 2>"$TMP/err"
[ $? = 2 ] && grep -q "it takes no other -a" "$TMP/err" && pass "-a ring with --calibrate refused" ||
  fail "-a ring with --calibrate: $(cat "$TMP/err")"
timeout -s KILL 60 "$WR" -n 2 --timeout 50 -- "$PERF" allreduce -b 1M -e 1M --calibrate "$FILE" >"$TMP/out" 2>"$TMP/err"
[ $? = 2 ] && grep -q "give a sweep" "$TMP/err" && pass "one size refused" || fail "one size: $(cat "$TMP/err")"
calibrate 2 sendrecv -b 8 -e 64
[ $? = 2 ] && grep -q "no algorithms to choose from" "$TMP/err" && pass "sendrecv refused" ||
  fail "sendrecv --calibrate: $(cat "$TMP/err")"

[ $FAILS = 0 ] && echo "calibrate: all passed" || echo "calibrate: $FAILS failed"
exit $((FAILS != 0))
