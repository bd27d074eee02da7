#!/usr/bin/env bash
# Tests of weft-run, the local launcher: environment, exit-code propagation,
# failure handling, --timeout, signal forwarding, --tag-output, /dev/shm cleanup.
# Usage: test_launcher.sh path/to/weft-run
set -u

WR=${1:?usage: test_launcher.sh path/to/weft-run}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-launcher-test.XXXXXX")
# A sleep under a name no other process has, so pgrep can tell whether any rank
# (or anything a rank started) survived. Matched exactly against the process name
# (pgrep -x), which the kernel keeps to 15 characters; -f would also match the
# weft-run and sh command lines that mention the path.
MARK="wl$(printf %05d "$RANDOM")$(($$ % 100000))"
ln -s "$(command -v sleep)" "$TMP/$MARK"
SLEEP="$TMP/$MARK"
FAILS=0
# Survivors fail the test; they are sleeps that end on their own, so none is killed here.
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok:   $*"; }
survivors() { pgrep -x "$MARK" | wc -l; }
# Seconds since the epoch with fractions, for "it ended promptly" checks.
now() { date +%s.%N; }
elapsed_below() { awk -v a="$1" -v b="$(now)" -v lim="$2" 'BEGIN { exit !((b - a) < lim) }'; }

# Every test runs weft-run under `timeout` so a hang fails the test instead of the suite.
run() { timeout -s KILL 30 "$WR" "$@" >"$TMP/out" 2>"$TMP/err"; echo $? >"$TMP/rc"; }
rc() { cat "$TMP/rc"; }

# --- environment -------------------------------------------------------------
export WEFT_LT_INHERITED=kept WEFT_RANK=stale
run -n 4 sh -c 'echo "$WEFT_RANK $WEFT_NRANKS $WEFT_LOCAL_RANK $WEFT_LOCAL_SIZE $WEFT_COMM_ID $WEFT_JOB_SECRET $WEFT_LT_INHERITED"'
unset WEFT_LT_INHERITED WEFT_RANK
if [ "$(rc)" != 0 ]; then fail "env: exit $(rc)"; else
  ranks=$(awk '{print $1}' "$TMP/out" | sort -n | tr '\n' ' ')
  [ "$ranks" = "0 1 2 3 " ] || fail "env: ranks are '$ranks'"
  awk '$2 != 4 || $3 != $1 || $4 != 4 || $7 != "kept" { bad = 1 } END { exit bad }' "$TMP/out" ||
    fail "env: WEFT_NRANKS/LOCAL_RANK/LOCAL_SIZE or inherited variable wrong: $(cat "$TMP/out")"
  [ "$(awk '{print $5}' "$TMP/out" | sort -u | wc -l)" = 1 ] || fail "env: WEFT_COMM_ID differs"
  grep -Eqv '^[0-9]+ [0-9]+ [0-9]+ [0-9]+ 127\.0\.0\.1:[0-9]+ [0-9a-f]{32} kept$' "$TMP/out" &&
    fail "env: malformed line in: $(cat "$TMP/out")"
  [ "$(awk '{print $6}' "$TMP/out" | sort -u | wc -l)" = 1 ] || fail "env: WEFT_JOB_SECRET differs"
  pass "environment: distinct ranks, shared comm id and secret, rest of env kept"
fi
run -n 2 sh -c 'echo $WEFT_JOB_SECRET'
first=$(head -1 "$TMP/out")
run -n 2 sh -c 'echo $WEFT_JOB_SECRET'
[ "$first" != "$(head -1 "$TMP/out")" ] && pass "a new secret per job" || fail "secret repeated across jobs"

# --- success and exit-code propagation -------------------------------------
run -n 3 true
[ "$(rc)" = 0 ] && pass "all ranks exit 0 -> 0" || fail "all-true job exited $(rc)"

t0=$(now)
run -n 3 sh -c "[ \$WEFT_RANK = 2 ] && exit 3; exec $SLEEP 30"
if [ "$(rc)" = 3 ] && grep -Eq '^weft-run: rank 2 \(pid [0-9]+\) exited with code 3$' "$TMP/err" &&
   elapsed_below "$t0" 10 && [ "$(survivors)" = 0 ]; then
  pass "rank 2 exits 3 -> weft-run exits 3, names the rank, ends the others"
else
  fail "exit propagation: rc=$(rc) survivors=$(survivors) stderr: $(cat "$TMP/err")"
fi

# --- a rank killed by a signal ---------------------------------------------
t0=$(now)
run -n 3 sh -c "[ \$WEFT_RANK = 1 ] && kill -9 \$\$; exec $SLEEP 30"
if [ "$(rc)" = 137 ] && grep -Eq '^weft-run: rank 1 \(pid [0-9]+\) killed by signal 9 \(SIGKILL\)$' "$TMP/err" &&
   elapsed_below "$t0" 10 && [ "$(survivors)" = 0 ]; then
  pass "rank 1 kill -9 -> exit 137, others ended"
