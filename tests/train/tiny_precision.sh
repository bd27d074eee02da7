#!/bin/sh
# The tiny preset's 300 steps in fp32, bf16 and fp16 (loss scaling): the final
# validation losses of bf16 and fp16 must be within 2% of fp32's.
# Needs the Debian fortunes corpus (exit 77 = skipped without it).
# usage: tiny_precision.sh PATH/TO/weft-train
set -eu
exe=$1
[ -d "${WEFT_FORTUNE_DIR:-/usr/share/games/fortunes}" ] || { echo "SKIPPED: fortunes not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for dt in fp32 bf16 fp16; do
  "$exe" --preset tiny --dtype $dt --out "$tmp/$dt" --sample 0 --eval-every 0 --log-every 100 \
      --data "$tmp/data" > "$tmp/$dt.log"
  grep '^done' "$tmp/$dt.log"
  sed -n 's/^done:.*val loss \([0-9.]*\)$/\1/p' "$tmp/$dt.log" > "$tmp/$dt.val"
done
ref=$(cat "$tmp/fp32.val")
status=0
for dt in bf16 fp16; do
  v=$(cat "$tmp/$dt.val")
  if awk -v a="$v" -v r="$ref" 'BEGIN { d = (a - r) / r; if (d < 0) d = -d; exit !(d <= 0.02) }'; then
    echo "$dt val loss $v vs fp32 $ref: within 2%"
  else
    echo "$dt val loss $v vs fp32 $ref: NOT within 2%"
    status=1
  fi
done
exit $status
