"""See run. Prints one table per world size and the DDP comparison, with the
ratios against the goals."""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ddp"))
from bench_ddp import torch_run  # noqa: E402

SIZES = [8 << i for i in range(0, 26, 1)]  # 8 B .. 256 MiB


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world, args, timeout):
    """Runs this file as `world` ranks with args; returns rank 0's stdout."""
    port = free_port()
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker"] + args, env=env, text=True,
                                      stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL,
                                      start_new_session=True))
    try:
        out, _ = procs[0].communicate(timeout=timeout)
        for p in procs[1:]:
            p.wait(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    if any(p.returncode != 0 for p in procs):
        raise SystemExit(f"bench: a rank failed ({[p.returncode for p in procs]})\n{out}")
    return out


def timed(fn):
    """Seconds per call: median of 5 batches of at least 50 ms each."""
    import torch
    import torch.distributed as dist
    fn()
    iters = 1
    while True:
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        dt = time.perf_counter() - t0
        # every rank must run the same count: rank 0 decides
        flag = torch.tensor([1 if dt < 0.05 and iters < 100000 else 0])
        dist.broadcast(flag, 0)
        if not flag.item():
            break
        iters *= 4
    batches = []
    for _ in range(5):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        batches.append((time.perf_counter() - t0) / iters)
    return sorted(batches)[2]


def worker_allreduce(max_bytes):
    import torch
    import torch.distributed as dist
    import weft_torch
    torch.set_num_threads(1)
    dist.init_process_group("weft")
    gloo = dist.new_group(backend="gloo")
    for nbytes in [s for s in SIZES if s <= max_bytes]:
        t = torch.ones(nbytes // 4)
        row = [nbytes]
        for group in (None, gloo):
            row.append(timed(lambda: dist.all_reduce(t, group=group)))
        if dist.get_rank() == 0:
            print("AR", *row, flush=True)
    # What the binding adds: weftAllReduce in a C++ loop, the backend's
    # allreduce()->wait() in a C++ loop, and torch.distributed.all_reduce.
    t = torch.ones(2)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    n = 20000
    direct = min(weft_torch._C.time_allreduce(backend, t, n, True) for _ in range(3))
    binding = min(weft_torch._C.time_allreduce(backend, t, n, False) for _ in range(3))
    python = timed(lambda: dist.all_reduce(t))
    if dist.get_rank() == 0:
        print("OVERHEAD", direct, binding, python, flush=True)
    dist.destroy_process_group()


def fmt_size(n):
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} GiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--quick", action="store_true", help="sizes up to 1 MiB, 3 DDP steps")
    ap.add_argument("--no-allreduce", action="store_true", help="only the DDP comparison")
    ap.add_argument("--no-ddp", action="store_true", help="only the all_reduce tables")
    ap.add_argument("--rounds", type=int, default=2, help="DDP runs per backend, alternating (default 2)")
    ap.add_argument("rest", nargs="*")
    a = ap.parse_args()
    if a.worker:
        worker_allreduce(int(a.rest[1]))
        return
    max_bytes = 1 << 20 if a.quick else 256 << 20
    for world in () if a.no_allreduce else (2, 4):
        if world == 2:
            print("torch.distributed.all_reduce, float32, sum; weft and gloo groups in the same processes")
        out = launch(world, ["allreduce", str(max_bytes)], timeout=1800)
        print(f"\n{world} ranks       weft            gloo            weft vs gloo")
        print(f"{'size':>10} {'us':>9} {'busbw GB/s':>10} {'us':>9} {'busbw GB/s':>10}")
        big = []
        for line in out.splitlines():
            if line.startswith("AR"):
                _, n, w, g = line.split()
                n, w, g = int(n), float(w), float(g)
                bus = lambda s: 2 * (world - 1) / world * n / s / 1e9
                print(f"{fmt_size(n):>10} {w * 1e6:9.1f} {bus(w):10.2f} {g * 1e6:9.1f} {bus(g):10.2f}   "
                      f"{g / w:6.1f}x")
                if n == 8:
                    print(f"           8 B latency: weft {g / w:.1f}x lower than gloo (goal >= 20x)")
                if n >= 64 << 20:
                    big.append(g / w)
            elif line.startswith("OVERHEAD"):
                _, d, b, p = line.split()
                d, b, p = float(d), float(b), float(p)
                overhead = (b - d) * 1e6
        if big:
            print(f"  64-256 MiB busbw: weft {min(big):.2f}x to {max(big):.2f}x gloo's (goal >= 2.5x)")
        print(f"  8 B per call: weftAllReduce {d * 1e6:.2f} us, through the backend {b * 1e6:.2f} us "
              f"(binding adds {overhead:.2f} us, goal <= 5), torch.distributed.all_reduce {p * 1e6:.2f} us")
    if a.no_ddp:
        return
    steps, warmup = (3, 1) if a.quick else (20, 3)
    print(f"\nPyTorch DDP, transformers GPT-2 small preset (6 x 384, T 256), 2 ranks x 1 thread, "
          f"global batch 2 x 8 x 256, {steps} steps after {warmup}, {a.rounds} rounds alternating")
    ratios = []
    for rnd in range(a.rounds):
        rates = {}
        for backend in ("weft", "gloo"):
            # the same worker as bench/ddp/run's PyTorch DDP row, on either backend
            rate, err = torch_run(f"ddp:{backend}", steps, warmup)
            if rate is None:
                raise SystemExit(f"bench: DDP on {backend} failed: {err}")
            rates[backend] = rate
        ratios.append(rates["weft"] / rates["gloo"])
        print(f"  round {rnd + 1}: weft {rates['weft']:6.0f} tok/s, gloo {rates['gloo']:6.0f} tok/s: "
              f"{ratios[-1]:.2f}x", flush=True)
    ratios.sort()
    print(f"  weft / gloo: median {ratios[len(ratios) // 2]:.2f}x, range {ratios[0]:.2f}-{ratios[-1]:.2f}x "
          f"(goal >= 1.1)")

if __name__ == "__main__":
    main()
