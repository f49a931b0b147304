"""A real Dask cluster from its own commands (`dask scheduler`, `dask worker` under their nannies)
on 127.0.0.1, as docs/scale-out.md runs one across hosts: for the tests that drive `--scheduler`
and the fault tests that kill a worker."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

WAIT_S = 60  # bound on every wait: the cluster's start, a worker's death timeout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@contextlib.contextmanager
def dask_cluster(folder: Path, workers: int = 2) -> Iterator[tuple[str, list[subprocess.Popen]]]:
    """(tcp://127.0.0.1:PORT, the worker processes) of a scheduler with `workers` single-thread
    workers; their output goes to `folder`/cluster.log, and all of them are stopped on exit."""
    from distributed import Client

    address = f"tcp://127.0.0.1:{free_port()}"
    dask = [sys.executable, "-m", "dask"]
    procs: list[subprocess.Popen] = []
    with open(folder / "cluster.log", "wb") as log:
        try:
            procs.append(subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port",
                                           address.rsplit(":", 1)[1], "--no-dashboard"],
                                          stdout=log, stderr=subprocess.STDOUT))  # fmt: skip
            for i in range(workers):
                procs.append(subprocess.Popen([*dask, "worker", address, "--nthreads", "1", "--name", f"w{i}",
                                               "--host", "127.0.0.1", "--no-dashboard", "--death-timeout",
                                               str(WAIT_S), "--local-directory", str(folder / f"w{i}")],
                                              stdout=log, stderr=subprocess.STDOUT))  # fmt: skip
            deadline = time.monotonic() + WAIT_S
            while True:
                try:
                    with Client(address, timeout=5) as c:
                        c.wait_for_workers(workers, timeout=max(1, deadline - time.monotonic()))
                    break
                except (OSError, TimeoutError):
                    if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                        log.flush()
                        raise RuntimeError(
                            "cluster did not start: " + (folder / "cluster.log").read_text(errors="replace")[-2000:]
                        ) from None
                    time.sleep(0.5)
            yield address, procs[1:]
        finally:
            _stop(procs[1:])  # workers first, so none reconnects to a scheduler that is going
            _stop(procs[:1])
