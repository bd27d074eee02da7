#!/bin/bash
# Seventh GPU pass: cuda_p2p (IPC-mapped device buffers, stream barriers, CUDA
# reduction kernels) checked at 2 and 4 ranks on the one GPU, with small buffers
# (many rounds), the nccl.h program, memcheck, and busbw against staging.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/devout}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
export WEFT_TIMEOUT_MS=60000
B=$PWD/bin
nvidia-smi -L
C="0,1,7,1023,65537,1000003"
t() { local s=$(date +%s); "$@"; echo "   rc=$? in $(( $(date +%s) - s )) s"; }
for n in 2 4; do
  echo "== check cuda_p2p n=$n"
  t timeout 100 ../tests/mp/device_path.sh "$B/weft-run" "$B/weft-check-collectives" $n libcuda.so.1 cuda_p2p --counts $C > "$OUT/check-p2p-n$n.log" 2>&1
  grep -E "wrong elements|FAIL|failed|cuda_p2p|rc=" "$OUT/check-p2p-n$n.log" | sort | uniq -c | head -8
done
echo "== check cuda_p2p n=3, 64 KiB buffers, two-shot above 1 KiB"
WEFT_P2P_BUFFER_BYTES=65536 WEFT_P2P_ONESHOT_BYTES=1024 t timeout 100 ../tests/mp/device_path.sh "$B/weft-run" "$B/weft-check-collectives" 3 libcuda.so.1 cuda_p2p --counts $C > "$OUT/check-p2p-small-n3.log" 2>&1
grep -E "wrong elements|FAIL|failed|cuda_p2p" "$OUT/check-p2p-small-n3.log" | sort | uniq -c | head -8
for n in 2 4; do
  echo "== nccl program device n=$n"
  t timeout 40 ../integrations/nccl/run.sh "$B/weft-run" "$B/nccl-program" device $n "$OUT/id-$n" > "$OUT/nccl-device-n$n.log" 2>&1
  grep -E "rank|FAIL" "$OUT/nccl-device-n$n.log" | head -4
done
echo "== memcheck"
t timeout 100 compute-sanitizer --tool memcheck --target-processes all "$B/weft-run" -n 2 --timeout 95 -- "$B/weft-check-collectives" --device libcuda.so.1 --counts 7,65537,1000003 --dtypes float,bfloat16 > "$OUT/memcheck.log" 2>&1
grep -E "ERROR SUMMARY|wrong elements|Program hit" "$OUT/memcheck.log" | sort | uniq -c | head
export WEFT_TUNE_ONLINE=0
for n in 2 4; do
  echo "== perf allreduce cuda_p2p n=$n"
  t timeout 60 "$B/weft-run" -n $n --timeout 55 -- "$B/weft-perf" allreduce -b 8 -e 1G -f 4 -n 10 -w 5 -c 0 --device cuda > "$OUT/perf-p2p-n$n.txt" 2>&1
  grep -E "^ +[0-9]|device|bandwidth" "$OUT/perf-p2p-n$n.txt"
done
echo "== perf allreduce staged n=2"
WEFT_P2P_DISABLE=1 t timeout 60 "$B/weft-run" -n 2 --timeout 55 -- "$B/weft-perf" allreduce -b 32M -e 512M -f 4 -n 5 -w 3 -c 0 --device cuda > "$OUT/perf-staged-n2.txt" 2>&1
grep -E "^ +[0-9]" "$OUT/perf-staged-n2.txt"
for coll in allgather reducescatter; do
  echo "== perf $coll cuda_p2p n=4"
  t timeout 60 "$B/weft-run" -n 4 --timeout 55 -- "$B/weft-perf" $coll -b 1M -e 1G -f 8 -n 10 -w 5 -c 0 --device cuda > "$OUT/perf-$coll-n4.txt" 2>&1
  grep -E "^ +[0-9]" "$OUT/perf-$coll-n4.txt"
done
echo "== perf allreduce checked n=4"
t timeout 60 "$B/weft-run" -n 4 --timeout 55 -- "$B/weft-perf" allreduce -b 1K -e 256M -f 16 -n 3 -w 1 -c 1 -d all --device cuda > "$OUT/perf-checked-n4.txt" 2>&1
grep -E "^ +[0-9]|wrong|error" "$OUT/perf-checked-n4.txt" | head -30
