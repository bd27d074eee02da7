#!/usr/bin/env python3
"""Fault campaign: random jobs struck by random faults, and every survivor must
say who is at fault.

Each trial starts `weft-run -n N weft-fault-worker SEED PIDDIR` (N from 2 to 8 on
this host; every rank runs the same random, verified collectives), waits until
every rank is up, sleeps a random moment, then strikes one rank:

  kill   SIGKILL (a crashed process)
  stop   SIGSTOP (a hung process; killed once the trial is judged)

and, on 2-4 network-namespace hosts of 1-2 ranks each (veth pairs to a bridge,
as tests/netns; ranks started with `ip netns exec`, no weft-run), cuts one host off:

  linkdown  `ip link set eth0 down` inside the host
  drop      every packet to and from the host dropped (a blackhole qdisc on both
            ends of its veth: the link stays up, nothing arrives, as with
            `tc netem loss 100%`, which this kernel lacks)

where every rank on the other hosts must name a rank of the cut host, and every
rank, the cut ones too, must exit (nothing hangs); namespaces are removed.

A trial passes when every surviving rank returned an error that names the
struck rank, within WEFT_TIMEOUT_MS + 1 s of the fault; no rank reported wrong
data; weft-run exited non-zero and named the struck rank; and nothing is left:
no process of the job, no shared-memory segment it made. The kinds take turns,
and every fourth pair of trials strikes rank 0 (or rank 0's host), whose process
runs the bootstrap root.

    campaign.py --weft-run PATH --worker PATH [--seed S] [--trials T]
                [--kinds kill,stop,linkdown,drop] [--timeout-ms MS] [--json FILE]

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


NETNS_KINDS = ("linkdown", "drop")


def sh(*cmd):
    return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


class Lab:
    """Hosts as network namespaces joined by veth pairs to a bridge in its own
    namespace, addresses 10.78.0.0/24; nothing in the caller's namespace changes."""

    def __init__(self, hosts):
        self.tag = "wf%d" % os.getpid()
        self.hosts = hosts
        self.made = []

    def ns(self, h):
        return "%s-h%d" % (self.tag, h)

    @staticmethod
    def addr(h):
        return "10.78.0.%d" % (h + 1)

    def up(self):
        br = self.tag + "-br"
        steps = [("ip", "netns", "add", br), ("ip", "-n", br, "link", "set", "lo", "up"),
                 ("ip", "-n", br, "link", "add", "br0", "type", "bridge"), ("ip", "-n", br, "link", "set", "br0", "up")]
        for h in range(self.hosts):
            ns = self.ns(h)
            steps += [("ip", "netns", "add", ns), ("ip", "-n", ns, "link", "set", "lo", "up"),
                      ("ip", "-n", br, "link", "add", "v%d" % h, "type", "veth", "peer", "name", "eth0", "netns", ns),
                      ("ip", "-n", br, "link", "set", "v%d" % h, "master", "br0", "up"),
                      ("ip", "-n", ns, "addr", "add", self.addr(h) + "/24", "dev", "eth0"),
                      ("ip", "-n", ns, "link", "set", "eth0", "up")]
        for cmd in steps:
            if cmd[1] == "netns" and cmd[2] == "add":
                self.made.append(cmd[3])
            r = sh(*cmd)
            if r.returncode != 0:
                return "%s: %s" % (" ".join(cmd), r.stderr.strip())
        # Every host reaches host 0: a refused connection to an unused port proves the path.
        for h in range(1, self.hosts):
            for _ in range(50):
                r = subprocess.run(["ip", "netns", "exec", self.ns(h), "timeout", "1", "bash", "-c",
                                    "exec 3<>/dev/tcp/%s/9" % self.addr(0)], capture_output=True, text=True)
                if "refused" in r.stderr:
                    break
                time.sleep(0.1)
            else:
                return "host %d cannot reach host 0" % h
        return None

    def cut(self, h, kind):
        if kind == "linkdown":
            r = sh("ip", "-n", self.ns(h), "link", "set", "eth0", "down")
            return None if r.returncode == 0 else r.stderr.strip()
        for ns, dev in ((self.ns(h), "eth0"), (self.tag + "-br", "v%d" % h)):
            r = sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "blackhole")
            if r.returncode != 0:
                return r.stderr.strip()
        return None

    def close(self):
        for ns in self.made:
            r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        for ns in reversed(self.made):
            sh("ip", "netns", "del", ns)

    def left(self):
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        return [l.split()[0] for l in r.stdout.splitlines() if l.startswith(self.tag + "-")]


