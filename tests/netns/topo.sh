#!/bin/sh
# weft-topo on 2 network-namespace hosts x 2 ranks: ranks of one host share
# memory (NUMA on this one-node VM), ranks of different hosts are NET; the two
# hosts are listed apart, each as on the other's kernel. Skipped (77) where netns_test.sh cannot make namespaces.
# usage: topo.sh NETNS_TEST_SH WEFT_TOPO
set -u
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$1" run 2 2 "$2" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "FAIL: netns run exited $rc"; exit 1; }
fail=0
grep -Eq '^rank0   X +(NUMA|SYS) +NET +NET ' "$out" || { echo "FAIL: rank 0's row is not X, shm, NET, NET"; fail=1; }
grep -Eq '^rank3   NET +NET +(NUMA|SYS) +X ' "$out" || { echo "FAIL: rank 3's row is not NET, NET, shm, X"; fail=1; }
[ "$(grep -c '^host ' "$out")" = 2 ] || { echo "FAIL: not two hosts listed"; fail=1; }
# The namespaces are hosts of one kernel (one boot id): each names the other.
grep -q "^  one kernel with host 1 " "$out" && grep -q "^  one kernel with host 0 " "$out" ||
  { echo "FAIL: the two hosts are not shown on one kernel"; fail=1; }
[ $fail = 0 ] && echo "PASS: weft-topo sees 2 hosts x 2 ranks"
exit $fail
