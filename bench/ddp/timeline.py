#!/usr/bin/env python3
"""Draws a weft-train --trace file as a PNG timeline: one row per rank and track
(compute; gradient buckets; ZeRO-3 parameter gathers), forward blocks in blue,
backward blocks in orange, collectives in green, waits in red, the optimizer in
purple. Needs matplotlib.

usage: timeline.py TRACE.json OUT.png [--title TEXT]
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def color(name):
    if name.startswith("forward,") or name.startswith("backward,"):
        return None  # the micro-batch spans enclose the block spans: not drawn
    if name.startswith("forward"):
        return "#1f77b4"
    if name.startswith("backward"):
        return "#ff7f0e"
    if name.startswith("wait"):
        return "#d62728"
    if name.startswith("AdamW"):
        return "#9467bd"
    return "#2ca02c"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    events = json.load(open(a.trace))["traceEvents"]
    spans = [e for e in events if e["ph"] == "X" and color(e["name"])]
    rows = sorted({(e["pid"], e["tid"]) for e in spans})
    tracks = {0: "compute", 1: "buckets", 2: "gathers"}
    fig, ax = plt.subplots(figsize=(12, 0.6 * len(rows) + 1.2))
    for i, (pid, tid) in enumerate(rows):
        for e in spans:
            if (e["pid"], e["tid"]) != (pid, tid):
                continue
            x, w = e["ts"] / 1e3, max(e["dur"] / 1e3, 0.05)
            ax.broken_barh([(x, w)], (i - 0.4, 0.8), facecolors=color(e["name"]), edgecolor="white", linewidth=0.3)
            if tid == 1 or w > 40:
                label = (e["name"].replace("forward block ", "F").replace("backward block ", "B")
                         .replace(" attention", " attn").replace("bucket ", "b"))
                ax.text(x + w / 2, i, label, ha="center", va="center", fontsize=6, clip_on=True)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"rank {p} {tracks.get(t, t)}" for p, t in rows])
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    if a.title:
        ax.set_title(a.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
