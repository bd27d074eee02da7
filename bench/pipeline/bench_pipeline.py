#!/usr/bin/env python3
"""Pipeline-parallel training on 2 cores: every schedule of weft-train --pp
against weft-train DDP with the same global batch.

Every configuration trains the `small` preset (6 layers, width 384, context
256) in fp32 on M micro-batches of 2 x 256 tokens per step, one compute thread
per rank: P stages with --microbatches M, or DDP on P ranks with --grad-accum
M / P. Prints per configuration tokens/s, the measured bubble (idle share of all
stages over the step), the bubble simulated from the schedule with the measured
action times, the closed form, and each stage's peak activation memory; then the
ratios the goals are about.

usage: bench_pipeline.py BUILD_DIR [--steps N] [--warmup N] [--stages 2,4] [--microbatches 4,8,16] [--quick]
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

B, T = 2, 256
SCHEDULES = ["gpipe", "1f1b", "interleaved", "zb"]


def train(build, ranks, extra, steps, warmup, tokens_per_step):
    out = tempfile.mkdtemp(prefix="weft-bench-pipeline-")
    exe = os.path.join(build, "tools/weft-train/weft-train")
    data = os.path.join(build, "tools/weft-train/data")
    cmd = [os.path.join(build, "tools/weft-run/weft-run"), "-n", str(ranks), "--timeout", "600", "--", exe,
           "--preset", "small", "--batch", str(B), "--seq", str(T), "--threads", "1", "--steps",
           str(steps + warmup), "--out", out, "--sample", "0", "--eval-every", "0", "--eval-batches", "1",
           "--log-every", "1000000", "--data", data, "--verbose"] + extra
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    text = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True, timeout=900).stdout
    rows = [r for r in csv.DictReader(open(os.path.join(out, "metrics.csv"))) if r["tokens_per_s"]][warmup:]
    seconds = sum(tokens_per_step / float(r["tokens_per_s"]) for r in rows)
    res = {"tok_s": len(rows) * tokens_per_step / seconds}
    bubbles = [float(r["bubble"]) for r in rows if r.get("bubble")]
    if bubbles:
        res["bubble"] = sum(bubbles) / len(bubbles)
        m = re.search(r"simulated with the measured action times ([\d.]+), formula ([\d.]+)", text)
        res["simulated"], res["formula"] = float(m.group(1)), float(m.group(2))
        peaks = {int(s): float(v) for s, v in re.findall(r"pipeline stage (\d+): peak activations ([\d.]+) MiB", text)}
        res["peaks"] = [peaks[s] for s in sorted(peaks)]
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--stages", default="2,4")
    ap.add_argument("--microbatches", default="4,8,16")
    ap.add_argument("--quick", action="store_true", help="P = 2, M = 8 only, 2 steps")
    a = ap.parse_args()
    stages = [2] if a.quick else [int(x) for x in a.stages.split(",")]
    mbs = [8] if a.quick else [int(x) for x in a.microbatches.split(",")]
    if a.quick:
        a.steps, a.warmup = 2, 1
    print(f"small preset, fp32, micro-batch {B} x {T} tokens, 1 thread per rank, {os.cpu_count()} cores; "
          f"{a.steps} steps after {a.warmup} warm-up")
    print(f"{'P':>2} {'M':>3} {'schedule':<12} {'tok/s':>7} {'vs DDP':>7} {'bubble':>7} {'simul.':>7} "
          f"{'formula':>7}  peak activations per stage (MiB)")
    summary = []
    for P in stages:
        over = " (oversubscribed: more ranks than cores)" if P > (os.cpu_count() or 1) else ""
        for M in mbs:
            if M % P:
                continue
            tokens = M * B * T
            ddp = train(a.build, P, ["--grad-accum", str(M // P)], a.steps, a.warmup, tokens)
            print(f"{P:>2} {M:>3} {'DDP':<12} {ddp['tok_s']:>7.0f} {1:>7.2f}{over}")
            res = {}
            for s in SCHEDULES:
                extra = ["--pp", str(P), "--microbatches", str(M), "--schedule", s]
                r = res[s] = train(a.build, P, extra, a.steps, a.warmup, tokens)
                peaks = ", ".join(f"{p:.0f}" for p in r["peaks"])
                print(f"{P:>2} {M:>3} {s:<12} {r['tok_s']:>7.0f} {r['tok_s'] / ddp['tok_s']:>7.2f} "
                      f"{r['bubble']:>7.3f} {r['simulated']:>7.3f} {r['formula']:>7.3f}  {peaks}")
                sys.stdout.flush()
            gap = max(abs(r["bubble"] - r["simulated"]) for r in res.values())
            mem = max(o / g for o, g in zip(res["1f1b"]["peaks"], res["gpipe"]["peaks"]))
            summary.append(f"P={P} M={M}: largest |measured - simulated bubble| {100 * gap:.1f} points (goal <= 5); "
                           f"1F1B peak activations / GPipe's, worst stage {mem:.3f} (goal <= P/M = {P / M:.3f}); "
                           f"ZB-H1 bubble {res['zb']['bubble']:.3f} vs 1F1B {res['1f1b']['bubble']:.3f} "
                           f"(goal: below); 1F1B tok/s / DDP {res['1f1b']['tok_s'] / ddp['tok_s']:.2f}, "
                           f"best schedule / DDP {max(r['tok_s'] for r in res.values()) / ddp['tok_s']:.2f} "
                           f"(goal at P=2 M=8: >= 0.9){over}")
    print()
    for line in summary:
        print(line)


if __name__ == "__main__":
    main()
