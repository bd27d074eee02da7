#!/bin/sh
# weft-topo under weft-run -n 2: rank 0 prints the 2 x 2 matrix (X on the
# diagonal, both ranks on this host); the same job with WEFT_TOPO_DUMP_FILE writes
# the joined topology at init, and weft-topo --file prints the same matrix from it;
# WEFT_BIND=core puts the two ranks on different cores.
# usage: weft_topo.sh WEFT_RUN WEFT_TOPO
set -u
run=$1 topo=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
WEFT_TOPO_DUMP_FILE="$tmp/topo.json" timeout 60 "$run" -n 2 --timeout 50 -- "$topo" >"$tmp/live" 2>&1 ||
  { cat "$tmp/live"; echo "FAIL: weft-topo under weft-run"; exit 1; }
cat "$tmp/live"
grep -q '^rank0   X ' "$tmp/live" || { echo "FAIL: no X for rank 0"; fail=1; }
grep -Eq '^rank1   (NUMA|SYS) +X ' "$tmp/live" || { echo "FAIL: rank 1's row is not shm, self"; fail=1; }
[ "$(grep -c '^rank[01] ' "$tmp/live")" = 2 ] || { echo "FAIL: not one row per rank"; fail=1; }
[ -s "$tmp/topo.json" ] || { echo "FAIL: WEFT_TOPO_DUMP_FILE not written"; exit 1; }
timeout 30 "$topo" --file "$tmp/topo.json" >"$tmp/file" 2>&1 || { cat "$tmp/file"; echo "FAIL: --file"; exit 1; }
# The rows (link classes, affinity, NIC, host) are the same from the file.
grep '^rank' "$tmp/live" >"$tmp/a"
grep '^rank' "$tmp/file" >"$tmp/b"
cmp -s "$tmp/a" "$tmp/b" || { echo "FAIL: the file prints other rows:"; cat "$tmp/file"; fail=1; }
timeout 30 "$topo" --json >"$tmp/one.json" && grep -q '"ranks"' "$tmp/one.json" || { echo "FAIL: --json alone"; fail=1; }
# WEFT_BIND=core: with two cores or more, the two ranks' CPU sets are disjoint.
if [ "$(nproc)" -ge 2 ]; then
  WEFT_BIND=core timeout 60 "$run" -n 2 --timeout 50 -- "$topo" >"$tmp/bound" 2>&1 || { cat "$tmp/bound"; fail=1; }
  a=$(awk '/^rank0 /{print $4}' "$tmp/bound") b=$(awk '/^rank1 /{print $4}' "$tmp/bound")
  echo "WEFT_BIND=core: rank 0 on CPUs $a, rank 1 on CPUs $b"
  if [ -z "$a" ] || [ -z "$b" ] || [ "$a" = "$b" ]; then echo "FAIL: WEFT_BIND=core did not separate the ranks"; fail=1; fi
else
  echo "SKIP: one CPU: WEFT_BIND=core cannot separate two ranks"
fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail
