#!/usr/bin/env bash
# weft-train started with other options on one rank (here --zero 1 on rank 1 of 3):
# every rank stops before training with a message naming rank 1, instead of failing
# later on mismatched collectives. Needs the fortunes corpus (exit 77 without it).
# usage: ddp_mismatch.sh WEFT_RUN WEFT_TRAIN
set -u
run=$1 exe=$2
[ -d "${WEFT_FORTUNE_DIR:-/usr/share/games/fortunes}" ] || { echo "SKIPPED: fortunes not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/rank.sh" <<SH
#!/bin/sh
extra=
[ "\$WEFT_RANK" = 1 ] && extra="--zero 1"
exec "$exe" --preset tiny --steps 5 --sample 0 --data "$tmp/data" --out "$tmp/out" \$extra
SH
chmod +x "$tmp/rank.sh"
timeout 120 "$run" -n 3 --timeout 100 -- "$tmp/rank.sh" >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
fail=0
[ $rc -ne 0 ] || { echo "FAIL: the job succeeded"; fail=1; }
grep -q "^weft-train: rank 0: the training options of rank(s) 1 differ" "$tmp/log" || { echo "FAIL: rank 0 did not name rank 1"; fail=1; }
if grep -q "^step " "$tmp/log"; then echo "FAIL: training started"; fail=1; fi
[ $fail -eq 0 ] && echo "PASS: the ranks refused to train with rank 1's different options"
exit $fail
