#!/bin/sh
# The GPUs ranks drive, in the topology a job writes (WEFT_TOPO_DUMP_FILE): two
# ranks whose device collectives run through the stand-in CUDA driver (device 0,
# bus 0000:10:00.0, in each process) are recorded on that GPU, and weft-topo
# prints their link as GPU (the same GPU) with a GPU column.
# usage: topo_gpu.sh WEFT_RUN CHECKER DRIVER WEFT_TOPO
set -u
run=$1 checker=$2 driver=$3 topo=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# A short deadline: the checker at 2 ranks also fails a call beside a held stream.
WEFT_TIMEOUT_MS=3000 WEFT_TOPO_DUMP_FILE="$tmp/topo.json" timeout 120 "$run" -n 2 --timeout 100 -- "$checker" --device "$driver" \
  --counts 7 --dtypes float --ops sum >"$tmp/job" 2>&1 || { tail -5 "$tmp/job"; echo "FAIL: the job"; exit 1; }
[ "$(grep -c '"gpu": "0000:10:00.0"' "$tmp/topo.json")" = 2 ] || { cat "$tmp/topo.json"; echo "FAIL: not both ranks on GPU 0000:10:00.0"; fail=1; }
timeout 30 "$topo" --file "$tmp/topo.json" >"$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: weft-topo --file"; exit 1; }
cat "$tmp/out" | head -4
grep -Eq '^rank0 +X +GPU .*0000:10:00.0' "$tmp/out" || { echo "FAIL: rank 0's row is not X, GPU with its GPU"; fail=1; }
grep -Eq '^rank1 +GPU +X ' "$tmp/out" || { echo "FAIL: rank 1's row is not GPU, X"; fail=1; }
grep -q "GPU  = both ranks drive the same GPU" "$tmp/out" || { echo "FAIL: no legend for GPU"; fail=1; }
[ $fail -eq 0 ] && echo "PASS"
exit $fail
