#!/usr/bin/env python3
"""Fault campaign: random jobs struck by random faults, and every survivor must
say who is at fault.

Each trial starts `weft-run -n N weft-fault-worker SEED PIDDIR` (N from 2 to 8 on
this host; every rank runs the same random, verified collectives), waits until
every rank is up, sleeps a random moment, then strikes one rank:

  kill   SIGKILL (a crashed process)
  stop   SIGSTOP (a hung process; killed once the trial is judged)

A trial passes when every surviving rank returned an error that names the
struck rank, within WEFT_TIMEOUT_MS + 1 s of the fault; no rank reported wrong
data; weft-run exited non-zero and named the struck rank; and nothing is left:
no process of the job, no shared-memory segment it made. The kinds take turns,
and every fourth pair of trials strikes rank 0, whose process runs the bootstrap
root.

    campaign.py --weft-run PATH --worker PATH [--seed S] [--trials T]
                [--kinds kill,stop] [--timeout-ms MS] [--json FILE]

Prints one line per trial and a summary per fault kind; exits 1 if any trial
failed.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FAULT_LINE = re.compile(r"^FAULT rank=(-?\d+) at_ms=(\d+) : (.*)$")


def shm_segments():
    return {f for f in os.listdir("/dev/shm") if f.startswith("weft-")}


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_trial(args, trial, rng):
    n = rng.randint(2, 8)
    victim = 0 if trial // 2 % 4 == 3 else rng.randrange(n)
    kind = args.kinds[trial % len(args.kinds)]
    delay = rng.uniform(0.2, 1.5)
    seed = rng.randrange(1 << 30)
    piddir = tempfile.mkdtemp(prefix="weft-faults-")
    log = os.path.join(piddir, "log")
    shm_before = shm_segments()
    env = dict(os.environ, WEFT_TIMEOUT_MS=str(args.timeout_ms))
    problems = []
    fault_at = None
    pids = {}
    with open(log, "w") as out:
        # Its own session, so that whatever is left can be killed as one group.
        proc = subprocess.Popen([args.weft_run, "-n", str(n), "--timeout", "60", "--", args.worker, str(seed),
                                 piddir, "60"], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            up_by = time.time() + 30
            while time.time() < up_by and proc.poll() is None:
                pids = {}
                for r in range(n):
                    try:
                        with open(os.path.join(piddir, str(r))) as f:
                            pids[r] = int(f.read().strip())
                    except (OSError, ValueError):
                        pass
                if len(pids) == n:
                    break
                time.sleep(0.02)
            if len(pids) != n:
                problems.append("the job did not start (%d of %d ranks up)" % (len(pids), n))
            else:
                time.sleep(delay)
                fault_at = time.time()
                os.kill(pids[victim], signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
                try:
                    proc.wait(timeout=args.timeout_ms / 1000.0 + 20)
                except subprocess.TimeoutExpired:
                    problems.append("the job hung: weft-run still running %.0f s after the fault"
                                    % (time.time() - fault_at))
        finally:
            if pids.get(victim) is not None and kind == "stop":
                try:
                    os.kill(pids[victim], signal.SIGKILL)
                except ProcessLookupError:
                    pass
            kill_group(proc)
            proc.wait()
    with open(log) as f:
        text = f.read()
    worst = 0.0
    if fault_at is not None:
        reports = {}
        for line in text.splitlines():
            m = FAULT_LINE.match(line)
            if m:
                reports.setdefault(int(m.group(1)), (int(m.group(2)), m.group(3)))
            if line.startswith("WRONG "):
                problems.append("wrong data: " + line)
        for r in range(n):
            if r == victim:
                continue
            if r not in reports:
                problems.append("rank %d reported no error" % r)
                continue
            at_ms, msg = reports[r]
            took = at_ms / 1000.0 - fault_at
            worst = max(worst, took)
            if not re.search(r"\brank %d\b(?!:)" % victim, msg):
                problems.append("rank %d did not name rank %d: %s" % (r, victim, msg))
            if took > args.timeout_ms / 1000.0 + 1.0:
                problems.append("rank %d reported %.2f s after the fault" % (r, took))
        if proc.returncode == 0:
            problems.append("weft-run exited 0")
        run_lines = [l for l in text.splitlines() if l.startswith("weft-run:")]
        if not any(re.search(r"\brank %d \(pid" % victim, l) for l in run_lines):
            problems.append("weft-run did not name rank %d: %s" % (victim, " | ".join(run_lines)))
    # Leftovers: the job's processes (by their pids) and its segments.
    time.sleep(0.1)
    for r, pid in pids.items():
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if os.path.basename(args.worker).encode() in f.read():
                    problems.append("rank %d (pid %d) is still running" % (r, pid))
                    os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
    left = shm_segments() - shm_before
    if left:
        problems.append("shared-memory segments left: " + ", ".join(sorted(left)))
        for f in left:
            try:
                os.unlink(os.path.join("/dev/shm", f))
            except OSError:
                pass
    if problems and args.keep_logs:
        kept = os.path.join(args.keep_logs, "trial-%d.log" % trial)
        shutil.copy(log, kept)
    shutil.rmtree(piddir, ignore_errors=True)
    return {"trial": trial, "kind": kind, "ranks": n, "victim": victim, "delay_s": round(delay, 3),
            "worst_s": round(worst, 3), "ok": not problems, "problems": problems}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weft-run", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--kinds", default="kill,stop")
    ap.add_argument("--timeout-ms", type=int, default=2000)
    ap.add_argument("--json", help="write every trial's result here")
    ap.add_argument("--keep-logs", help="copy failed trials' logs into this folder")
    args = ap.parse_args()
    args.kinds = args.kinds.split(",")
    for k in args.kinds:
        if k not in ("kill", "stop"):
            ap.error("unknown fault kind %r (kill, stop)" % k)
    rng = random.Random(args.seed)
    results = []
    for t in range(args.trials):
        res = run_trial(args, t, rng)
        results.append(res)
        print("trial %3d %-4s n=%d victim=%d after %.2fs: %s (survivors told within %.2fs)%s"
              % (t, res["kind"], res["ranks"], res["victim"], res["delay_s"], "ok" if res["ok"] else "FAIL",
                 res["worst_s"], "".join("\n    " + p for p in res["problems"])), flush=True)
    failed = 0
    for k in args.kinds:
        mine = [r for r in results if r["kind"] == k]
        ok = sum(r["ok"] for r in mine)
        failed += len(mine) - ok
        worst = max([r["worst_s"] for r in mine], default=0.0)
        print("%s: %d of %d trials passed; worst fault-to-error %.2f s (deadline %d ms)"
              % (k, ok, len(mine), worst, args.timeout_ms))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "timeout_ms": args.timeout_ms, "trials": results}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