else
  fail "killed rank: rc=$(rc) survivors=$(survivors) stderr: $(cat "$TMP/err")"
fi

# --- a killed rank and a peer's error found at once: the killed rank is named ---
# A killed rank's peers see its sockets close and exit with an error within
# milliseconds; when weft-run finds both ended at once it must name the killed
# one, whatever order waitpid returns them in (it returns rank 0, the first
# forked, first). weft-run is stopped while both ranks end, so that it does.
export LT_DIR=$TMP
"$WR" -n 2 sh -c 'echo $$ > "$LT_DIR/pid.$WEFT_RANK"; while [ ! -e "$LT_DIR/go" ]; do sleep 0.01; done
  [ "$WEFT_RANK" = 0 ] && exit 1; kill -9 $$' >"$TMP/out" 2>"$TMP/err" &
wr=$!
# Whether rank $1 has ended (a zombie: weft-run, stopped, has not reaped it).
ended() { [ "$(awk '{ print $3 }' "/proc/$(cat "$TMP/pid.$1" 2>/dev/null)/stat" 2>/dev/null)" = Z ]; }
for _ in $(seq 500); do [ -s "$TMP/pid.0" ] && [ -s "$TMP/pid.1" ] && break; sleep 0.02; done
kill -STOP "$wr"
touch "$TMP/go"
for _ in $(seq 500); do ended 0 && ended 1 && break; sleep 0.02; done
both=$(ended 0 && ended 1 && echo yes)
kill -CONT "$wr"
for _ in $(seq 500); do kill -0 "$wr" 2>/dev/null || break; sleep 0.02; done
kill -9 "$wr" 2>/dev/null
wait "$wr"; echo $? >"$TMP/rc"
unset LT_DIR
rm -f "$TMP/go" "$TMP/pid.0" "$TMP/pid.1"
if [ "$both" != yes ]; then
  fail "killed rank beside a failed peer: the ranks did not both end while weft-run was stopped"
elif [ "$(rc)" = 137 ] && grep -Eq '^weft-run: rank 1 \(pid [0-9]+\) killed by signal 9 \(SIGKILL\)$' "$TMP/err" &&
     ! grep -q 'rank 0 (pid [0-9]*) exited' "$TMP/err"; then
  pass "rank 1 killed and rank 0 failed, found at once -> rank 1 named, exit 137"
else
  fail "killed rank beside a failed peer: rc=$(rc) stderr: $(cat "$TMP/err")"
fi

# --- --timeout ---------------------------------------------------------------
t0=$(now)
# The sleep is a grandchild (sh waits on it): ending the rank must end its subtree.
run -n 2 --timeout 1 sh -c "$SLEEP 30; true"
if [ "$(rc)" = 124 ] && grep -q '^weft-run: timeout after 1 s; terminating 2 ranks$' "$TMP/err" &&
   elapsed_below "$t0" 10 && [ "$(survivors)" = 0 ]; then
  pass "--timeout 1 -> exit 124, message, no survivors"
else
  fail "timeout: rc=$(rc) survivors=$(survivors) stderr: $(cat "$TMP/err")"
fi
WEFT_RUN_TIMEOUT=1 run -n 1 "$SLEEP" 30
[ "$(rc)" = 124 ] && [ "$(survivors)" = 0 ] && pass "WEFT_RUN_TIMEOUT=1 -> exit 124" ||
  fail "WEFT_RUN_TIMEOUT: rc=$(rc) survivors=$(survivors)"

# A rank that ignores SIGTERM gets SIGKILL after the grace period.
t0=$(now)
run -n 2 --timeout 0.5 sh -c "trap '' TERM; $SLEEP 30"
if [ "$(rc)" = 124 ] && elapsed_below "$t0" 12 && [ "$(survivors)" = 0 ]; then
  pass "SIGTERM ignored -> SIGKILL after the grace period"
else
  fail "grace kill: rc=$(rc) survivors=$(survivors) stderr: $(cat "$TMP/err")"
fi

# --- SIGINT forwarding -------------------------------------------------------
# Started in the background by a non-interactive shell, weft-run begins with SIGINT
# ignored; it must still take and forward it.
"$WR" -n 2 sh -c "trap 'echo got-int > $TMP/int.\$WEFT_RANK; exit 7' INT; $SLEEP 30 & wait" \
  >"$TMP/out" 2>"$TMP/err" &
wr_pid=$!
for _ in $(seq 200); do [ "$(survivors)" = 2 ] && break; sleep 0.05; done
t0=$(now)
kill -INT "$wr_pid"
wait "$wr_pid"
code=$?
if [ "$code" = 130 ] && [ -f "$TMP/int.0" ] && [ -f "$TMP/int.1" ] && elapsed_below "$t0" 10 &&
   [ "$(survivors)" = 0 ]; then
  pass "SIGINT forwarded to every rank, exit 130, no survivors"
else
  fail "SIGINT: rc=$code files=$(ls "$TMP" | grep -c '^int\.') survivors=$(survivors) stderr: $(cat "$TMP/err")"
