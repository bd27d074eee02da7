# shellcheck shell=bash
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
# A command a test registers to run first in the cleanup (slurm.sh: removing
# the policy-rc.d it created).
LT_EXTRA_CLEANUP=${LT_EXTRA_CLEANUP:-}

lt_log() { echo "[$(date +%T)] $*"; }

# The parent pid of process $1 (empty when it is gone). Pure bash: no child
# process that a scan could mistake for one of ours.
lt_ppid() {
  local k v
  { while read -r k v; do [ "$k" = PPid: ] && { echo "$v"; return; }; done <"/proc/$1/status"; } 2>/dev/null
}

# Pids of this test's live processes: those carrying the tag in their
# environment, and those holding a file under $LT_TMP open (slurmstepd wipes its
# environment for its process title, but keeps slurmd's log open). Leaves out
# this shell and the scan's own helpers (which inherit the tag).
lt_our_pids() {
  local me=${BASHPID:-$$} p q i mine
  { grep -lzxF "WEFT_LAUNCHERS_TAG=$WEFT_LAUNCHERS_TAG" /proc/[0-9]*/environ
    find /proc/[0-9]*/fd /proc/[0-9]*/cwd -maxdepth 1 -lname "$LT_TMP/*"; } 2>/dev/null |
    cut -d/ -f3 | sort -un >"$LT_TMP/scan.$me"
  while read -r p; do
    [ "$p" = "$$" ] && continue
    mine=0
    q=$p
    for i in 1 2 3 4; do
      q=$(lt_ppid "$q")
      [ -z "$q" ] && { mine=1; break; }       # gone
      [ "$q" = "$me" ] && { mine=1; break; }  # a helper of this scan
      [ "$q" -le 1 ] && break
    done
    [ $mine = 0 ] && [ -n "$(lt_ppid "$p")" ] && echo "$p"
  done <"$LT_TMP/scan.$me"
  rm -f "$LT_TMP/scan.$me"
}

# /dev/shm/weft-* segments that appeared during this test and that no live
# process maps or holds open: ours, left behind by killed ranks. A concurrent
# job's segments are mapped by its live ranks and stay.
lt_remove_new_shm() {
  local f
  ls /dev/shm 2>/dev/null | grep '^weft-' | sort | comm -13 "$LT_SHM_BEFORE" - >"$LT_TMP/shm-new"
  [ -s "$LT_TMP/shm-new" ] || return 0
  {
    cat /proc/[0-9]*/maps 2>/dev/null | grep -o '/dev/shm/weft-[^ ]*'
    find /proc/[0-9]*/fd -maxdepth 1 -lname '/dev/shm/weft-*' -printf '%l\n' 2>/dev/null
  } | sed 's#^/dev/shm/##; s# (deleted)$##' | sort -u >"$LT_TMP/shm-used"
  comm -23 <(sort -u "$LT_TMP/shm-new") "$LT_TMP/shm-used" | while read -r f; do
    [ -n "$f" ] && rm -f "/dev/shm/$f" && echo "cleanup: removed leftover /dev/shm/$f"
  done
}

# Ends every process of this test (SIGTERM, then SIGKILL after at most 0.5 s:
# meson gives a test 0.5 s between its SIGTERM and SIGKILL), then removes new
# unused /dev/shm/weft-* segments and the temporary directory.
lt_cleanup() {
  local rc=$? pids i
  trap - EXIT INT TERM
  if [ -n "$LT_EXTRA_CLEANUP" ]; then $LT_EXTRA_CLEANUP || true; fi
  pids=$(lt_our_pids)
  if [ -n "$pids" ]; then
    kill -TERM $pids 2>/dev/null
    for i in 1 2; do
      sleep 0.1
      pids=$(lt_our_pids)
      [ -z "$pids" ] && break
    done
    if [ -n "$pids" ]; then
      echo "cleanup: killing leftover processes: $(echo $pids)"
      kill -KILL $pids 2>/dev/null
    fi
  fi
  lt_remove_new_shm 2>/dev/null
  rm -rf "$LT_TMP"
  exit "$rc"
}
trap lt_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a command with a time limit ($1 seconds; SIGTERM, then SIGKILL 5 s
# later), stdout appended to file $2 and stderr to file $3 (- leaves them be),
# in the background and waits for it, so that a SIGTERM to this script
# (meson's timeout) runs the cleanup at once instead of after the command. The
# launcher under test gets the signal itself (--foreground: it stays in this
# process group) and ends its own ranks. Returns the command's exit status (124
# on timeout).
lt_bounded() {
  local limit=$1 out=$2 err=$3
  shift 3
  [ "$out" = - ] && out=/dev/stdout
  [ "$err" = - ] && err=/dev/stderr
  timeout --foreground -s TERM -k 5 "$limit" "$@" >>"$out" 2>>"$err" &
  wait $!
}

# A free TCP port on 127.0.0.1 below the kernel's ephemeral range, so that no
# outgoing connection can take it before the launcher binds it; with an argument
# N, the first of N consecutive free ports (torchrun with MASTER_PORT only: weft's
# root takes MASTER_PORT + 1).
lt_free_port() {
  python3 - "${1:-1}" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
top = low - n if low > 11000 else 65535 - n
base = 10000 if low > 11000 else 61000
for _ in range(1000):
    p = random.randint(base, top)
    socks = []
    try:
        for q in range(p, p + n):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", q))
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(p)
    sys.exit(0)
sys.exit(1)
PY
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
