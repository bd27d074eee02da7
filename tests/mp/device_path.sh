#!/bin/sh
# Collectives on device memory through DRIVER (the stand-in driver, or
# libcuda.so.1 where a GPU is: exits 77, a skip, without one), N ranks, every
# collective, dtype and op checked on the host; and every rank must say at INFO
# that its device collectives took PATH ("cuda_p2p", "host_buffers": cuda_p2p
# with its buffers in host memory, or "staged"), and so did its point-to-point
# calls with each other rank (all-to-all-v meets every pair). With
# MAX_SLOT_BYTES set, no rank may pin a staging slot larger than that for a
# collective, and with MAX_P2P_SLOT_BYTES, for a point-to-point call (its slot
# holds a chunk of each of its messages). With WINDOWED (a list of collectives),
# every rank must say that each of them ran on symmetric windows (--windows).
#   device_path.sh WEFT_RUN CHECKER N DRIVER PATH [CHECKER ARGS...]
set -u
run=$1 checker=$2 n=$3 driver=$4 path=$5
shift 5
if [ "$driver" = libcuda.so.1 ]; then "$checker" --probe-device "$driver" || exit $?; fi
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
# The job ends before meson's timeout (240 s with the stand-in, 600 s on a GPU),
# so that a stuck job still shows what it said.
job_timeout=200
if [ "$driver" = libcuda.so.1 ]; then job_timeout=560; fi
WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=TRANSPORT "$run" -n "$n" --timeout $job_timeout -- "$checker" --device "$driver" "$@" \
  >"$log" 2>&1
rc=$?
grep -v ' INFO ' "$log"
if [ $rc -ne 0 ]; then
  echo "--- the job's last INFO lines (exit $rc):"
  grep ' INFO ' "$log" | tail -30
fi
case $path in
  cuda_p2p) line='device collectives over cuda_p2p' pairs='over cuda_p2p' ;;
  host_buffers) line='device collectives over cuda_p2p (.*buffers in pinned host memory'
    pairs='over cuda_p2p (its area in pinned host memory)' ;;
  staged) line='device collectives staged through pinned host memory' pairs='staged through pinned host memory' ;;
  *) echo "device_path.sh: PATH is cuda_p2p, host_buffers or staged, not $path"; exit 2 ;;
esac
said=$(grep "$line" "$log" | sed -n 's/.*rank \([0-9]*\): device collectives.*/\1/p' | sort -u | wc -l)
grep "$line" "$log" | sed 's/.*WEFT INFO //' | sort -u
if [ "$said" -ne "$n" ]; then
  echo "FAIL: $said of $n ranks said \"$line\""
  exit 1
fi
# Unique lines: the checker's split communicators route the same pairs again.
routed=$(grep "point-to-point on device memory with rank [0-9]* $pairs" "$log" | sed 's/.*WEFT INFO //' | sort -u | wc -l)
echo "pairs of ranks whose point-to-point went $pairs: $routed (of $((n * (n - 1))))"
if [ "$routed" -ne $((n * (n - 1))) ]; then
  echo "FAIL: not every pair of ranks said its point-to-point went $pairs"
  exit 1
fi
for coll in ${WINDOWED:-}; do
  said=$(grep "rank [0-9]*: $coll on symmetric windows over cuda_p2p" "$log" | sed -n 's/.*rank \([0-9]*\): .*/\1/p' |
    sort -u | wc -l)
  echo "ranks whose $coll ran on symmetric windows: $said (of $n)"
  if [ "$said" -ne "$n" ]; then
    echo "FAIL: not every rank ran $coll on symmetric windows"
    exit 1
  fi
done
# The largest slot pinned for calls whose INFO line matches $1 (grep -v with -v).
largest_slot() {
  grep $1 'slot for point-to-point' "$log" |
    sed -n 's/.*device staging: pinned a \([0-9]*\)-byte slot for .*/\1/p' | sort -n | tail -1
}
for kind in collective point-to-point; do
  if [ $kind = collective ]; then bound=${MAX_SLOT_BYTES:-} largest=$(largest_slot -v)
  else bound=${MAX_P2P_SLOT_BYTES:-} largest=$(largest_slot -e); fi
  [ -n "$bound" ] || continue
  echo "largest staging slot for a $kind: ${largest:-none} bytes (at most $bound)"
  if [ -z "$largest" ] || [ "$largest" -gt "$bound" ]; then
    echo "FAIL: a staging slot of ${largest:-no} bytes for a $kind, above $bound"
    exit 1
  fi
done
exit $rc
