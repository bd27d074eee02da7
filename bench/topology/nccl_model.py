#!/usr/bin/env python3
"""NCCL's analytic all-reduce cost model (Ring and Tree, protocols LL/LL128/Simple),
evaluated for a given topology so that weft-sim's predictions can be set beside it.

The model is the one NCCL uses to pick an algorithm and protocol per call:
ncclTopoTuneModel (latency and bandwidth per algorithm x protocol, once per
communicator) and ncclTopoGetAlgoTime (time = latency + bytes / (1000 * bw) us),
both in src/graph/tuning.cc of NVIDIA/nccl, tag v2.30.7-1. It is re-expressed here,
not copied; see bench/topology/nccl-model.md for what it covers and what it assumes.

usage: nccl_model.py [--nodes 16] [--gpus-per-node 8] [--arch ampere] [--cpu amd]
                     [--channels 8] [--bw-inter 24] [--bw-intra BW] [--comm-channels N]
                     [--intra nvlink|pci] [--tree-pattern balanced|split|tree]
                     [--no-ll128] [--net-latency US] [-b 8] [-e 4G] [-f 2] [--csv FILE]
"""
import argparse
import csv
import sys

# =====================================================================================
# Constants. Every value comes from NVIDIA/nccl at tag v2.30.7-1
# (commit 73cf112295c33aee2b895f329f592f2a9b4b0f97); "tuning.cc" is src/graph/tuning.cc.
# Index order as in NCCL: protocols (LL, LL128, Simple); architectures
# (Volta, Ampere, Hopper, Blackwell) = NCCL_{VOLTA,AMPERE,HOPPER,BLACKWELL}_COMPCAP_IDX;
# node-count column (1 node, 2 nodes, >2 nodes) = index2 in ncclTopoTuneModel.
# =====================================================================================
NCCL_SOURCE = "NVIDIA/nccl v2.30.7-1 (73cf112295c3), src/graph/tuning.cc"
PROTOS = ("LL", "LL128", "Simple")
ARCHS = ("volta", "ampere", "hopper", "blackwell")
ARCH_CC = {"volta": 70, "ampere": 80, "hopper": 90, "blackwell": 100}  # minCompCap used below

# Fixed latency per call, us.  tuning.cc, ncclTunerConstantsDefaults.baseLatencies
# (rows Tree, Ring).
BASE_LAT = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}

# Latency per step, us, by link kind.  tuning.cc, ncclTunerConstantsDefaults.hwLatencies
# (blocks NVLINK / PCI / NET = NCCL_HW_NVLINK / NCCL_HW_PCI / NCCL_HW_NET, rows Tree, Ring).
HW_LAT = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}

# Cap on LL bus bandwidth, GB/s.  tuning.cc, ncclTunerConstantsDefaults.llMaxBws.
# Row = architecture on one node; on several nodes row 0 (Intel/other CPU) or
# row 1 (AMD CPU) -- the row is picked by CPU vendor, not GPU, when nNodes > 1.
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))

# Per-channel caps, GB/s, [arch][node column].  tuning.cc, ncclTunerConstantsDefaults:
PER_CH_MAX_RING_LL128_BW = (  # .perChMaxRingLL128Bws
    (20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0))
