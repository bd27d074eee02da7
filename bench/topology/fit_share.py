#!/usr/bin/env python3
"""Fits the simulator's cores share (weft-sim --cpu-share: the part of a message's
alpha its sender and its receiver each spend on a core where ranks outnumber
cores) to one measured time: the share in [0, 1] for which weft-sim predicts that
time for ALGO at BYTES on the given layout, found by bisection (the prediction grows
with the share where the cores are the bottleneck). Prints the share with 3 digits.

bench/topology/run calls it with a 1 KiB ring timed on the same namespace hosts
before the benchmark proper: the kernel's cost per message differs from VM to VM
(2x between two 2-core EPYC VMs), and the tables start at 4 KiB, so the point the
share is fitted to is not one the benchmark scores.

usage: fit_share.py MEASURED_US --sim PATH [--algo ring] [--bytes 1024] -- WEFT-SIM ARGS...
"""
import argparse
import subprocess
import sys
import tempfile

from compare import read_sim_csv


def predicted_us(sim, algo, nbytes, share, extra):
    with tempfile.NamedTemporaryFile(suffix=".csv") as out:
        subprocess.run([sim, "--algo", algo, "-b", str(nbytes), "-e", str(nbytes), "--cpu-share", "%.6f" % share,
                        "--csv", out.name] + extra, check=True, stdout=subprocess.DEVNULL, timeout=120)
        pred, _ = read_sim_csv(out.name)
    if (nbytes, algo) not in pred:
        sys.exit(f"fit_share: weft-sim gave no {algo} row")
    return pred[(nbytes, algo)]


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measured_us", type=float)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--algo", default="ring")
    ap.add_argument("--bytes", type=int, default=1024)
    a = ap.parse_args(argv)
    lo, hi = 0.0, 1.0
    if predicted_us(a.sim, a.algo, a.bytes, hi, extra) <= a.measured_us:
        print("1")
        return
    for _ in range(14):
        mid = (lo + hi) / 2
        if predicted_us(a.sim, a.algo, a.bytes, mid, extra) < a.measured_us:
            lo = mid
        else:
            hi = mid
    print("%.3g" % ((lo + hi) / 2))


if __name__ == "__main__":
    main()
