"""What each rank runs in the tests (see harness.py). Expected values are
computed here from every rank's input with plain torch arithmetic on int64 /
float64, never by a collective."""
import datetime
import functools
import os
import random
import time

import torch
import torch.distributed as dist

import weft_torch  # noqa: F401  registers "weft"

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
          torch.int64, torch.bool]
FLOATS = {torch.float32, torch.float64, torch.float16, torch.bfloat16}
OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL_SUM", "BAND", "BOR", "BXOR"]


def init(timeout_s=60):
    dist.init_process_group(os.environ["WEFT_TEST_BACKEND"], timeout=datetime.timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def monitored_barrier(timeout_s, wait_all_ranks=False):
    """torch.distributed.monitored_barrier. torch 2.6's refuses every backend but
    gloo by name; the process group's method it wraps works there."""
    timeout = datetime.timedelta(seconds=timeout_s)
    try:
        return dist.monitored_barrier(timeout=timeout, wait_all_ranks=wait_all_ranks)
    except ValueError as e:
        if "only implemented for GLOO" not in str(e):
            raise
        return dist.group.WORLD.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


def values(dtype, op, rank, n, salt=0):
    """Rank `rank`'s input: n distinct small integers, exact in every dtype,
    chosen so that a lost or doubled contribution changes every result."""
    i = torch.arange(n, dtype=torch.int64) + salt
    if dtype == torch.bool:
        return ((i + rank) % 3 == 0)
    if op == "PRODUCT":
        v = (i + rank) % 3 + 1  # products of up to 4 ranks stay <= 81
    elif op in ("MIN", "MAX") and dtype not in (torch.uint8,):
        v = (i * 5 + rank * 3) % 11 - 5
    elif op in ("BAND", "BOR", "BXOR"):
        v = (i * 37 + rank * 11 + 5) % 128
    else:
        v = i % 7 + 2 * rank + 1
    return v.to(dtype)


def expected_reduce(op, dtype, inputs):
    """The reduction of inputs (one tensor per rank) by op, in exact arithmetic."""
    n = len(inputs)
    if dtype == torch.bool:
        if op in ("SUM", "MAX", "BOR"):
            return functools.reduce(torch.logical_or, inputs)
        if op in ("PRODUCT", "MIN", "BAND"):
            return functools.reduce(torch.logical_and, inputs)
        return functools.reduce(torch.logical_xor, inputs)
    wide = torch.float64 if dtype in FLOATS else torch.int64
    x = [t.to(wide) for t in inputs]
    if op == "SUM":
        r = sum(x)
    elif op == "PRODUCT":
        r = functools.reduce(torch.mul, x)
    elif op == "MIN":
        r = functools.reduce(torch.minimum, x)
    elif op == "MAX":
        r = functools.reduce(torch.maximum, x)
    elif op == "AVG":
        r = sum(x) / n if dtype in FLOATS else torch.div(sum(x), n, rounding_mode="trunc")
    elif op == "PREMUL_SUM":
        r = sum(t * premul_factor(dtype) for t in x)
    elif op == "BAND":
        r = functools.reduce(torch.bitwise_and, x)
    elif op == "BOR":
        r = functools.reduce(torch.bitwise_or, x)
    else:
        r = functools.reduce(torch.bitwise_xor, x)
    return r.to(dtype)


def premul_factor(dtype):
    return 0.5 if dtype in FLOATS else 2


def valid(op, dtype):
    if dtype == torch.bool:
        return op not in ("AVG", "PREMUL_SUM")
    if op in ("BAND", "BOR", "BXOR"):
        return dtype not in FLOATS
    return True


def reduce_op(op, dtype):
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(float(premul_factor(dtype)))
    return getattr(dist.ReduceOp, op)


class Checker:
    def __init__(self, tag):
        self.tag = tag
        self.failures = []
        self.checks = 0

    def equal(self, what, got, want):
        self.checks += 1
        if got.dtype != want.dtype or got.shape != want.shape:
            self.failures.append(f"{self.tag} {what}: got {got.dtype}{tuple(got.shape)}, "
                                 f"want {want.dtype}{tuple(want.shape)}")
        elif want.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            if not torch.allclose(got.double(), want.double(), rtol=1e-6 if want.dtype == torch.float64 else 4e-3,
                                  atol=0):
                self.failures.append(f"{self.tag} {what}: got {got.flatten()[:8].tolist()} "
                                     f"want {want.flatten()[:8].tolist()}")
        elif not torch.equal(got, want):
            self.failures.append(f"{self.tag} {what}: got {got.flatten()[:8].tolist()} "
                                 f"want {want.flatten()[:8].tolist()}")


def run_wait(work, async_op, check, what):
    """Completes an async_op work by wait() / its future, alternating."""
    if not async_op:
        check.equal(what + " returns None when sync", torch.tensor(work is None), torch.tensor(True))
        return
    if isinstance(work, torch._C.Future):  # all_reduce_coalesced's async form
        work.wait()
        check.equal(what + " future done", torch.tensor(work.done()), torch.tensor(True))
        return
    if check.checks % 2 == 0:
        work.wait()
    else:
        fut = work.get_future()
        fut.wait()
    check.equal(what + " is_completed", torch.tensor(work.is_completed()), torch.tensor(True))


def op_matrix(group, rank, world, check, n=37):
    """Every c10d operation x dtype x reduce op, sync and async, on `group`
    where this process is `rank` of `world`."""
    for async_op in (False, True):
        a = f"async={async_op}"
        for dtype in DTYPES:
            d = str(dtype).replace("torch.", "")
            # all_reduce: contiguous and non-contiguous (a column of a matrix)
            for op in OPS:
                if not valid(op, dtype):
                    continue
                ins = [values(dtype, op, r, n) for r in range(world)]
                t = ins[rank].clone()
                w = dist.all_reduce(t, op=reduce_op(op, dtype), group=group, async_op=async_op)
                run_wait(w, async_op, check, f"all_reduce {op} {d} {a}")
                check.equal(f"all_reduce {op} {d} {a}", t, expected_reduce(op, dtype, ins))
                m = torch.zeros(n, 3, dtype=dtype)
                m[:, 1] = ins[rank]
                col = m[:, 1]
                w = dist.all_reduce(col, op=reduce_op(op, dtype), group=group, async_op=async_op)
                run_wait(w, async_op, check, f"all_reduce non-contiguous {op} {d}")
                check.equal(f"all_reduce non-contiguous {op} {d} {a}", m[:, 1], expected_reduce(op, dtype, ins))
                check.equal(f"all_reduce non-contiguous {op} {d} {a} neighbours", m[:, 0], torch.zeros(n, dtype=dtype))
                # reduce to every root
                root = (n + len(op)) % world
                t = ins[rank].clone()
                w = dist.reduce(t, dist.get_global_rank(group, root) if group is not None else root,
                                op=reduce_op(op, dtype), group=group, async_op=async_op)
                run_wait(w, async_op, check, f"reduce {op} {d}")
                if rank == root:
                    check.equal(f"reduce {op} {d} {a} root {root}", t, expected_reduce(op, dtype, ins))
                # reduce_scatter_tensor (out of place and in place) and reduce_scatter (list)
                if dtype != torch.bool:
                    full = [values(dtype, op, r, n * world, salt=3) for r in range(world)]
                    want = expected_reduce(op, dtype, full)[rank * n:(rank + 1) * n]
                    out = torch.empty(n, dtype=dtype)
                    w = dist.reduce_scatter_tensor(out, full[rank].clone(), op=reduce_op(op, dtype), group=group,
                                                   async_op=async_op)
                    run_wait(w, async_op, check, f"reduce_scatter_tensor {op} {d}")
                    check.equal(f"reduce_scatter_tensor {op} {d} {a}", out, want)
                    buf = full[rank].clone()
                    w = dist.reduce_scatter_tensor(buf[rank * n:(rank + 1) * n], buf, op=reduce_op(op, dtype),
                                                   group=group, async_op=async_op)
                    run_wait(w, async_op, check, f"reduce_scatter_tensor in place {op} {d}")
                    check.equal(f"reduce_scatter_tensor in place {op} {d} {a}", buf[rank * n:(rank + 1) * n], want)
                    out = torch.empty(n, dtype=dtype)
                    w = dist.reduce_scatter(out, list(full[rank].clone().chunk(world)), op=reduce_op(op, dtype),
                                            group=group, async_op=async_op)
                    run_wait(w, async_op, check, f"reduce_scatter {op} {d}")
                    check.equal(f"reduce_scatter {op} {d} {a}", out, want)
            mine = [values(dtype, "SUM", r, n, salt=r) for r in range(world)]
            # all_reduce_coalesced: several tensors, one call
            ts = [values(dtype, "SUM", rank, k) for k in (1, 5, n)]
            w = dist.all_reduce_coalesced(ts, group=group, async_op=async_op)
            run_wait(w, async_op, check, f"all_reduce_coalesced {d}")
            for k, t in zip((1, 5, n), ts):
                check.equal(f"all_reduce_coalesced {d} {a} [{k}]", t,
                            expected_reduce("SUM", dtype, [values(dtype, "SUM", r, k) for r in range(world)]))
            # broadcast from every root
            for root in range(world):
                t = mine[rank].clone()
                w = dist.broadcast(t, dist.get_global_rank(group, root) if group is not None else root,
                                   group=group, async_op=async_op)
                run_wait(w, async_op, check, f"broadcast {d}")
                check.equal(f"broadcast {d} {a} root {root}", t, mine[root])
            # all_gather (list), all_gather_into_tensor (out of place, in place)
            outs = [torch.empty(n, dtype=dtype) for _ in range(world)]
            w = dist.all_gather(outs, mine[rank], group=group, async_op=async_op)
            run_wait(w, async_op, check, f"all_gather {d}")
            for r in range(world):
                check.equal(f"all_gather {d} {a} from {r}", outs[r], mine[r])
            out = torch.empty(n * world, dtype=dtype)
            w = dist.all_gather_into_tensor(out, mine[rank], group=group, async_op=async_op)
            run_wait(w, async_op, check, f"all_gather_into_tensor {d}")
            check.equal(f"all_gather_into_tensor {d} {a}", out, torch.cat(mine))
            out = torch.zeros(n * world, dtype=dtype)
            out[rank * n:(rank + 1) * n] = mine[rank]
            w = dist.all_gather_into_tensor(out, out[rank * n:(rank + 1) * n], group=group, async_op=async_op)
            run_wait(w, async_op, check, f"all_gather_into_tensor in place {d}")
            check.equal(f"all_gather_into_tensor in place {d} {a}", out, torch.cat(mine))
            # coalesced: all_gather_into_tensor and reduce_scatter_tensor under
            # _coalescing_manager (one backend call each), all_gather_coalesced
            outs = [torch.empty(k * world, dtype=dtype) for k in (3, n)]
            ins = [values(dtype, "SUM", rank, k, salt=k) for k in (3, n)]
            rs_in = [values(dtype, "SUM", rank, k * world, salt=k) for k in (2, n)]
            rs_out = [torch.empty(k, dtype=dtype) for k in (2, n)]
            with dist._coalescing_manager(group=group, async_ops=async_op) as cm:
                for o, i in zip(outs, ins):
                    dist.all_gather_into_tensor(o, i, group=group)
            if async_op:
                cm.wait()
            if dtype != torch.bool:
                with dist._coalescing_manager(group=group, async_ops=async_op) as cm:
                    for o, i in zip(rs_out, rs_in):
                        dist.reduce_scatter_tensor(o, i, group=group)
                if async_op:
                    cm.wait()
            for k, o in zip((3, n), outs):
                check.equal(f"coalesced all_gather_into_tensor {d} {a} [{k}]", o,
                            torch.cat([values(dtype, "SUM", r, k, salt=k) for r in range(world)]))
            if dtype != torch.bool:
                for k, o in zip((2, n), rs_out):
                    full = [values(dtype, "SUM", r, k * world, salt=k) for r in range(world)]
                    check.equal(f"coalesced reduce_scatter_tensor {d} {a} [{k}]", o,
                                expected_reduce("SUM", dtype, full)[rank * k:(rank + 1) * k])
            lists = [[torch.empty(k, dtype=dtype) for _ in range(world)] for k in (3, n)]
            w = dist.all_gather_coalesced(lists, ins, group=group, async_op=async_op)
            if async_op:
                w.wait()
            for k, lst in zip((3, n), lists):
                for r in range(world):
                    check.equal(f"all_gather_coalesced {d} {a} [{k}] from {r}", lst[r],
                                values(dtype, "SUM", r, k, salt=k))
            # gather and scatter, every root
            for root in range(world):
                groot = dist.get_global_rank(group, root) if group is not None else root
                outs = [torch.empty(n, dtype=dtype) for _ in range(world)] if rank == root else None
                w = dist.gather(mine[rank], outs, dst=groot, group=group, async_op=async_op)
                run_wait(w, async_op, check, f"gather {d}")
                if rank == root:
                    for r in range(world):
                        check.equal(f"gather {d} {a} root {root} from {r}", outs[r], mine[r])
                out = torch.empty(n, dtype=dtype)
                w = dist.scatter(out, [m.clone() for m in mine] if rank == root else None, src=groot, group=group,
                                 async_op=async_op)
                run_wait(w, async_op, check, f"scatter {d}")
                check.equal(f"scatter {d} {a} root {root}", out, mine[rank])
            # all_to_all_single: equal and uneven splits (rank s sends s + d + 1 rows to d, some zero)
            send = torch.cat([values(dtype, "SUM", rank, n, salt=10 * d2) for d2 in range(world)])
            out = torch.empty(n * world, dtype=dtype)
            w = dist.all_to_all_single(out, send, group=group, async_op=async_op)
            run_wait(w, async_op, check, f"all_to_all_single {d}")
            check.equal(f"all_to_all_single {d} {a}", out,
                        torch.cat([values(dtype, "SUM", s, n, salt=10 * rank) for s in range(world)]))

            def rows(s, d2):
                return 0 if (s + d2) % 3 == 2 else s + d2 + 1

            send = torch.cat([values(dtype, "SUM", rank, rows(rank, d2) * 2, salt=d2).view(-1, 2)
                              for d2 in range(world)])
            want = torch.cat([values(dtype, "SUM", s, rows(s, rank) * 2, salt=rank).view(-1, 2)
                              for s in range(world)])
            out = torch.empty_like(want)
            w = dist.all_to_all_single(out, send, output_split_sizes=[rows(s, rank) for s in range(world)],
                                       input_split_sizes=[rows(rank, d2) for d2 in range(world)], group=group,
                                       async_op=async_op)
            run_wait(w, async_op, check, f"all_to_all_single uneven {d}")
            check.equal(f"all_to_all_single uneven {d} {a}", out, want)
            # all_to_all (lists, uneven)
            outs = [torch.empty(rows(s, rank), dtype=dtype) for s in range(world)]
            w = dist.all_to_all(outs, [values(dtype, "SUM", rank, rows(rank, d2), salt=d2) for d2 in range(world)],
                                group=group, async_op=async_op)
            run_wait(w, async_op, check, f"all_to_all {d}")
            for s in range(world):
                check.equal(f"all_to_all {d} {a} from {s}", outs[s], values(dtype, "SUM", s, rows(s, rank), salt=rank))
            # send / recv around a ring (isend/irecv when async)
            if world > 1:
                nxt, prv = (rank + 1) % world, (rank - 1) % world
                gn = dist.get_global_rank(group, nxt) if group is not None else nxt
                gp = dist.get_global_rank(group, prv) if group is not None else prv
                got = torch.empty(n, dtype=dtype)
                if async_op:
                    ws = [dist.isend(mine[rank], gn, group=group), dist.irecv(got, gp, group=group)]
                    for w in ws:
                        w.wait()
                elif rank % 2 == 0:
                    dist.send(mine[rank], gn, group=group)
                    dist.recv(got, gp, group=group)
                else:
                    dist.recv(got, gp, group=group)
                    dist.send(mine[rank], gn, group=group)
                check.equal(f"send/recv {d} {a}", got, mine[prv])
                # recv from any source: group rank 0 collects one message from every other rank
                if rank == 0:
                    seen = []
                    for _ in range(world - 1):
                        got = torch.empty(n, dtype=dtype)
                        if async_op:
                            w = dist.irecv(got, group=group)  # no src: from any rank
                            w.wait()
                            src = w._source_rank()  # the group rank
                        else:
                            g = dist.recv(got, group=group)  # returns the global rank
                            src = dist.get_group_rank(group, g) if group is not None else g
                        seen.append(src)
                        check.equal(f"recv from any source {d} {a} (rank {src})", got,
                                    mine[src] if 0 < src < world else torch.full_like(got, -1))
                    check.equal(f"recv from any source {d} {a}: senders", torch.tensor(sorted(seen)),
                                torch.arange(1, world))
                else:
                    dist.send(mine[rank], dist.get_global_rank(group, 0) if group is not None else 0, group=group)
        w = dist.barrier(group=group, async_op=async_op)
        if async_op:
            w.wait()


def ops(args):
    rank, world = init()
    results = {}
    check = Checker(f"rank {rank}/{world} default group")
    op_matrix(None, rank, world, check)
    results["default"] = [check.checks, check.failures]
    # A subgroup of ranks 1..world-1 (rank 0 alone at world 1): its own communicator.
    members = list(range(1, world)) if world > 1 else [0]
    group = dist.new_group(members)
    if rank in members:
        check = Checker(f"rank {rank}/{world} group {members}")
        op_matrix(group, members.index(rank), len(members), check)
        results["subgroup"] = [check.checks, check.failures]
    monitored_barrier(30)
    dist.destroy_process_group()
    return results


def split(args):
    """dist.split_group on the weft backend (weftCommSplit): two children by
    parity, then one of the last rank and rank 0 in that order (the others are
    not members); each child's ranks, size and all-reduces and broadcasts checked."""
    rank, world = init()
    out = {"checks": 0, "failures": []}

    def check(group, members):
        me = members.index(rank)
        if dist.get_rank(group) != me or dist.get_world_size(group) != len(members):
            out["failures"].append(f"rank {rank}: group {members}: rank {dist.get_rank(group)} of "
                                   f"{dist.get_world_size(group)}, not {me} of {len(members)}")
        for round in range(3):
            t = torch.full((1000,), float(rank + 1 + round))
            dist.all_reduce(t, group=group)
            want = float(sum(r + 1 + round for r in members))
            out["checks"] += 1
            if not torch.equal(t, torch.full((1000,), want)):
                out["failures"].append(f"rank {rank}: group {members}: all_reduce gave {t[0].item()}, not {want}")
            b = torch.full((7,), float(rank if me == 0 else -1), dtype=torch.float64)
            dist.broadcast(b, group_src=0, group=group)
            out["checks"] += 1
            if not torch.equal(b, torch.full((7,), float(members[0]), dtype=torch.float64)):
                out["failures"].append(f"rank {rank}: group {members}: broadcast gave {b[0].item()}")

    halves = [list(range(0, world, 2)), list(range(1, world, 2))] if world > 1 else [[0]]
    mine = next(h for h in halves if rank in h)
    group = dist.split_group(split_ranks=halves)
    check(group, mine)
    pair = [world - 1, 0] if world > 1 else [0]
    other = dist.split_group(split_ranks=[pair])
    if rank in pair:
        check(other, pair)
    elif other is not dist.GroupMember.NON_GROUP_MEMBER:
        out["failures"].append(f"rank {rank}: not in {pair} but got a group")
    dist.barrier()
    dist.destroy_process_group()
    return out


def fp8(args):
    """float8_e4m3fn / float8_e5m2 (NCCL's fp8 types): sums whose every partial is
    exact in the type (E4M3: eighths, E5M2: quarters, up to 4 ranks), max of small
    integers, all_gather and broadcast of every code. Compared as bytes: torch has
    no equality for float8 on the CPU."""
    rank, world = init()
    check = Checker(f"rank {rank}/{world} fp8")
    n = 41
    i = torch.arange(n, dtype=torch.int64)

    def same(what, got, want):
        check.equal(what, got.view(torch.uint8), want.view(torch.uint8))

    for dtype, unit, period in ((torch.float8_e4m3fn, 8.0, 4), (torch.float8_e5m2, 4.0, 2)):
        d = str(dtype).replace("torch.", "")
        ins = [(((i + r) % period + 1).double() / unit) for r in range(world)]
        t = ins[rank].to(dtype)
        dist.all_reduce(t)
        same(f"all_reduce SUM {d}", t, sum(ins).to(dtype))
        ins = [((i * 5 + r * 3) % 11 - 5).double() for r in range(world)]
        t = ins[rank].to(dtype)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        same(f"all_reduce MAX {d}", t, functools.reduce(torch.maximum, ins).to(dtype))
        codes = [((i * 7 + r * 13) % 256).to(torch.uint8).view(dtype) for r in range(world)]
        out = torch.empty(n * world, dtype=dtype)
        dist.all_gather_into_tensor(out, codes[rank])
        same(f"all_gather_into_tensor {d}", out, torch.cat(codes))
        t = codes[rank].clone()
        dist.broadcast(t, world - 1)
        same(f"broadcast {d}", t, codes[world - 1])
    dist.destroy_process_group()
    return [check.checks, check.failures]


def future_value(args):
    """The future of an async all_reduce holds the output tensors (as DDP's reducer reads them)."""
    rank, world = init()
    t = torch.full((4,), float(rank + 1))
    fut = dist.all_reduce(t, async_op=True).get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    value = fut.wait()
    doubled = chained.wait()
    dist.destroy_process_group()
    return {"value": value[0].tolist(), "same_tensor": value[0].data_ptr() == t.data_ptr(),
            "chained": doubled.tolist()}


def callback_chains(args):
    """The PowerSGD hook's pattern, many times over: a future's callback posts
    the next all_reduce and waits for it, with several chains in flight at once.
    Each callback must run on a thread that does not also complete works. Every
    chain has a process group of its own: callbacks of different chains run
    concurrently, so their collectives on one group would be posted in a
    different order on each rank."""
    rank, world = init(timeout_s=60)
    total = world * (world + 1) // 2  # sum of rank + 1
    groups = [dist.new_group(list(range(world))) for _ in range(args["chains"])]

    def second(group):
        def run(f):
            u = f.value()[0] * 2
            return dist.all_reduce(u, group=group, async_op=True).get_future().wait()[0]
        return run

    # The callback is attached at a varying time after the post: before, while
    # and after the group's completer thread finishes the work.
    jitter = random.Random(rank)
    wrong = []
    for i in range(args["iterations"]):
        chains = []
        for c, group in enumerate(groups):
            t = torch.full((1 + c,), float(rank + 1))
            work = dist.all_reduce(t, group=group, async_op=True)
            until = time.perf_counter() + jitter.uniform(0, 150e-6)
            while time.perf_counter() < until:
                pass
            chains.append(work.get_future().then(second(group)))
        for c, fut in enumerate(chains):
            got = fut.wait()
            if got.tolist() != [float(2 * total * world)] * (1 + c):
                wrong.append(f"iteration {i} chain {c}: {got.tolist()}")
    dist.destroy_process_group()
    return wrong[:5]


def monitored_barrier_missing(args):
    """Rank `args` never arrives: rank 0's monitored_barrier names it."""
    rank, world = init(timeout_s=20)
    if rank == args:
        time.sleep(6)
        return "skipped the barrier"
    try:
        monitored_barrier(2, wait_all_ranks=True)
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    return "no error"


def fault_during_allreduce(args):
    """Rank `args["victim"]` sends itself args["signal"] (KILL: it dies; STOP: a
    hung process) in the middle of all-reduces; the others must raise."""
    import signal
    rank, world = init(timeout_s=args["timeout"])
    t = torch.ones(1 << 16)
    start = time.monotonic()
    try:
        for i in range(100_000):
            if rank == args["victim"] and i == 20:
                os.kill(os.getpid(), getattr(signal, "SIG" + args["signal"]))
            dist.all_reduce(t)
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}", "seconds": time.monotonic() - start}
    return {"error": None, "seconds": time.monotonic() - start}