PER_CH_MAX_TREE_LL128_BW = (  # .perChMaxTreeLL128Bws
    (20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
PER_CH_MAX_TREE_BW = (  # .perChMaxTreeBws
    (26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))

# Bandwidth factors written inline in ncclTopoTuneModel (tuning.cc):
RING_LL_FACTOR = 0.5               # Ring/LL: half the data are flags
RING_LL128_FACTOR = 0.92           # Ring/LL128 (NCCL's comment: ~120/128)
TREE_ALLREDUCE_FACTOR = 0.92       # Tree all-reduce, every protocol, before the caps below
TREE_LL_FACTOR = 1.0 / 3.8         # Tree/LL
TREE_LL128_FACTOR_1NODE = 7.0 / 9.0
TREE_LL128_FACTOR_NODES = 120.0 / 128.0
TREE_PATTERN_TREE_FACTOR = 0.85    # when the tree graph fell back to NCCL_TOPO_PATTERN_TREE
TREE_ALGBW_RATIO = 0.5             # tree busBw -> algbw (ring uses nRanks / nsteps)

# Extra per-step cost of network posts, us.  tuning.cc, getNetOverhead(): Intel 1.0,
# AMD 2.0, anything else 1.0; Simple pays it 3 times (ncclTopoTuneModel).
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "other": 1.0}
NET_OVERHEAD_SIMPLE_MULT = 3.0

# Ring/Simple all-reduce across nodes: latency x1.9 (compCap < 80) or x1.4 once
# bytes / (comm->nChannels * nRanks) >= 64.  tuning.cc, ncclTopoGetAlgoTime ("Plateau").
RING_PLATEAU = (1.9, 1.4)
RING_PLATEAU_BYTES = 64

# Tree all-reduce bandwidth multiplier by log2(bytes >> 6), used for indices 0..22
# (64 B .. 512 MiB - 1).  tuning.cc, treeCorrectionFactor[NCCL_NUM_PROTOCOLS][24].
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)
TREE_CORRECTION_USED = 23  # ncclTopoGetAlgoTime applies it for 0 <= logSize < 23

# Channel bookkeeping (used only for the ring plateau threshold): src/graph/connect.cc,
# ncclTopoPostset doubles the search's channels (min(MAXCHANNELS, 2n)) and doubles again on
# Hopper+ across nodes when the ring graph's bwIntra > 45 and fewer than 16 channels.
MAXCHANNELS = 64  # src/include/device.h

# Defaults: DGX-A100-like node, derived from the search (src/graph/search.cc, topo.cc):
# NIC HDR 200 Gb/s -> 200000/8000 = 25 GB/s; GPU<->NIC over PCIe Gen4 x16 -> 16*120/80 = 24
# GB/s; the first speedArrayInter entry <= 24 is 24; one 24 GB/s ring channel per NIC -> 8
# channels; ncclTopoDupChannels skips (bwIntra < 25); tree graph forced to the same 8.
DEFAULTS = dict(nodes=16, gpus_per_node=8, arch="ampere", cpu="amd", channels=8, bw_inter=24.0)


def log2_floor(n):
    return n.bit_length() - 1  # -1 for 0, as NCCL's log2i


class Topo:
    def __init__(self, a):
        self.nodes, self.ppn = a.nodes, a.gpus_per_node
        self.nranks = self.nodes * self.ppn
        self.arch, self.cc = a.arch, ARCH_CC[a.arch]
        self.cpu = a.cpu
        self.channels = a.channels
        self.bw_inter = a.bw_inter
        self.bw_intra = a.bw_intra if a.bw_intra is not None else a.bw_inter
        self.intra = a.intra
        self.tree_pattern = a.tree_pattern
        self.ll128 = not a.no_ll128
        self.net_latency = a.net_latency
        if a.comm_channels is not None:
            self.comm_channels = a.comm_channels
        else:
            c = min(MAXCHANNELS, 2 * self.channels)
            if self.cc >= 90 and self.nodes > 1 and self.bw_intra > 45.0 and c < 16:
                c = 2 * c
            self.comm_channels = c


