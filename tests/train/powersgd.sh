#!/usr/bin/env bash
# PowerSGD rank 1 (2 ranks, the tiny preset, 200 steps on the fortunes corpus,
# compression from step 50, after the learning-rate warm-up as PyTorch advises):
# with error feedback the final validation loss is within 5% of uncompressed DDP's
# and below the run without error feedback; the gradient bytes per step (from
# metrics.csv) drop at least 10x.
# Needs the Debian fortunes corpus (exit 77 = skipped without it).
# usage: powersgd.sh WEFT_RUN WEFT_TRAIN
set -u
run=$1 exe=$2
[ -d "${WEFT_FORTUNE_DIR:-/usr/share/games/fortunes}" ] || { echo "SKIPPED: fortunes not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train() {  # NAME ARGS...: prints the final validation loss and the last step's bytes
  local name=$1; shift
  OMP_WAIT_POLICY=passive timeout 250 "$run" -n 2 --timeout 240 -- "$exe" --preset tiny --steps 200 \
    --eval-every 0 --sample 0 --log-every 1000 --data "$tmp/data" --out "$tmp/$name" "$@" >"$tmp/$name.log" 2>&1 ||
    { cat "$tmp/$name.log"; echo "FAIL: $name did not finish"; exit 1; }
  local val bytes
  val=$(sed -n 's/^done:.*val loss \([0-9.]*\)$/\1/p' "$tmp/$name.log")
  bytes=$(tail -1 "$tmp/$name/metrics.csv" | cut -d, -f10)
  echo "$val $bytes"
}
read -r plain plainBytes < <(train plain)
read -r ef efBytes < <(train feedback --powersgd 1 --powersgd-start 50)
read -r noef _ < <(train nofeedback --powersgd 1 --powersgd-start 50 --powersgd-no-error-feedback)
echo "val loss: uncompressed $plain, PowerSGD rank 1 $ef (error feedback), $noef (none)"
echo "bytes per step (gradients, loss and norm): uncompressed $plainBytes, PowerSGD $efBytes"
fail=0
awk -v a="$ef" -v r="$plain" 'BEGIN { d = (a - r) / r; if (d < 0) d = -d; printf "PowerSGD vs uncompressed: %+.2f%%\n", 100 * (a - r) / r; exit !(d <= 0.05) }' ||
  { echo "FAIL: not within 5%"; fail=1; }
awk -v a="$ef" -v b="$noef" 'BEGIN { exit !(a < b) }' || { echo "FAIL: error feedback did not help"; fail=1; }
awk -v a="$efBytes" -v b="$plainBytes" 'BEGIN { printf "%.0fx fewer bytes\n", b / a; exit !(a * 10 < b) }' ||
  { echo "FAIL: not 10x fewer bytes"; fail=1; }
exit $fail
