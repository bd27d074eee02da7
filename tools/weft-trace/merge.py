#!/usr/bin/env python3
"""Merges WEFT_TRACE files (one per rank: WEFT_TRACE=trace-%r.json) into one trace
that ui.perfetto.dev or chrome://tracing shows with a row group per rank. Every
event already carries pid = its rank and tid = its communicator, so merging is
concatenation; dropped-event counts add up.

usage: merge.py OUT.json TRACE.json [TRACE.json ...]
"""
import json
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    out, inputs = sys.argv[1], sys.argv[2:]
    events, dropped = [], 0
    for path in inputs:
        with open(path) as f:
            t = json.load(f)
        events.extend(t["traceEvents"])
        dropped += t.get("otherData", {}).get("dropped_events", 0)
    with open(out, "w") as f:
        json.dump({"displayTimeUnit": "ns", "otherData": {"dropped_events": dropped, "merged": len(inputs)},
                   "traceEvents": events}, f)
    print(f"{out}: {len(events)} events from {len(inputs)} files")


if __name__ == "__main__":
    main()