fi

"$WR" -n 2 "$SLEEP" 30 >/dev/null 2>&1 &
wr_pid=$!
for _ in $(seq 200); do [ "$(survivors)" = 2 ] && break; sleep 0.05; done
kill -TERM "$wr_pid"
wait "$wr_pid"
code=$?
[ "$code" = 143 ] && [ "$(survivors)" = 0 ] && pass "SIGTERM forwarded, exit 143" ||
  fail "SIGTERM: rc=$code survivors=$(survivors)"

# --- --tag-output ------------------------------------------------------------
run -n 2 --tag-output sh -c 'echo hello $WEFT_RANK; echo oops >&2; printf "no newline"'
if [ "$(rc)" = 0 ] &&
   [ "$(sort "$TMP/out" | tr '\n' '|')" = "[0] hello 0|[0] no newline|[1] hello 1|[1] no newline|" ] &&
   [ "$(sort "$TMP/err" | tr '\n' '|')" = "[0] oops|[1] oops|" ]; then
  pass "--tag-output prefixes stdout and stderr lines, flushes partial lines"
else
  fail "tag-output: stdout: $(cat "$TMP/out") stderr: $(cat "$TMP/err")"
fi
run -n 1 sh -c 'echo plain'
[ "$(cat "$TMP/out")" = plain ] && pass "without --tag-output, output is untouched" ||
  fail "untagged output: $(cat "$TMP/out")"

# --- /dev/shm cleanup --------------------------------------------------------
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  keep="/dev/shm/weft-ltkeep-$$"
  touch "$keep"
  make_segs='p=weft-$(printf %s "$WEFT_JOB_SECRET" | cut -c1-16); echo $p > '"$TMP"'/prefix; touch /dev/shm/$p-seg$WEFT_RANK /dev/shm/$p'
  run -n 2 sh -c "$make_segs"
  prefix=$(cat "$TMP/prefix")
  left=$(ls /dev/shm | grep -c "^$prefix")
  [ "$(rc)" = 0 ] && [ "$left" = 0 ] && pass "segments of a finished job removed" ||
    fail "shm cleanup (success): rc=$(rc) left=$left"
  # Rank 0 crashes only once rank 1 has made its segment: a touch still running
  # when weft-run cleans up would create its file afterwards and fail the check.
  run -n 2 sh -c "$make_segs; [ \$WEFT_RANK = 0 ] && { i=0; while [ ! -e /dev/shm/\$p-seg1 ] && [ \$i -lt 500 ]; do sleep 0.01; i=\$((i+1)); done; kill -9 \$\$; }; exec $SLEEP 30"
  prefix=$(cat "$TMP/prefix")
  left=$(ls /dev/shm | grep -c "^$prefix")
  [ "$(rc)" = 137 ] && [ "$left" = 0 ] && pass "segments of a crashed job removed" ||
    fail "shm cleanup (crash): rc=$(rc) left=$left"
  [ -e "$keep" ] && pass "other jobs' segments untouched" || fail "removed an unrelated /dev/shm file"
  rm -f "$keep"
else
  # Counted as a skip by scripts/test: the other checks still decide pass or fail.
  echo "SKIP: /dev/shm not writable (3 shm cleanup checks not run)"
fi

# --- argument validation -----------------------------------------------------
run -n 2
[ "$(rc)" = 2 ] && grep -q '^usage: weft-run' "$TMP/err" && pass "missing command -> usage, exit 2" ||
  fail "missing command: rc=$(rc)"
for bad in 0 1025 x -3; do
  run -n "$bad" true
  [ "$(rc)" = 2 ] || fail "-n $bad accepted (rc=$(rc))"
done
pass "-n outside 1..1024 rejected"
run --timeout nope -n 1 true
[ "$(rc)" = 2 ] && pass "bad --timeout rejected" || fail "bad --timeout: rc=$(rc)"
run --help
[ "$(rc)" = 0 ] && grep -q '^usage: weft-run' "$TMP/out" && pass "--help" || fail "--help: rc=$(rc)"
run -n 2 "$TMP/no-such-program" arg
if [ "$(rc)" != 0 ] &&
   grep -q "^weft-run: rank 0: cannot execute $TMP/no-such-program: No such file or directory$" "$TMP/err"; then
  pass "exec failure named, job fails"
else
  fail "exec failure: rc=$(rc) stderr: $(cat "$TMP/err")"
fi
# CMD's own options pass through untouched, with or without --.
run -n 1 -- sh -c 'printf "%s|" "$@"' sh -n 3 --tag-output
[ "$(cat "$TMP/out")" = "-n|3|--tag-output|" ] && pass "options after CMD belong to CMD" ||
  fail "argument pass-through: $(cat "$TMP/out")"

if [ "$FAILS" -ne 0 ]; then
  echo "$FAILS launcher test(s) failed"
  exit 1
fi
echo "all launcher tests passed"
