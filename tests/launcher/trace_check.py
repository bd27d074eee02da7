#!/usr/bin/env python3
"""Checks WEFT_TRACE output of a 2-rank weft-perf run (tests/launcher's trace
test): every file is a valid trace, each rank has the same collective calls,
every schedule step lies inside its call's span on the same row, online tuning's
agreements are there, every all-reduce
of N bytes sends at least N/2 bytes from each of its 2 ranks (the least any
algorithm can), point-to-point groups are there when asked for, and the merge
keeps every event.

usage: trace_check.py MERGED.json TRACE0.json TRACE1.json [--p2p]  (--p2p: a sendrecv run,
point-to-point spans required, collectives optional)
"""
import bisect
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "weft-trace"))
from merge import load_trace  # noqa: E402


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    merged_path, paths = sys.argv[1], [a for a in sys.argv[2:] if not a.startswith("--")]
    want_p2p = "--p2p" in sys.argv
    total = 0
    calls_per_rank = []
    for rank, path in enumerate(paths):
        events, _, complete = load_trace(path)
        if not complete:
            fail(f"{path}: not closed although the process exited")
        total += len(events)
        rows = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
        if not rows:
            fail(f"{path}: no communicator row names")
        colls = [e for e in events if e["ph"] == "X" and e["cat"] == "coll"]
        steps = [e for e in events if e["ph"] == "X" and e["cat"] == "step"]
        if not want_p2p and (not colls or not steps):
            fail(f"{path}: {len(colls)} collective spans, {len(steps)} step spans")
        by_row = {}  # tid -> (start times, steps), sorted by start
        for st in sorted(steps, key=lambda e: e["ts"]):
            row = by_row.setdefault(st["tid"], ([], []))
            row[0].append(st["ts"])
            row[1].append(st)
        if any(e["pid"] != rank for e in colls):
            fail(f"{path}: a collective span is not under pid {rank}")
        for c in colls:
            a = c["args"]
            for key in ("seq", "count", "dtype", "algorithm", "ok"):
                if key not in a:
                    fail(f"{path}: {c['name']} has no {key}")
            row = by_row.get(c["tid"], ([], []))
            lo = bisect.bisect_left(row[0], c["ts"])
            hi = bisect.bisect_right(row[0], c["ts"] + c["dur"] + 0.01)
            inside = [s for s in row[1][lo:hi] if s["ts"] + s["dur"] <= c["ts"] + c["dur"] + 0.01]
            if a["count"] > 0 and not inside:
                fail(f"{path}: {c['name']} (count {a['count']}) has no step inside its span")
            if c["name"].startswith("allreduce") and a["count"] > 0 and a["dtype"] == "float32":
                sent = sum(s["args"]["bytes"] for s in inside if s["name"].startswith("Send"))
                if sent < a["count"] * 4 / 2:
                    fail(f"{path}: {c['name']} ({a['algorithm']}, {a['count']} floats) sent {sent} B, "
                         f"less than half of {a['count'] * 4}")
        for s in steps:
            remote = s["name"].split()[0] in ("Send", "Recv", "RecvReduce")
            if s["args"]["bytes"] <= 0 or s["args"]["peer"] not in ((0, 1) if remote else (-1,)):
                fail(f"{path}: step {s}")
        if not want_p2p and not [e for e in events if e["ph"] == "i" and e["cat"] == "tune"]:
            fail(f"{path}: no online-tuning agreement in the trace")
        calls_per_rank.append(sorted(c["name"] for c in colls))
        if want_p2p and not [e for e in events if e["ph"] == "X" and e["cat"] == "p2p"]:
            fail(f"{path}: no point-to-point spans")
    if calls_per_rank[0] != calls_per_rank[1]:
        fail("the ranks' collective calls differ")
    merged = json.load(open(merged_path))["traceEvents"]
    if len(merged) != total or {e["pid"] for e in merged} != {0, 1}:
        fail(f"merged: {len(merged)} events (want {total}), pids {sorted({e['pid'] for e in merged})}")
    print(f"PASS: {len(calls_per_rank[0])} collective calls per rank, {total} events, steps inside their calls")


if __name__ == "__main__":
    main()
