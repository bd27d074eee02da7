#!/usr/bin/env bash
# NUMA domains in the live tuner's layout, planned from a topology file
# (WEFT_TOPO_FILE) since this machine has one NUMA node: the ranks see the
# file's hosts and domains (INFO line), the explanation prices the links between
# domains with the numa constants (and no machine's cores are shared: the file
# gives each rank a CPU), hierarchical forced runs its three-level
# schedule (cut by the file's domains) with every element checked, and a job
# larger than the file fails init naming the rank the file lacks.
# usage: numa_layout.sh WEFT_RUN CHECK_ALLREDUCE TOPO_FILE NRANKS HOSTS DOMAINS
set -u
. "$(dirname "$0")/job_helpers.sh"
run=$1 check=$2 topo=$3 n=$4 hosts=$5 domains=$6
out=$(mktemp)
trap 'rm -f "$out"' EXIT
before=$(shm_segments)
fail=0

WEFT_TOPO_FILE=$topo WEFT_ALGO=hierarchical WEFT_EXPLAIN=1 WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=INIT \
  timeout 280 "$run" -n "$n" --timeout 260 -- "$check" --counts 0,1,7,1023,65537,300000 \
  --dtypes float,int32,bfloat16 --expect-algo hierarchical >"$out" 2>&1
rc=$?
grep -E "wrong elements|NUMA domains|<- pick" "$out" | head -40
[ $rc -eq 0 ] || { echo "FAIL: the forced run exited $rc"; tail -20 "$out"; fail=1; }
exact=$(grep -c " 0 wrong elements, 0 failed calls, 18 call shapes checked to run hierarchical" "$out")
[ "$exact" -eq "$n" ] || { echo "FAIL: $exact of $n ranks exact on hierarchical"; fail=1; }
want="$hosts hosts, $domains NUMA domains among the ranks (WEFT_TOPO_FILE)"
seen=$(grep -c "$want" "$out")
[ "$seen" -eq "$n" ] || { echo "FAIL: $seen of $n ranks logged '$want'"; fail=1; }
grep -q "hierarchical .* simulated.*numa alpha" "$out" ||
  { echo "FAIL: no explanation priced the links between NUMA domains"; fail=1; }
# The file's hosts are machines of their own with a CPU per rank: nobody queues for cores.
! grep -q "share a machine's" "$out" || { echo "FAIL: the file's ranks were put on a shared machine"; fail=1; }

# Without the file, on this machine: where it has fewer CPUs than 4 ranks, every
# rank's layout has them share its cores.
cpus=$(nproc)
if [ "$cpus" -lt 4 ]; then
  WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=INIT timeout 120 "$run" -n 4 --timeout 100 -- "$check" --counts 1 >"$out" 2>&1
  seen=$(grep -c "4 ranks share a machine's $cpus cores" "$out")
  [ "$seen" -eq 4 ] || { echo "FAIL: $seen of 4 ranks put on one machine of $cpus cores"; tail -5 "$out"; fail=1; }
fi

# One rank more than the file describes.
WEFT_TOPO_FILE=$topo timeout 120 "$run" -n $((n + 1)) --timeout 100 -- "$check" --counts 1 >"$out" 2>&1
rc=$?
[ $rc -ne 0 ] || { echo "FAIL: a job larger than the file ran"; fail=1; }
grep -q "describes $n ranks; rank $n of the job is not among them" "$out" ||
  { echo "FAIL: no error naming rank $n"; tail -5 "$out"; fail=1; }

no_leftovers "$check" "$before" || fail=1
[ $fail -eq 0 ] && echo "PASS: $n ranks planned as $hosts hosts x $domains NUMA domains; hierarchical exact"
exit $fail
