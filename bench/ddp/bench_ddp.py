#!/usr/bin/env python3
"""Data-parallel training on 2 cores: weft-train against PyTorch DDP and DeepSpeed.

Every configuration trains the `small` preset (6 layers, 6 heads, width 384,
context 256, vocab 256, no dropout) in fp32 on a global batch of 16 x 256 tokens
per step with 2 threads in all: one process with 2 threads and 2 micro-batches,
or 2 ranks with 1 thread and 1 micro-batch of 8 each (DDP with buckets, one bucket,
ZeRO-1/2/3, PowerSGD rank 4). The step is forward,
backward, gradient reduction, global-norm clip 1.0, AdamW. Prints tokens/s, the
step split where the trainer reports it, and the ratios the issue sets as goals.

usage: bench_ddp.py BUILD_DIR [--steps N] [--warmup N]
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import time

B, T, V = 8, 256, 256


def weft(build, ranks, extra, steps, warmup):
    out = tempfile.mkdtemp(prefix="weft-bench-ddp-")
    exe = os.path.join(build, "tools/weft-train/weft-train")
    args = ["--preset", "small", "--steps", str(steps + warmup), "--out", out, "--sample", "0",
            "--eval-every", "0", "--eval-batches", "1", "--log-every", "1000000"] + extra
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    if ranks == 1:
        cmd = [exe, "--threads", "2", "--grad-accum", "2"] + args
    else:
        cmd = [os.path.join(build, "tools/weft-run/weft-run"), "-n", str(ranks), "--", exe, "--threads", "1"] + args
    text = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True).stdout
    rows = [r for r in csv.DictReader(open(os.path.join(out, "metrics.csv"))) if r["tokens_per_s"]][warmup:]
    tokens = 2 * B * T
    seconds = sum(tokens / float(r["tokens_per_s"]) for r in rows)
    m = re.search(r"compute ([\d.]+) ms \+ exposed communication ([\d.]+) ms \(([\d.]+)%\) \+ optimizer ([\d.]+) ms",
                  text)
    split = f"compute {m.group(1)} ms, exposed comm {m.group(2)} ms ({m.group(3)}%), optimizer {m.group(4)} ms" \
        if m else ""
    return len(rows) * tokens / seconds, split


TORCH_WORKER = r'''
import os, sys, time, torch, torch.distributed as dist
from transformers import GPT2Config, GPT2LMHeadModel
mode, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=256, n_positions=256, n_embd=384, n_layer=6, n_head=6, resid_pdrop=0.0,
                 embd_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu_new")
model = GPT2LMHeadModel(cfg)
model.train()
B, T = 8, 256
x = torch.randint(0, 256, (B, T)); y = torch.randint(0, 256, (B, T))
if mode.startswith("ddp"):  # "ddp" (gloo) or "ddp:BACKEND", e.g. ddp:weft (bench/torch-backend)
    dist.init_process_group(mode.partition(":")[2] or "gloo")
    net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    def step():
        loss = torch.nn.functional.cross_entropy(net(x).logits.view(-1, 256), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step(); opt.zero_grad(set_to_none=True)
else:
    import deepspeed
    stage = int(mode[-1])
    conf = {"train_micro_batch_size_per_gpu": B, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "weight_decay": 0.1,
                                                      "torch_adam": True}},
            "zero_optimization": {"stage": stage}}
    deepspeed.init_distributed(dist_backend="gloo")
    net, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=conf)
    def step():
        loss = torch.nn.functional.cross_entropy(net(x).logits.view(-1, 256), y.view(-1))
        net.backward(loss); net.step()
for _ in range(warmup): step()
dist.barrier(); t0 = time.perf_counter()
for _ in range(steps): step()
dist.barrier(); dt = time.perf_counter() - t0
if dist.get_rank() == 0: print("RATE", steps * 2 * B * T / dt, flush=True)
'''


def torch_run(mode, steps, warmup):
    script = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
    script.write(TORCH_WORKER)
    script.close()
    port = str(29500 + os.getpid() % 1000)
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS="1", DS_ACCELERATOR="cpu")
        procs.append(subprocess.Popen([sys.executable, script.name, mode, str(steps), str(warmup)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=1800) for p in procs]
    for p, (o, e) in zip(procs, outs):
        if p.returncode != 0:
            lines = [l for l in e.strip().splitlines() if l.strip()]
            return None, lines[-1] if lines else f"exit {p.returncode}"
    m = re.search(r"RATE ([\d.]+)", outs[0][0])
    return float(m.group(1)), ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    import torch
    print(f"small preset fp32, global batch 2 x {B} x {T} tokens, 2 threads in all, {a.steps} timed steps after "
          f"{a.warmup} warm-up; torch {torch.__version__}", flush=True)
    rates = {}

    def show(name, rate, note=""):
        rates[name] = rate
        r = f"{rate:8.0f}" if rate else "       -"
        print(f"  {name:44} {r} tok/s  {note}", flush=True)

    show("weft-train 1 rank x 2 threads (accum 2)", *weft(a.build, 1, [], a.steps, a.warmup))
    show("weft-train DDP 2 ranks x 1 thread", *weft(a.build, 2, [], a.steps, a.warmup))
    show("weft-train DDP, one bucket (no overlap)", *weft(a.build, 2, ["--bucket-mb", "100000"], a.steps, a.warmup))
    show("weft-train ZeRO-1 2 ranks", *weft(a.build, 2, ["--zero", "1"], a.steps, a.warmup))
    show("weft-train ZeRO-2 2 ranks", *weft(a.build, 2, ["--zero", "2"], a.steps, a.warmup))
    show("weft-train ZeRO-3 2 ranks", *weft(a.build, 2, ["--zero", "3"], a.steps, a.warmup))
    show("weft-train DDP + PowerSGD rank 4", *weft(a.build, 2, ["--powersgd", "4", "--powersgd-start", "0"],
                                                    a.steps, a.warmup))
    show("PyTorch DDP (gloo) 2 ranks x 1 thread", *torch_run("ddp", a.steps, a.warmup))
    try:
        import deepspeed  # noqa: F401
        for st in (1, 2, 3):
            rate, err = torch_run(f"ds{st}", a.steps, a.warmup)
            show(f"DeepSpeed ZeRO-{st} (CPU accelerator, gloo)", rate, "" if rate else f"did not run: {err}")
    except ImportError:
        print("  DeepSpeed: not installed in the venv (pip install deepspeed)")
    one, ddp = rates["weft-train 1 rank x 2 threads (accum 2)"], rates["weft-train DDP 2 ranks x 1 thread"]
    print(f"DDP 2 ranks / 1 rank 2 threads: {ddp / one:.2f}x (goal >= 1.0)")
    t = rates.get("PyTorch DDP (gloo) 2 ranks x 1 thread")
    if t:
        print(f"weft DDP / PyTorch DDP+gloo:    {ddp / t:.2f}x (goal >= 1.3)")
    print(f"one bucket / buckets:           {rates['weft-train DDP, one bucket (no overlap)'] / ddp:.2f}x")
    for z in (1, 2, 3):
        print(f"ZeRO-{z} / DDP:                   {rates[f'weft-train ZeRO-{z} 2 ranks'] / ddp:.2f}x"
              + (" (goal >= 0.85)" if z == 3 else ""))


if __name__ == "__main__":
    sys.exit(main())
