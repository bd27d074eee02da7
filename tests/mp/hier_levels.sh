#!/usr/bin/env bash
# Hierarchical all-reduce with its levels forced (WEFT_HIER_LEVELS): every rank
# builds the plan with those levels (the COLL INFO line names them) and every
# element is exact, across counts that split unevenly and past the eager limit.
# usage: hier_levels.sh WEFT_RUN CHECK_ALLREDUCE NRANKS LEVELS WANT [TOPO_FILE]
#   WANT: the levels as logged, e.g. "rabenseifner / - / -"
set -u
. "$(dirname "$0")/job_helpers.sh"
run=$1 check=$2 n=$3 levels=$4 want=$5 topo=${6:-}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
before=$(shm_segments)
fail=0

WEFT_TOPO_FILE=$topo WEFT_ALGO=hierarchical WEFT_HIER_LEVELS=$levels WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=COLL \
  timeout 280 "$run" -n "$n" --timeout 260 -- "$check" --counts 0,1,7,1023,65537,300000 \
  --dtypes float,int32,bfloat16 --expect-algo hierarchical >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: the run exited $rc"; tail -20 "$out"; fail=1; }
exact=$(grep -c " 0 wrong elements, 0 failed calls, 18 call shapes checked to run hierarchical" "$out")
[ "$exact" -eq "$n" ] || { echo "FAIL: $exact of $n ranks exact on hierarchical"; grep "wrong elements" "$out" | head; fail=1; }
# One plan per (count, dtype) with elements on every rank: 5 counts x 3 dtypes.
built=$(grep -c "algorithm hierarchical \[$want\]" "$out")
other=$(grep "algorithm hierarchical \[" "$out" | grep -vc "algorithm hierarchical \[$want\]")
[ "$built" -ge "$n" ] && [ "$other" -eq 0 ] ||
  { echo "FAIL: $built plans built with levels '$want', $other with others"; grep "algorithm hierarchical" "$out" | head -5; fail=1; }

no_leftovers "$check" "$before" || fail=1
[ $fail -eq 0 ] && echo "PASS: $n ranks, hierarchical [$want] exact ($built plans)"
exit $fail
