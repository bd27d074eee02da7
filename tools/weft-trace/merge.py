#!/usr/bin/env python3
"""Merges WEFT_TRACE files (one per rank: WEFT_TRACE=trace-%r.json) into one trace
that ui.perfetto.dev or chrome://tracing shows with a row group per rank. Every
event already carries pid = its rank and tid = its communicator, so merging is
concatenation; dropped-event counts add up. A file of a process killed by a signal
ends without its closing bracket (and holds the calls it finished): it is read as
far as it goes.

usage: merge.py OUT.json TRACE.json [TRACE.json ...]
"""
import json
import sys


def load_trace(path):
    """(events, dropped, complete) of one WEFT_TRACE file."""
    with open(path) as f:
        text = f.read().strip()
    complete = text.endswith("]")
    if not complete:
        text = text.rstrip(",") + "]"
    events = json.loads(text)
    dropped = sum(e["args"]["count"] for e in events if e.get("name") == "dropped_events" and e.get("ph") == "M")
    events = [e for e in events if not (e.get("name") == "dropped_events" and e.get("ph") == "M")]
    return events, dropped, complete


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    out, inputs = sys.argv[1], sys.argv[2:]
    events, dropped, cut = [], 0, []
    for path in inputs:
        ev, d, complete = load_trace(path)
        events.extend(ev)
        dropped += d
        if not complete:
            cut.append(path)
    with open(out, "w") as f:
        json.dump({"displayTimeUnit": "ns", "otherData": {"dropped_events": dropped, "merged": len(inputs)},
                   "traceEvents": events}, f)
    print(f"{out}: {len(events)} events from {len(inputs)} files"
          + (f" ({', '.join(cut)} cut short: the process did not exit)" if cut else ""))


if __name__ == "__main__":
    main()
