# Shared helpers of the launcher tests (sourced, not run).
#
# Every process a test starts inherits WEFT_LAUNCHERS_TAG, a value unique to
# this test run; the cleanup finds leftovers by that tag in /proc/*/environ, so
# it ends exactly this test's processes (mpirun's children, srun tasks under
# slurmstepd, daemons) and nobody else's, even when they changed process group.

# Variables that would make weft pick another launcher than the one under test.
for v in WEFT_RANK WEFT_NRANKS WEFT_LOCAL_RANK WEFT_LOCAL_SIZE WEFT_COMM_ID WEFT_JOB_SECRET \
         RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT TORCHELASTIC_RUN_ID \
         OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK \
         SLURM_PROCID SLURM_NTASKS SLURM_LOCALID SLURM_JOB_ID SLURM_STEP_ID; do
  unset "$v"
done

WEFT_LAUNCHERS_TAG="wlt-$$-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
export WEFT_LAUNCHERS_TAG
LT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-launchers.XXXXXX")
LT_SHM_BEFORE="$LT_TMP/shm-before"
ls /dev/shm 2>/dev/null | grep '^weft-' | sort >"$LT_SHM_BEFORE"
# Extra cleanup a test registers (stopping daemons) runs before the generic one.
LT_EXTRA_CLEANUP=${LT_EXTRA_CLEANUP:-}

lt_log() { echo "[$(date +%T)] $*"; }

# Pids of live processes carrying this run's tag, except this shell.
lt_tagged_pids() {
  local e pid
  for e in /proc/[0-9]*/environ; do
    pid=${e#/proc/}
    pid=${pid%/environ}
    [ "$pid" = "$$" ] && continue
    [ "$pid" = "${BASHPID:-$$}" ] && continue
    if grep -qzxF "WEFT_LAUNCHERS_TAG=$WEFT_LAUNCHERS_TAG" "$e" 2>/dev/null; then
      echo "$pid"
    fi
  done
}

# /dev/shm/weft-* segments that appeared during this test and that no live
# process maps or holds open: ours, left behind by killed ranks. A concurrent
# job's segments are mapped by its live ranks and stay.
lt_remove_new_shm() {
  local f
  ls /dev/shm 2>/dev/null | grep '^weft-' | sort | comm -13 "$LT_SHM_BEFORE" - | while read -r f; do
    [ -n "$f" ] || continue
    if grep -qsF "/dev/shm/$f" /proc/[0-9]*/maps 2>/dev/null; then continue; fi
    if ls -l /proc/[0-9]*/fd 2>/dev/null | grep -qF "/dev/shm/$f"; then continue; fi
    rm -f "/dev/shm/$f" && echo "cleanup: removed leftover /dev/shm/$f"
  done
}

lt_cleanup() {
  local rc=$? pids i
  trap - EXIT INT TERM
  if [ -n "$LT_EXTRA_CLEANUP" ]; then $LT_EXTRA_CLEANUP || true; fi
  pids=$(lt_tagged_pids)
  if [ -n "$pids" ]; then
    echo "cleanup: terminating leftover processes: $(echo $pids)"
    kill -TERM $pids 2>/dev/null
    for i in 1 2 3 4 5; do
      pids=$(lt_tagged_pids)
      [ -z "$pids" ] && break
      sleep 0.2
    done
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    sleep 0.2
  fi
  lt_remove_new_shm
  rm -rf "$LT_TMP"
  exit "$rc"
}
trap lt_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a command with a time limit ($1 seconds; SIGTERM, then SIGKILL 5 s
# later) in the background and waits for it, so that a SIGTERM to this script
# (meson's timeout) runs the cleanup at once instead of after the command. The
# launcher under test gets the signal itself (--foreground: it stays in this
# process group) and ends its own ranks. Returns the command's exit status (124
# on timeout).
lt_bounded() {
  local limit=$1
  shift
  timeout --foreground -s TERM -k 5 "$limit" "$@" &
  wait $!
}

# A free TCP port on 127.0.0.1 (the kernel's pick; free when this returns).
lt_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Checks weft-perf's output in $1 (stdout of all ranks) for a run of $2 ranks
# started by launcher $3 (the name weft logs: openmpi, torchrun, slurm), with
# WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=BOOT stderr in $4. Prints what is wrong.
lt_check_perf() {
  local out=$1 n=$2 source=$3 err=$4 bad=0
  if ! grep -q "^# weft-perf allreduce: $n ranks" "$out"; then
    echo "FAIL: no '# weft-perf allreduce: $n ranks' header"; bad=1
  fi
  if [ "$(grep -c '^# Out of bounds values : 0 OK$' "$out")" != 1 ]; then
    echo "FAIL: expected exactly one '# Out of bounds values : 0 OK'; got:"
    grep '^# Out of bounds' "$out"; bad=1
  fi
  # Result rows: size count type redop root, then time algbw busbw #wrong (out of
  # place), then the same four in place. Column 9 and 13 are the #wrong columns.
  local rows
  rows=$(grep -Ec '^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +-?[0-9]+ ' "$out")
  if [ "$rows" -lt 1 ]; then
    echo "FAIL: no result rows"; bad=1
  elif ! awk '/^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +-?[0-9]+ / { if ($9 != "0" || $13 != "0") bad = 1 }
             END { exit bad }' "$out"; then
    echo "FAIL: a row has wrong elements:"; grep -E '^ +[0-9]+ ' "$out"; bad=1
  fi
  if ! grep -q "bootstrap root for $source started at " "$err"; then
    echo "FAIL: rank 0 did not log 'bootstrap root for $source started at ...' (wrong launcher detected?)"
    grep -i 'bootstrap' "$err" | head -5; bad=1
  fi
  [ $bad = 0 ] && echo "ok: $rows rows, 0 wrong, launcher detected as $source"
  return $bad
}
