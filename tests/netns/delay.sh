#!/bin/sh
# Hosts 2 ms apart: 2 network-namespace hosts x 2 ranks behind weft-delay-line
# (netns_test.sh --shape 2gbit:2ms), every packet between hosts held 2 ms.
#  1. Results cross it intact: weft-check-allreduce, every element checked.
#  2. A 16-byte all-reduce costs what its schedule's crossings say, measured:
#     recursive doubling crosses hosts in one of its two steps (2 ms and its
#     messages), the ring's last step ends a chain of 3 crossings (6 ms and its
#     messages), by generous margins on these 2 shared cores.
#  3. With the wire in the tuning file (`wire net 0.002`), the model's pick (online
#     tuning off) crosses once: it measures under 1.5 x 2 ms.
# usage: delay.sh NETNS_TEST_SH WEFT_CHECK_ALLREDUCE WEFT_PERF
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$1" check 2 2 "$2" --shape 2gbit:2ms -- --counts 0,1,65537,4M --dtypes float,half --ops sum,max \
  >"$tmp/check" 2>&1
rc=$?
cat "$tmp/check"
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "FAIL: the check across the delay line exited $rc"; exit 1; }
# The model's constants for these hosts: built-in, and the wire.
printf 'wire net 0.002\n' >"$tmp/tuning.txt"
WEFT_TUNING_FILE="$tmp/tuning.txt" WEFT_TUNE_ONLINE=0 WEFT_DEBUG=WARN "$1" run 2 2 "$3" --shape 2gbit:2ms -- \
  allreduce -b 16 -e 16 -a all -n 10 -w 2 -c 1 --json "$tmp/m.json" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ $rc = 0 ] || { echo "FAIL: netns run exited $rc"; exit 1; }
grep -q "held 2000 us each" "$tmp/out" || { echo "FAIL: the delay line did not report"; exit 1; }
python3 - "$tmp/m.json" <<'PY'
import json, statistics, sys
p = json.load(open(sys.argv[1]))["points"][0]
t = {n: statistics.median(v) / 1e3 for n, v in p["samples_us"].items() if v}
print("measured ms:", ", ".join("%s %.2f" % kv for kv in sorted(t.items(), key=lambda kv: kv[1])))
W = 2.0
ok = True
def within(name, lo, hi):
    global ok
    if not lo <= t[name] <= hi:
        print("FAIL: %s took %.2f ms, expected %.1f to %.1f" % (name, t[name], lo, hi)); ok = False
within("recdoubling", W, W + 1.5)
within("ring", 3 * W, 3 * W + 3)
pick = p["pick"]
if not t[pick] < 1.5 * W:
    print("FAIL: the model picked %s, %.2f ms: more than one crossing" % (pick, t[pick])); ok = False
if ok:
    print("PASS: recdoubling %.2f ms, ring %.2f ms; the model picked %s, %.2f ms" %
          (t["recdoubling"], t["ring"], pick, t[pick]))
sys.exit(0 if ok else 1)
PY
