#!/usr/bin/env bash
# Open MPI: mpirun starts the ranks; weft reads OMPI_COMM_WORLD_RANK/SIZE/
# LOCAL_RANK. The only other variable is the rendezvous address (a free
# loopback port), exported to the ranks with -x: WEFT_COMM_ID=host:port, or with
# `master` as third argument MASTER_ADDR and MASTER_PORT. Rank 0 starts the
# bootstrap root there. With `file`, no address at all: WEFT_RENDEZVOUS_FILE
# names a file where rank 0 publishes its root and which it removes once all
# ranks joined. weft-perf is not an MPI program: mpirun only launches.
# Usage: openmpi.sh path/to/weft-perf [nranks] [comm-id|master|file]
set -u
PERF=${1:?usage: openmpi.sh path/to/weft-perf [nranks] [comm-id|master|file]}
N=${2:-4}
MODE=${3:-comm-id}
LIMIT=${WEFT_LAUNCHERS_TIMEOUT:-90}
. "$(dirname "$0")/lib.sh"

if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found (Debian's openmpi-bin; scripts/setup installs it)"
  exit 77
fi
PORT=$(lt_free_port) || { echo "FAIL: no free port"; exit 1; }
case $MODE in
  comm-id)
    export WEFT_COMM_ID=127.0.0.1:$PORT
    rdv=(-x WEFT_COMM_ID) ;;
  master)
    export MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT
    rdv=(-x MASTER_ADDR -x MASTER_PORT) ;;
  file)
    export WEFT_RENDEZVOUS_FILE=$LT_TMP/rendezvous
    rdv=(-x WEFT_RENDEZVOUS_FILE) ;;
  *) echo "usage: openmpi.sh path/to/weft-perf [nranks] [comm-id|master|file]"; exit 2 ;;
esac
lt_log "$(mpirun --version 2>&1 | head -1): -np $N ${rdv[*]} (127.0.0.1:$PORT)"
# WEFT_DEBUG/WEFT_DEBUG_SUBSYS only make rank 0 log which launcher it detected.
# The tag lets the cleanup find ranks that outlive a killed mpirun.
args=(--allow-run-as-root --oversubscribe --bind-to none -np "$N" "${rdv[@]}"
      -x WEFT_LAUNCHERS_TAG -x WEFT_DEBUG=INFO -x WEFT_DEBUG_SUBSYS=BOOT)
# Open MPI looks for an rsh agent and a network even on one node; keep it local.
export OMPI_MCA_plm_rsh_agent=${OMPI_MCA_plm_rsh_agent:-false}
lt_bounded "$LIMIT" "$LT_TMP/out" "$LT_TMP/err" mpirun "${args[@]}" \
  "$PERF" allreduce -b 8 -e 1M -f 4 -c 1
rc=$?
cat "$LT_TMP/out"
fail=0
if [ $rc != 0 ]; then
  echo "FAIL: mpirun exited $rc$([ $rc = 124 ] && echo " (timeout after ${LIMIT}s)")"
  tail -20 "$LT_TMP/err"
  fail=1
fi
lt_check_perf "$LT_TMP/out" "$N" openmpi "$LT_TMP/err" || fail=1
if [ "$MODE" = file ]; then
  grep -q "published in WEFT_RENDEZVOUS_FILE" "$LT_TMP/err" ||
    { echo "FAIL: rank 0 did not log publishing the rendezvous file"; fail=1; }
  [ -e "$WEFT_RENDEZVOUS_FILE" ] && { echo "FAIL: $WEFT_RENDEZVOUS_FILE left behind"; fail=1; }
fi
[ $fail = 0 ] && echo "PASS: Open MPI mpirun -np $N, rendezvous ${rdv[*]}" || echo "FAILED"
exit $fail
