#!/usr/bin/env bash
# The real torchrun (PyTorch's elastic launcher) starting weft-perf as a plain
# program (--no-python): weft reads RANK/WORLD_SIZE/LOCAL_RANK and, for the
# secret, TORCHELASTIC_RUN_ID. The rendezvous is WEFT_COMM_ID on a port of its
# own, because torchrun's agent already listens on MASTER_ADDR:MASTER_PORT (its
# TCPStore; TORCHELASTIC_USE_AGENT_STORE=True): with MASTER_ADDR/MASTER_PORT
# alone weft's rank 0 fails to bind there ("Address already in use"; seen with
# torch 2.15). Run with `master` as third argument to see that case.
# Uses $WEFT_TORCHRUN, else torchrun on PATH, else the venv the trainer's
# comparison test installs (~/.cache/weft/torch-venv); skips (77) without one.
# Usage: torchrun_real.sh path/to/weft-perf [nranks] [comm-id|master]
set -u
PERF=${1:?usage: torchrun_real.sh path/to/weft-perf [nranks] [comm-id|master]}
N=${2:-4}
MODE=${3:-comm-id}
LIMIT=${WEFT_LAUNCHERS_TIMEOUT:-90}
. "$(dirname "$0")/lib.sh"

TR=${WEFT_TORCHRUN:-$(command -v torchrun)}
[ -n "$TR" ] || TR=$HOME/.cache/weft/torch-venv/bin/torchrun
[ -x "$TR" ] || { echo "SKIP: no torchrun (set WEFT_TORCHRUN, or install torch)"; exit 77; }

MPORT=$(lt_free_port 2) || { echo "FAIL: no free port"; exit 1; }
case $MODE in
  comm-id)
    WPORT=$(lt_free_port)
    while [ "$WPORT" = "$MPORT" ]; do WPORT=$(lt_free_port); done
    export WEFT_COMM_ID=127.0.0.1:$WPORT
    rdv="WEFT_COMM_ID=$WEFT_COMM_ID" ;;
  master) rdv="MASTER_ADDR/MASTER_PORT only" ;;
  *) echo "usage: torchrun_real.sh path/to/weft-perf [nranks] [comm-id|master]"; exit 2 ;;
esac
lt_log "$("$(dirname "$TR")/python" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null ||
  echo "$TR"): torchrun --nproc-per-node $N --master-port $MPORT, $rdv"
# torchrun's own temporary directories go under this test's.
export TMPDIR=$LT_TMP WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=BOOT
lt_bounded "$LIMIT" "$LT_TMP/out" "$LT_TMP/err" "$TR" --nnodes 1 --nproc-per-node "$N" \
  --master-addr 127.0.0.1 --master-port "$MPORT" --no-python \
  "$PERF" allreduce -b 8 -e 1M -f 4 -c 1
rc=$?
cat "$LT_TMP/out"
fail=0
if [ $rc != 0 ]; then
  echo "FAIL: torchrun exited $rc$([ $rc = 124 ] && echo " (timeout after ${LIMIT}s)")"
  grep -E 'weft|Error' "$LT_TMP/err" | head -10
  fail=1
fi
lt_check_perf "$LT_TMP/out" "$N" torchrun "$LT_TMP/err" || fail=1
[ $fail = 0 ] && echo "PASS: torchrun --nproc-per-node $N, $rdv" || echo "FAILED"
exit $fail
