#!/usr/bin/env python3
"""Draws a weft-sim --csv file: bus bandwidth against message size, one line per
algorithm, the tuner's pick as dots over them. Needs matplotlib.

usage: plot.py SIM.csv OUT.png [--title TEXT]
"""
import argparse
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    lines = defaultdict(list)
    picks = []
    with open(a.csv) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{a.csv}: no rows")
    for r in rows:
        point = (int(r["bytes"]), float(r["busbw_GBps"]))
        lines[r["algorithm"]].append(point)
        if r["pick"] == "1":
            picks.append(point)
    fig, ax = plt.subplots(figsize=(10, 6))
    for name, pts in sorted(lines.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name, linewidth=1.2)
    picks.sort()
    ax.plot([p[0] for p in picks], [p[1] for p in picks], "ko", markersize=3, label="tuner's pick")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("predicted bus bandwidth (GB/s)")
    title = a.title or f"weft-sim: {rows[0]['coll']}, {rows[0]['ranks']} ranks"
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)


if __name__ == "__main__":
    main()