def store_barrier(name, world, timeout_s=30):
    """Waits through the c10d store until every rank got here. A rank whose
    collective failed stays alive until the others have their own error: rank 0
    hosts weft's bootstrap root, and its exit would turn a slower rank's error
    into "lost connection to the bootstrap root" (issue 20's single point of
    failure, not what these tests check). Rank 0 also hosts the store, so it
    leaves last: the others make no store call after announcing they leave."""
    store = dist.distributed_c10d._get_default_store()

    def wait_for(key):
        deadline = time.monotonic() + timeout_s
        while store.add(key, 0) < world and time.monotonic() < deadline:
            time.sleep(0.01)

    store.add(name + "/in", 1)
    wait_for(name + "/in")
    store.add(name + "/out", 1)
    if dist.get_rank() == 0:
        wait_for(name + "/out")


def size_mismatch(args):
    """Ranks pass all_reduce tensors of different lengths: an error, not wrong data or a hang."""
    rank, world = init(timeout_s=20)
    t = torch.ones(100 + rank)
    try:
        dist.all_reduce(t)
        result = "no error"
    except Exception as e:  # noqa: BLE001
        result = f"{type(e).__name__}: {e}"
    store_barrier("size_mismatch_done", world)
    return result


HOOKS = ["none", "allreduce", "fp16_compress", "bf16_compress", "powerSGD"]


