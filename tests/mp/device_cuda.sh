#!/bin/sh
# Collectives on real device memory: N ranks on this machine's GPU(s) through the
# CUDA driver, every collective, dtype and op checked on the host. Exits 77 (a
# skip) where there is no driver or no GPU.
#   device_cuda.sh WEFT_RUN CHECKER N
set -u
run=$1 checker=$2 n=$3
"$checker" --probe-device libcuda.so.1 || exit $?
exec "$run" -n "$n" --timeout 500 -- "$checker" --device libcuda.so.1 --counts 0,1,7,1023,65537,1000003
