#!/bin/sh
# weft-topo under weft-run -n 2: rank 0 prints the 2 x 2 matrix (X on the
# diagonal, both ranks on this host); the same job with WEFT_TOPO_DUMP_FILE writes
# the joined topology at init, and weft-topo --file prints the same matrix from it.
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
[ $fail -eq 0 ] && echo "PASS"
exit $fail