def tune_model(t):
    """Per (algorithm, protocol): (latency us, algorithm bandwidth GB/s), as
    ncclTopoTuneModel fills comm->latencies / comm->bandwidths for AllReduce."""
    arch_i = ARCHS.index(t.arch)
    col = min(t.nodes, 3) - 1
    if t.nodes == 1:
        ll_row = arch_i
    else:
        ll_row = 1 if t.cpu == "amd" else 0
    ll_max = LL_MAX_BW[ll_row][col]
    nsteps = 2 * (t.nranks - 1)
    intra_hw = t.intra  # graph typeIntra NVL -> NVLINK latencies, else PCI
    model = {}
    for algo in ("ring", "tree"):
        for p, proto in enumerate(PROTOS):
            bw = t.bw_intra if t.nodes <= 2 else t.bw_inter
            bus = t.channels * bw
            if algo == "ring":
                if proto == "LL":
                    bus = min(ll_max, bus * RING_LL_FACTOR)
                elif proto == "LL128":
                    bus = min(bus * RING_LL128_FACTOR, t.channels * PER_CH_MAX_RING_LL128_BW[arch_i][col])
            else:
                bus = min(bus * TREE_ALLREDUCE_FACTOR, t.channels * PER_CH_MAX_TREE_BW[arch_i][col])
                if proto == "LL":
                    bus = min(bus * TREE_LL_FACTOR, ll_max)
                elif proto == "LL128":
                    f = TREE_LL128_FACTOR_1NODE if t.nodes == 1 else TREE_LL128_FACTOR_NODES
                    bus = min(bus * f, t.channels * PER_CH_MAX_TREE_LL128_BW[arch_i][col])
                if t.tree_pattern == "tree":
                    bus *= TREE_PATTERN_TREE_FACTOR
            algbw = bus * (t.nranks / nsteps if algo == "ring" else TREE_ALGBW_RATIO)

            lat = BASE_LAT[algo][p]
            intra_lat = HW_LAT[intra_hw][algo][p]
            # one GPU per node: the network latency of Tree is used for both algorithms
            inter_lat = HW_LAT["net"]["tree" if t.ppn == 1 else algo][p] + t.net_latency
            if proto == "Simple":
                inter_lat += t.net_latency  # flush
            if algo == "ring":
                overhead = 0.0
                if t.nodes > 1:
                    overhead = NET_OVERHEAD_US.get(t.cpu, 1.0)
                    if proto == "Simple":
                        overhead *= NET_OVERHEAD_SIMPLE_MULT
                intra_lat = max(intra_lat, overhead)
                inter_steps = 0 if t.nodes == 1 else 2 * (t.nodes - 1)
                lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat
            else:
                lat += 2 * ((t.ppn - 1) * intra_lat + log2_floor(t.nodes) * inter_lat)

            enabled = not (proto == "LL128" and not t.ll128)
            model[(algo, proto)] = (lat, algbw if enabled else 0.0)
    return model


def algo_time_us(t, model, algo, proto, nbytes):
    """ncclTopoGetAlgoTime for one AllReduce call (numPipeOps = 1); None if disabled."""
    lat, bw = model[(algo, proto)]
    if bw <= 0:
        return None
    p = PROTOS.index(proto)
    if algo == "tree":
        log_size = log2_floor(nbytes >> 6)
        if 0 <= log_size < TREE_CORRECTION_USED:
            bw *= TREE_CORRECTION[p][log_size]
    if algo == "ring" and proto == "Simple" and t.nodes > 1 and \
            nbytes // (t.comm_channels * t.nranks) >= RING_PLATEAU_BYTES:
        lat *= RING_PLATEAU[0] if t.cc < 80 else RING_PLATEAU[1]
    return lat + nbytes / (1000.0 * bw)


def busbw_gbps(t, nbytes, us):
    """nccl-tests' all-reduce bus bandwidth: bytes/time * 2(n-1)/n, in 1e9 B/s."""
    return nbytes / (us * 1e-6) / 1e9 * 2 * (t.nranks - 1) / t.nranks


def best(t, model, algo, nbytes):
    cands = [(algo_time_us(t, model, algo, p, nbytes), p) for p in PROTOS]
    cands = [c for c in cands if c[0] is not None]
    return min(cands) if cands else (None, None)


def pick(t, model, nbytes):
    r, rp = best(t, model, "ring", nbytes)
    tr, tp = best(t, model, "tree", nbytes)
    return ("ring", rp, r) if tr is None or (r is not None and r <= tr) else ("tree", tp, tr)