def _model(kind):
    torch.manual_seed(0)
    if kind == "mlp":
        return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64),
                                   torch.nn.GELU(), torch.nn.Linear(64, 8))
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=128, n_positions=32, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(cfg)


def _register(ddp, hook, group):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    if hook == "allreduce":
        ddp.register_comm_hook(group, default_hooks.allreduce_hook)
    elif hook == "fp16_compress":
        ddp.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif hook == "bf16_compress":
        ddp.register_comm_hook(group, default_hooks.bf16_compress_hook)
    elif hook == "powerSGD":
        state = powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=1,
                                            start_powerSGD_iter=3, min_compression_rate=0.5,
                                            use_error_feedback=True, warm_start=True)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def ddp_train(args):
    """Trains each model under DistributedDataParallel with each comm hook for
    args["steps"] steps from one seed; saves the final parameters to
    args["out"]/<backend>-<model>-<hook>.pt (rank 0)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank, world = init()
    backend = os.environ["WEFT_TEST_BACKEND"]
    for kind in args["models"]:
        for hook in args["hooks"]:
            model = _model(kind)
            # Small buckets, several per step, except for PowerSGD: its hook
            # issues all-reduces from future callbacks on another thread, which
            # race with the next bucket's hook across ranks (gloo times out
            # there just the same), so it gets one bucket.
            ddp = DDP(model, bucket_cap_mb=25 if hook == "powerSGD" else 0.05)
            _register(ddp, hook, None)
            opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
            gen = torch.Generator().manual_seed(100 + rank)
            for _ in range(args["steps"]):
                opt.zero_grad()
                if kind == "mlp":
                    x = torch.randn(16, 32, generator=gen)
                    loss = ddp(x).square().mean()
                else:
                    ids = torch.randint(0, 128, (4, 32), generator=gen)
                    loss = ddp(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
            if rank == 0:
                torch.save({k: v.detach().clone() for k, v in model.state_dict().items()},
                           os.path.join(args["out"], f"{backend}-{kind}-{hook}.pt"))
    dist.destroy_process_group()
    return "ok"