def run_netns_trial(args, trial, rng):
    hosts, per = rng.randint(2, 4), rng.randint(1, 2)
    n = hosts * per
    victim = 0 if trial // 2 % 4 == 3 else rng.randrange(hosts)
    kind = args.kinds[trial % len(args.kinds)]
    delay = rng.uniform(0.2, 1.5)
    seed = rng.randrange(1 << 30)
    lost = list(range(victim * per, victim * per + per))
    secret = os.urandom(16).hex()
    piddir = tempfile.mkdtemp(prefix="weft-faults-")
    problems, procs, worst, fault_at = [], [], 0.0, None
    lab = Lab(hosts)
    try:
        err = lab.up()
        if err:
            problems.append("network: " + err)
        else:
            for r in range(n):
                env = ["WEFT_RANK=%d" % r, "WEFT_NRANKS=%d" % n, "WEFT_LOCAL_RANK=%d" % (r % per),
                       "WEFT_LOCAL_SIZE=%d" % per, "WEFT_COMM_ID=%s:29500" % lab.addr(0), "WEFT_JOB_SECRET=" + secret,
                       "WEFT_SOCKET_IFNAME=eth0", "WEFT_TIMEOUT_MS=%d" % args.timeout_ms]
                with open(os.path.join(piddir, "log%d" % r), "w") as out:
                    procs.append(subprocess.Popen(["ip", "netns", "exec", lab.ns(r // per), "env"] + env +
                                                  [args.worker, str(seed), piddir, "60"], stdout=out,
                                                  stderr=subprocess.STDOUT, start_new_session=True))
            up_by = time.time() + 30
            while time.time() < up_by and all(p.poll() is None for p in procs):
                if all(os.path.exists(os.path.join(piddir, str(r))) for r in range(n)):
                    break
                time.sleep(0.02)
            if not all(os.path.exists(os.path.join(piddir, str(r))) for r in range(n)):
                problems.append("the job did not start")
            else:
                time.sleep(delay)
                fault_at = time.time()
                err = lab.cut(victim, kind)
                if err:
                    problems.append("could not cut host %d off: %s" % (victim, err))
                by = time.time() + args.timeout_ms / 1000.0 + 20
                for r, p in enumerate(procs):
                    try:
                        p.wait(timeout=max(0.1, by - time.time()))
                    except subprocess.TimeoutExpired:
                        problems.append("rank %d hung: still running %.0f s after the fault"
                                        % (r, time.time() - fault_at))
    finally:
        for p in procs:
            kill_group(p)
            p.wait()
        lab.close()
    if fault_at is not None:
        pattern = re.compile(r"\brank (%s)\b(?!:)" % "|".join(map(str, lost)))
        for r in range(n):
            with open(os.path.join(piddir, "log%d" % r)) as f:
                text = f.read()
            for line in text.splitlines():
                if line.startswith("WRONG "):
                    problems.append("wrong data: " + line)
            if r in lost:
                continue
            m = next((FAULT_LINE.match(l) for l in text.splitlines() if FAULT_LINE.match(l)), None)
            if m is None:
                problems.append("rank %d reported no error" % r)
                continue
            took = int(m.group(2)) / 1000.0 - fault_at
            worst = max(worst, took)
            if not pattern.search(m.group(3)):
                problems.append("rank %d did not name a rank of host %d (%s): %s"
                                % (r, victim, ",".join(map(str, lost)), m.group(3)))
            if took > args.timeout_ms / 1000.0 + 1.0:
                problems.append("rank %d reported %.2f s after the fault" % (r, took))
    left = [f for f in os.listdir("/dev/shm") if f.startswith("weft-" + secret[:16])]
    if left:
        problems.append("shared-memory segments left: " + ", ".join(sorted(left)))
        for f in left:
            os.unlink(os.path.join("/dev/shm", f))
    if lab.left():
        problems.append("namespaces left: " + ", ".join(lab.left()))
    if problems and args.keep_logs:
        for r in range(n):
            src = os.path.join(piddir, "log%d" % r)
            if os.path.exists(src):
                shutil.copy(src, os.path.join(args.keep_logs, "trial-%d-rank-%d.log" % (trial, r)))
    shutil.rmtree(piddir, ignore_errors=True)
    return {"trial": trial, "kind": kind, "ranks": n, "hosts": hosts, "victim": victim, "delay_s": round(delay, 3),
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
        if k not in ("kill", "stop") + NETNS_KINDS:
            ap.error("unknown fault kind %r (kill, stop, linkdown, drop)" % k)
    if any(k in NETNS_KINDS for k in args.kinds):
        if os.geteuid() != 0 or sh("ip", "netns", "list").returncode != 0:
            print("SKIPPED: %s need root and `ip netns`" % ",".join(k for k in args.kinds if k in NETNS_KINDS))
            return 77
    rng = random.Random(args.seed)
    results = []
    for t in range(args.trials):
        netns = args.kinds[t % len(args.kinds)] in NETNS_KINDS
        res = run_netns_trial(args, t, rng) if netns else run_trial(args, t, rng)
        results.append(res)
        where = ("%d hosts, victim host=%d" % (res["hosts"], res["victim"])) if netns else "victim=%d" % res["victim"]
        print("trial %3d %-8s n=%d %s after %.2fs: %s (survivors told within %.2fs)%s"
              % (t, res["kind"], res["ranks"], where, res["delay_s"], "ok" if res["ok"] else "FAIL",
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