def fmt_size(n):
    for unit, s in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= unit:
            v = n / unit
            return f"{v:g} {s}" if v < 1000 else f"{v:.4g} {s}"
    return f"{n} B"


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    if s and s[-1].upper() in mult:
        return int(float(s[:-1]) * mult[s[-1].upper()])
    return int(float(s))


def crossover_bytes(t, model, lo, hi):
    """Smallest byte count in (lo, hi] whose pick differs from lo's. The model's pieces
    change only at powers of two (tree correction) and at the ring plateau threshold, so
    the first differing power of two is found first, then the byte by bisection."""
    first = pick(t, model, lo)[0]
    q = 1 << lo.bit_length()  # next power of two above lo
    while q < hi and pick(t, model, q)[0] == first:
        lo, q = q, q << 1
    hi = min(hi, q)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pick(t, model, mid)[0] == first:
            lo = mid
        else:
            hi = mid
    return hi


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=DEFAULTS["nodes"])
    ap.add_argument("--gpus-per-node", type=int, default=DEFAULTS["gpus_per_node"])
    ap.add_argument("--arch", choices=ARCHS, default=DEFAULTS["arch"],
                    help="GPU class NCCL's tables index by (minCompCap 70/80/90/100)")
    ap.add_argument("--cpu", choices=("intel", "amd", "other"), default=DEFAULTS["cpu"],
                    help="CPU vendor: picks the multi-node LL cap row and the net overhead")
    ap.add_argument("--channels", type=int, default=DEFAULTS["channels"],
                    help="channels of the ring/tree search graph (graph->nChannels)")
    ap.add_argument("--bw-inter", type=float, default=DEFAULTS["bw_inter"],
                    help="per-channel graph bandwidth across nodes, GB/s (graph->bwInter)")
    ap.add_argument("--bw-intra", type=float, default=None,
                    help="per-channel graph bandwidth within a node, GB/s (graph->bwIntra; "
                         "used only with <= 2 nodes; default = --bw-inter)")
    ap.add_argument("--comm-channels", type=int, default=None,
                    help="comm->nChannels after setup (ring plateau only; default derived)")
    ap.add_argument("--intra", choices=("nvlink", "pci"), default="nvlink",
                    help="intra-node link kind of the graph (latency table block)")
    ap.add_argument("--tree-pattern", choices=("balanced", "split", "tree"), default="balanced",
                    help="tree graph pattern; 'tree' applies NCCL's 0.85 penalty")
    ap.add_argument("--no-ll128", action="store_true", help="LL128 disabled (bandwidth 0)")
    ap.add_argument("--net-latency", type=float, default=0.0,
                    help="graph->latencyInter, us (NCCL's IB and socket transports report 0)")
    ap.add_argument("-b", default="8", help="smallest size, bytes (K/M/G suffixes)")
    ap.add_argument("-e", default="4G", help="largest size")
    ap.add_argument("-f", type=int, default=2, help="size factor")
    ap.add_argument("--csv", metavar="FILE", help="write size,algorithm,protocol,us,busbw_GBps rows")
    a = ap.parse_args()
    if a.nodes < 1 or a.gpus_per_node < 1 or a.nodes * a.gpus_per_node < 2:
        sys.exit("need at least 2 ranks")
    if a.channels < 1 or a.bw_inter <= 0 or a.f < 2:
        sys.exit("--channels, --bw-inter must be positive, -f at least 2")

    t = Topo(a)
    model = tune_model(t)
    sizes = []
    n, end = parse_size(a.b), parse_size(a.e)
    while n <= end:
        sizes.append(n)
        n *= a.f

    combos = [(al, p) for al in ("ring", "tree") for p in PROTOS]
    print(f"# NCCL all-reduce model ({NCCL_SOURCE})")
    print(f"# {t.nodes} nodes x {t.ppn} GPUs = {t.nranks} ranks; arch {t.arch} (cc {t.cc}), cpu {t.cpu}; "
          f"graph {t.channels} ch x {t.bw_inter:g} GB/s inter / {t.bw_intra:g} GB/s intra ({t.intra}); "
          f"comm channels {t.comm_channels}; tree pattern {t.tree_pattern}; "
          f"LL128 {'on' if t.ll128 else 'off'}")
    print("# per algorithm/protocol: latency us / algbw GB/s / busbw GB/s (bandwidth term only)")
    to_bus = 2 * (t.nranks - 1) / t.nranks
    for al, p in combos:
        lat, bw = model[(al, p)]
        if bw <= 0:
            print(f"#   {al:4s} {p:6s} disabled")
            continue
        print(f"#   {al:4s} {p:6s} {lat:8.1f} us  {bw:7.2f} algbw  {bw * to_bus:7.2f} busbw")
    print()

    rows = []
    print("# time, us")
    print(f"{'size':>9s} " + " ".join(f"{al + '/' + p:>11s}" for al, p in combos) +
          f" {'ring best':>11s} {'tree best':>11s} {'pick':>12s}")
    busbw_lines = []
    for n in sizes:
        us = {}
        for al, p in combos:
            v = algo_time_us(t, model, al, p, n)
            us[(al, p)] = v
            if v is not None:
                rows.append((n, al, p, v, busbw_gbps(t, n, v)))
        rb, rp = best(t, model, "ring", n)
        tb, tp = best(t, model, "tree", n)
        pa, pp, _ = pick(t, model, n)
        cell = lambda v: f"{v:11.1f}" if v is not None else f"{'-':>11s}"
        bcell = lambda v: f"{busbw_gbps(t, n, v):11.3f}" if v is not None else f"{'-':>11s}"
        print(f"{fmt_size(n):>9s} " + " ".join(cell(us[c]) for c in combos) +
              f" {rp:>11s} {tp:>11s} {pa + '/' + pp:>12s}")
        busbw_lines.append(f"{fmt_size(n):>9s} " + " ".join(bcell(us[c]) for c in combos) +
                           f" {rp:>11s} {tp:>11s} {bcell(rb)} {bcell(tb)}")
    print()
    print("# busbw, GB/s (nccl-tests convention: bytes/time * 2(n-1)/n)")
    print(f"{'size':>9s} " + " ".join(f"{al + '/' + p:>11s}" for al, p in combos) +
          f" {'ring best':>11s} {'tree best':>11s} {'ring busbw':>11s} {'tree busbw':>11s}")
    for line in busbw_lines:
        print(line)
    print()

    # Where the cheaper of ring and tree changes, on the grid and to the byte.
    print("# ring/tree crossover (best protocol of each)")
    changes = 0
    for lo, hi in zip(sizes, sizes[1:]):
        a0, p0, _ = pick(t, model, lo)
        a1, p1, _ = pick(t, model, hi)
        if a0 != a1:
            changes += 1
            x = crossover_bytes(t, model, lo, hi)
            print(f"crossover: {a0}/{p0} at {fmt_size(lo)} -> {a1}/{p1} at {fmt_size(hi)}; "
                  f"{a1} is cheaper from {x} B ({fmt_size(x)})")
    if not changes:
        print(f"crossover: none in {fmt_size(sizes[0])} .. {fmt_size(sizes[-1])}; "
              f"{pick(t, model, sizes[0])[0]} throughout")
    for al in ("ring", "tree"):
        seq = []
        for n in sizes:
            p = best(t, model, al, n)[1]
            if not seq or seq[-1][0] != p:
                seq.append((p, n))
        print(f"{al} protocols: " + ", ".join(f"{p} from {fmt_size(n)}" for p, n in seq))

    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["size", "algorithm", "protocol", "us", "busbw_GBps"])
            for n, al, p, v, bb in rows:
                w.writerow([n, al, p, f"{v:.4f}", f"{bb:.4f}"])
        print(f"# wrote {len(rows)} rows to {a.csv}")


if __name__ == "__main__":
    main()
