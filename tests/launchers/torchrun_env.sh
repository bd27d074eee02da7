#!/usr/bin/env bash
# torchrun-style launch without torch: this script plays torchrun, starting
# WORLD_SIZE processes with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
# MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free loopback port) and nothing
# weft-specific; rank 0 starts the bootstrap root at MASTER_ADDR:MASTER_PORT.
# Runs weft-perf allreduce -c 1 and checks exit codes, the 0-wrong footer and
# that weft detected torchrun.
# Usage: torchrun_env.sh path/to/weft-perf [nranks]
set -u
PERF=${1:?usage: torchrun_env.sh path/to/weft-perf [nranks]}
N=${2:-4}
LIMIT=${WEFT_LAUNCHERS_TIMEOUT:-90}
. "$(dirname "$0")/lib.sh"

PORT=$(lt_free_port) || { echo "FAIL: no free port"; exit 1; }
lt_log "torchrun-style: $N ranks, MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT"
pids=()
for ((r = 0; r < N; r++)); do
  RANK=$r WORLD_SIZE=$N LOCAL_RANK=$r LOCAL_WORLD_SIZE=$N MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
  WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=BOOT \
    timeout --foreground -s TERM -k 5 "$LIMIT" "$PERF" allreduce -b 8 -e 1M -f 4 -c 1 \
    >"$LT_TMP/out.$r" 2>"$LT_TMP/err.$r" &
  pids+=($!)
done
fail=0
for ((r = 0; r < N; r++)); do
  wait "${pids[$r]}"
  rc=$?
  if [ $rc != 0 ]; then
    echo "FAIL: rank $r exited $rc$([ $rc = 124 ] && echo " (timeout after ${LIMIT}s)")"
    tail -5 "$LT_TMP/err.$r"
    fail=1
  fi
done
cat "$LT_TMP/out.0"
cat "$LT_TMP"/out.* >"$LT_TMP/out"
cat "$LT_TMP"/err.* >"$LT_TMP/err"
lt_check_perf "$LT_TMP/out" "$N" torchrun "$LT_TMP/err" || fail=1
[ $fail = 0 ] && echo "PASS: torchrun-style environment, $N ranks" || echo "FAILED"
exit $fail
