#!/usr/bin/env python3
"""Measured against simulated, per algorithm and size: reads weft-perf -a all
--json (measured medians; its "pick" is what the auto communicator ran, "auto" that
communicator's own time) and
weft-sim --csv (predicted) for the same collective, ranks and sizes, and prints
one table and the goals' counts.

usage: compare.py MEASURED.json SIMULATED.csv [--label TEXT]
"""
import argparse
import csv
import json
import statistics

LARGE = 1 << 20  # the goals: within 20% from here, within 2x below


def within_goal(nbytes, measured_us, predicted_us):
    """Whether a prediction is within the goal's bound for its size."""
    ratio = predicted_us / measured_us
    return 0.8 <= ratio <= 1.2 if nbytes >= LARGE else 0.5 <= ratio <= 2.0


def read_sim_csv(path):
    """weft-sim --csv -> ({(bytes, algorithm): predicted us}, {bytes: the tuner's pick})."""
    pred, pick = {}, {}
    for r in csv.DictReader(open(path)):
        pred[(int(r["bytes"]), r["algorithm"])] = float(r["seconds"]) * 1e6
        if r["pick"] == "1":
            pick[int(r["bytes"])] = r["algorithm"]
    return pred, pick


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measured")
    ap.add_argument("simulated")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    m = json.load(open(a.measured))
    pred, _ = read_sim_csv(a.simulated)
    algos = []
    for p in m["points"]:
        for name in p["samples_us"]:
            if name != "auto" and name not in algos:
                algos.append(name)
    print(f"# {a.label} {m['collective']}, {m['nranks']} ranks: measured median us / simulated us per algorithm")
    print("%10s " % "bytes" + " ".join("%19s" % n for n in algos) + "  %13s %13s %6s %6s" % ("fastest", "pick", "pick/f", "auto/f"))
    large = [0, 0]  # within 20%, total (>= 1 MiB)
    small = [0, 0]  # within 2x, total
    near = [0, 0]   # pick within 10% of the fastest measured, sizes
    auto_near = 0   # the auto communicator's own time within 10% of the fastest
    for p in m["points"]:
        b = p["bytes"]
        meas = {n: statistics.median(v) for n, v in p["samples_us"].items() if v}
        cells = []
        for n in algos:
            if n not in meas:
                cells.append("%19s" % "-")
                continue
            s = pred.get((b, n))
            cells.append("%9.1f/%-9s" % (meas[n], "%.1f" % s if s is not None else "-"))
            if s is not None:
                bucket = large if b >= LARGE else small
                bucket[0] += within_goal(b, meas[n], s)
                bucket[1] += 1
        forced = {n: t for n, t in meas.items() if n != "auto"}
        fastest = min(forced, key=forced.get)
        pick = p.get("pick") or "-"
        picked = forced.get(pick)
        rel = picked / forced[fastest] if picked else float("nan")
        near[0] += picked is not None and rel <= 1.1
        near[1] += 1
        auto_rel = meas["auto"] / forced[fastest] if "auto" in meas else float("nan")
        auto_near += auto_rel <= 1.1
        print("%10d " % b + " ".join(cells) + "  %13s %13s %6.2f %6.2f" % (fastest, pick, rel, auto_rel))
    print(f"# predictions within 20% at >= 1 MiB: {large[0]} of {large[1]}; within 2x below: {small[0]} of {small[1]}")
    print(f"# the tuner's pick within 10% of the fastest measured at {near[0]} of {near[1]} sizes"
          f" (the auto communicator's own time: {auto_near})")


if __name__ == "__main__":
    main()
