"""Runs a scenario (a function in scenarios.py) in `world` fresh processes under
torch.distributed and collects what each rank returned. Bounded: past the
timeout every rank's process group is killed and the test fails; processes
are always reaped, also when the test fails."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RankFailure(AssertionError):
    pass


def run(scenario, world, *, args=None, timeout=180, backend="weft", env=None, expect_fail=()):
    """Returns [result of rank 0, ...]. A rank that raises fails the test with
    its traceback, unless its rank is in expect_fail (then its entry is the
    error text and its exit code is not checked)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for rank in range(world):
            e = dict(os.environ)
            e.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                      "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "OMP_NUM_THREADS": "1",
                      "WEFT_TEST_BACKEND": backend, "WEFT_TEST_TMP": tmp})
            e.update(env or {})
            out = os.path.join(tmp, f"rank{rank}.json")
            log = open(os.path.join(tmp, f"rank{rank}.log"), "w")
            procs.append((subprocess.Popen(
                [sys.executable, os.path.join(HERE, "worker.py"), scenario, json.dumps(args), out],
                env=e, stdout=log, stderr=subprocess.STDOUT, start_new_session=True), out, log))
        deadline = time.monotonic() + timeout
        try:
            # The ranks expected to fail may never exit (a stopped process):
            # wait for the others; the finally below kills what is left.
            for rank, (p, _, _) in enumerate(procs):
                if rank in expect_fail:
                    continue
                left = deadline - time.monotonic()
                p.wait(timeout=max(left, 0.1))
        except subprocess.TimeoutExpired:
            logs = _logs(tmp, world)
            raise AssertionError(f"{scenario} at {world} ranks did not finish within {timeout} s\n{logs}")
        finally:
            for p, _, log in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
                log.close()
        results = []
        for rank, (p, out, _) in enumerate(procs):
            res = json.load(open(out)) if os.path.exists(out) else None
            if rank in expect_fail:
                results.append(res)
                continue
            if p.returncode != 0 or res is None or "error" in res:
                raise RankFailure(f"{scenario}: rank {rank} of {world} exited {p.returncode}\n" + _logs(tmp, world))
            results.append(res["result"])
        return results


def _logs(tmp, world):
    text = []
    for rank in range(world):
        path = os.path.join(tmp, f"rank{rank}.log")
        if os.path.exists(path):
            text.append(f"--- rank {rank} ---\n" + open(path).read()[-6000:])
    return "\n".join(text)
