"""A training script as written for gloo, nothing weft-specific: the torchrun
test runs it unchanged except for the backend name ("gloo" -> "weft").
Exercises DDP, ZeroRedundancyOptimizer and FSDP2 (fully_shard) on CPU and
checks every rank ends with identical parameters."""
import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def train(m, opt, rank, steps=10):
    gen = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        opt.zero_grad()
        m(torch.randn(8, 16, generator=gen)).square().mean().backward()
        opt.step()


def same_everywhere(m, what):
    flat = torch.cat([p.detach().full_tensor().flatten() if hasattr(p, "full_tensor") else p.detach().flatten()
                      for p in m.parameters()])
    mine = flat.clone()
    dist.broadcast(flat, 0)
    assert torch.equal(flat, mine), f"{what}: parameters differ across ranks"


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ddp = DDP(model())
    train(ddp, torch.optim.SGD(ddp.parameters(), lr=0.1), rank)
    same_everywhere(ddp, "DDP")

    ddp = DDP(model())
    zero = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
    train(ddp, zero, rank)
    same_everywhere(ddp, "ZeroRedundancyOptimizer")

    if not hasattr(torch.cpu.Stream, "record_event"):  # FSDP2 on CPU needs it (not in torch 2.6)
        print(f"rank {rank}: OK ({dist.get_backend()}, without FSDP2)", flush=True)
        dist.destroy_process_group()
        return
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    m = model()
    for layer in m:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    train(m, torch.optim.Adam(m.parameters(), lr=1e-3), rank)
    same_everywhere(m, "FSDP2")

    dist.barrier()
    print(f"rank {rank}: OK ({dist.get_backend()})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
