#!/usr/bin/env python3
"""2026-12-07 diagnosis aid (run from the repository root, after a build):
    python3 bench-results/2026-12-07-port-sharing/lanes.py RUN.txt...
For the 4x2 tables of bench/topology/run outputs, prints measured / predicted at
>= 1 MiB per algorithm under two port models of weft-sim: each host's one port
served first come first served (today's model: --inter net:239MB/s plus tbf's
burst) and each rank a fixed lane of half the rate (--inter net:2x119.5MB/s),
which is what fair sharing gives while both ranks of a host send. Constants are
the 2026-11-29 runs' (239 MB/s, 25 us, burst 128K at 1787.5 MB/s); the cores
share is each run's own."""
import re, subprocess, sys
runs = sys.argv[1:]
def sim(args):
    out = subprocess.run(["build/tools/weft-sim/weft-sim"] + args + ["--csv", "/dev/stdout"], capture_output=True, text=True, timeout=600).stdout
    res = {}
    for line in out.splitlines():
        p = line.split(",")
        if len(p) >= 5 and p[2].isdigit():
            res[(int(p[2]), p[3])] = float(p[4]) * 1e6
    return res
agg = {}
for path in runs:
    share = None; cur = None; algos = None
    for line in open(path):
        m = re.match(r"# 4x2 cores: share (\S+)", line)
        if m: share = m.group(1)
        if re.match(r"# 4x2 hosts x ranks", line): cur = {}; continue
        if cur is not None and line.strip().startswith("bytes"): algos = line.split()[1:]; continue
        if cur is not None and algos and re.match(r"\s+\d+\s", line):
            f = line.split()
            b = int(f[0])
            for a, v in zip(algos, f[1:]):
                if "/" in v: cur[(b, a)] = float(v.split("/")[0])
        if cur is not None and line.startswith("# predictions"): break
    base = ["--nodes", "4", "--per-node", "2", "--shared-cores", "2", "--cpu-share", share, "-b", "1M", "-e", "64M", "-f", "4"]
    fifo = sim(base + ["--inter", "net:239MB/s:25us", "--burst", "128K:1787.5MB/s"])
    half = sim(base + ["--inter", "net:2x119.5MB/s:25us", "--burst", "64K:893.75MB/s"])
    for (b, a), m in cur.items():
        if b >= 1 << 20 and (b, a) in fifo:
            agg.setdefault(a, []).append((m / fifo[(b, a)], m / half[(b, a)]))
for a, v in sorted(agg.items()):
    print("%-13s measured/FIFO %s   measured/half-rate lanes %s" % (a, " ".join("%.2f" % x for x, _ in v), " ".join("%.2f" % y for _, y in v)))
