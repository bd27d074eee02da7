#!/usr/bin/env python3
"""Scores the simulator as it is now against measurements bench/topology/run made
before: reads the tables run printed (its stdout, kept in bench-results), runs
weft-sim again on each table's layout with that run's link constants (and cores
share, where it printed one: per setup, or for all), plus any extra weft-sim arguments (later ones win), and counts what compare.py counts: predictions within 20%
at >= 1 MiB and within 2x below, and the simulator's pick within 10% of the fastest
measured. Nothing is timed again, so a change to the model, or a constant, can be
tried on many runs in seconds, and fitted on some runs and checked on others.

usage: rescore.py [--sim PATH] [--detail] RUN.txt... [-- WEFT-SIM ARGS...]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

from compare import LARGE, read_sim_csv, within_goal


def tables(path):
    """Yields (hosts, per_host, inter, burst, cpu_share, {bytes: {algo: measured_us}})."""
    inter = burst = share = None
    cur = None
    for line in open(path):
        m = re.match(r"# links: .*net alpha ([0-9.e+-]+) s, beta ([0-9.e+-]+) s/B;.*weft-sim (.*)$", line)
        if m:
            alpha, beta = float(m.group(1)), float(m.group(2))
            inter = "net:%gMB/s:%gus" % (1 / beta / 1e6, alpha * 1e6)
            b = re.search(r"--burst (\S+)", m.group(3))
            burst = b.group(1) if b else None
            c = re.search(r"--cpu-share (\S+)", m.group(3))
            share = c.group(1) if c else None
            continue
        m = re.match(r"# \d+x\d+ cores: share (\S+)", line)
        if m:
            share = m.group(1)
            continue
        m = re.match(r"# (\d+)x(\d+) hosts x ranks", line)
        if m:
            cur = (int(m.group(1)), int(m.group(2)), inter, burst, share, {})
            continue
        f = line.split()
        if cur and f and f[0] == "bytes":
            algos = [a for a in f[1:] if a not in ("fastest", "pick", "pick/f", "auto/f")]
            continue
        if cur and f and f[0].isdigit():
            cur[5][int(f[0])] = {a: float(c.split("/")[0]) for a, c in zip(algos, f[1:]) if "/" in c}
            continue
        if cur and line.startswith("# predictions"):
            yield cur
            cur = None


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=os.path.join(os.environ.get("BUILD_DIR", "build"), "tools/weft-sim/weft-sim"))
    ap.add_argument("--detail", action="store_true", help="print every prediction outside its bound")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args(argv)
    total = [0] * 6
    for path in a.runs:
        for hosts, per, inter, burst, share, meas in tables(path):
            sizes = sorted(meas)
            with tempfile.NamedTemporaryFile(suffix=".csv") as out:
                cmd = [a.sim, "--nodes", str(hosts), "--per-node", str(per), "--inter", inter,
                       "-b", str(sizes[0]), "-e", str(sizes[-1]), "-f", "4", "--shared-cores", "2", "--csv", out.name]
                if burst:
                    cmd += ["--burst", burst]
                if share:
                    cmd += ["--cpu-share", share]
                subprocess.run(cmd + extra, check=True, stdout=subprocess.DEVNULL, timeout=600)
                pred, pick = read_sim_csv(out.name)
            large = [0, 0]
            small = [0, 0]
            near = 0
            misses = []
            for b in sizes:
                for name, t in meas[b].items():
                    s = pred.get((b, name))
                    if s is None:
                        continue
                    ok = within_goal(b, t, s)
                    bucket = large if b >= LARGE else small
                    bucket[0] += ok
                    bucket[1] += 1
                    if not ok:
                        misses.append("%s %d: measured %.0f, predicted %.0f (%.2fx)" % (name, b, t, s, t / s))
                fastest = min(meas[b].values())
                picked = meas[b].get(pick.get(b))
                near += picked is not None and picked <= 1.1 * fastest
                if picked is not None and picked > 1.1 * fastest:
                    misses.append("pick %s at %d: %.2fx the fastest" % (pick[b], b, picked / fastest))
            print("%s %dx%d: large %d/%d, small %d/%d, pick %d/%d" %
                  (os.path.basename(path), hosts, per, large[0], large[1], small[0], small[1], near, len(sizes)))
            if a.detail:
                for m in misses:
                    print("    " + m)
            for i, v in enumerate(large + small + [near, len(sizes)]):
                total[i] += v
    print("total: large %d/%d, small %d/%d, pick %d/%d" % tuple(total))


if __name__ == "__main__":
    main()
