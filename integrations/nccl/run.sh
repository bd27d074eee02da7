#!/bin/sh
# The nccl.h program under weft-run, N ranks, on host or device memory; device
# memory exits 77 (a skip) where there is no CUDA device. The id file of an
# earlier run is removed first, so no rank reads a stale unique id.
#   run.sh WEFT_RUN NCCL_PROGRAM host|device N ID_FILE
set -u
run=$1 program=$2 mode=$3 n=$4 id=$5
if [ "$mode" = device ]; then "$program" probe || exit $?; fi
rm -f "$id"
exec "$run" -n "$n" --timeout 100 -- "$program" "$mode" "$id"
