#!/usr/bin/env python3
"""Throughput of weft-train's `small` preset against an equivalent PyTorch model.

Same config (6 layers, 6 heads, width 384, context 256, vocab 256, batch 8, no
dropout), same thread count, same step (forward, backward, global-norm clip 1.0,
AdamW). PyTorch runs transformers' GPT2LMHeadModel in fp32, and in bf16 autocast
for the bf16 comparison. Prints tokens/s of each and the ratios; the two alternate
for --rounds rounds and the best rate of each counts (robust to other load).

usage: train_vs_torch.py WEFT_TRAIN [--steps N] [--threads N] [--dtypes fp32,bf16]
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time


def weft(exe, steps, warmup, threads, dtype):
    out = tempfile.mkdtemp(prefix="weft-bench-")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [exe, "--preset", "small", "--dtype", dtype, "--steps", str(steps + warmup), "--out", out,
           "--sample", "0", "--eval-every", "0", "--eval-batches", "1", "--log-every", "1000000"]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    rows = list(csv.DictReader(open(os.path.join(out, "metrics.csv"))))
    rows = [r for r in rows if r["tokens_per_s"]][warmup:]
    tokens = 8 * 256
    seconds = sum(tokens / float(r["tokens_per_s"]) for r in rows)
    return len(rows) * tokens / seconds


def torch_rate(steps, warmup, threads, dtype):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    cfg = GPT2Config(vocab_size=256, n_positions=256, n_embd=384, n_layer=6, n_head=6,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu_new",
                     bos_token_id=37, eos_token_id=37)
    model = GPT2LMHeadModel(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    B, T = 8, 256
    x = torch.randint(0, 256, (B, T))
    y = torch.randint(0, 256, (B, T))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(dtype == "bf16")):
            logits = model(x).logits
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, 256), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * B * T / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weft_train")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternate weft and torch this many times; report the best of each")
    a = ap.parse_args()
    import torch
    print(f"small preset, batch 8 x 256, {a.steps} timed steps after {a.warmup} warmup, "
          f"{a.threads} threads, best of {a.rounds} alternating rounds, torch {torch.__version__}")
    print(f"{'dtype':6} {'weft tok/s':>12} {'torch tok/s':>12} {'weft/torch':>10}")
    for dt in a.dtypes.split(","):
        w = t = 0.0
        for _ in range(a.rounds):  # alternating, best of: robust to other load on the machine
            w = max(w, weft(a.weft_train, a.steps, a.warmup, a.threads, dt))
            t = max(t, torch_rate(a.steps, a.warmup, a.threads, dt))
        print(f"{dt:6} {w:12.0f} {t:12.0f} {w / t:10.2f}x", flush=True)


if __name__ == "__main__":
    sys.exit(main())
