"""A Dask client for a command: a local cluster of worker processes, or an existing scheduler."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, Optional

from chakra.errors import ChakraError, InputError

#: Seconds to wait for a remote scheduler before giving up with one error line.
CONNECT_TIMEOUT = float(os.environ.get("CHAKRA_DASK_CONNECT_TIMEOUT", 20))


def require_dask() -> Any:
    """The `distributed` module, or one error line saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise ChakraError("--workers/--scheduler need Dask: pip install 'chakra-et[dist]'") from None
    return distributed


def check_workers(workers: Optional[int]) -> None:
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")


def local_workers(workers: Optional[int], tasks: int) -> int:
    """Worker processes for a local cluster: as asked, else one per core, never more than tasks."""
    check_workers(workers)
    n = workers or os.cpu_count() or 1
    return max(1, min(n, tasks)) if tasks else n


class _InterruptedSyncFilter(logging.Filter):
    """Drops the one traceback Dask prints after an interrupt. `distributed.utils.sync` hands the
    event loop a `cancel` callback that reads a variable the interrupted call never assigned when
    the interrupt comes early; the loop then logs that NameError ("Exception in callback ...")
    through `tornado.application`, from its own thread, before this process has silenced Dask."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info
        tb = exc[2] if exc else None
        if tb is None:
            return True
        while tb.tb_next is not None:
            tb = tb.tb_next
        code = tb.tb_frame.f_code
        return not (code.co_name == "cancel" and code.co_filename.endswith(os.path.join("distributed", "utils.py")))


def _quiet_interrupted_sync() -> None:
    log = logging.getLogger("tornado.application")
    if not any(isinstance(f, _InterruptedSyncFilter) for f in log.filters):
        log.addFilter(_InterruptedSyncFilter())


@contextmanager
def dask_client(workers: Optional[int] = None, scheduler: Optional[str] = None, tasks: int = 0) -> Iterator[Any]:
    """Yield a connected `distributed.Client`; a local cluster is torn down on exit.

    Local workers are processes with one thread each, so each holds one task (one rank's
    conversion, one simulation) at a time: memory per worker is bounded by the largest task.
    """
    distributed = require_dask()
    _quiet_interrupted_sync()
    if scheduler:
        try:
            client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise InputError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
        try:
            yield client
        finally:
            client.close()
        return
    n = local_workers(workers, tasks)
    cluster = None
    try:
        # Ctrl-C reaches the whole process group, workers included, and each would print its own
        # traceback (and Dask logs lines of its own as they go). The worker processes start with
        # standard error on /dev/null: this process reports what they do (a failed task, a lost
        # worker) in its own words. Workers end when this process dies.
        with _children_stderr_quiet():
            _start_resource_tracker()
            cluster = distributed.LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                # No dashboard for a command's lifetime; the scheduler's small HTTP endpoint takes a
                # free port instead of 8787 (which another cluster on the host may hold).
                dashboard_address=None,
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                silence_logs=logging.ERROR,
            )
        client = distributed.Client(cluster, set_as_default=False)
        try:
            yield client
        finally:
            _quietly(client.close)
    except BaseException:
        # Closing under an interrupt makes the scheduler log every task it drops, and Dask's own
        # exit hook retries a close that failed with a traceback: the user already has one line.
        silence_dask()
        _forget_exit_hook()
        raise
    finally:
        if cluster is not None:  # its worker processes end with this one in any case
            _quietly(cluster.close)


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker now, ignoring SIGHUP. It ignores SIGINT and SIGTERM
    on its own, not SIGHUP: a hang-up to the process group (a closed terminal or ssh session) would
    kill it, and the worker processes would start a fresh one that prints a KeyError traceback for
    every shared-memory name it never saw. An ignored signal stays ignored across exec."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    with suppress(Exception):
        from multiprocessing import resource_tracker

        old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            resource_tracker.ensure_running()
        finally:
            signal.signal(signal.SIGHUP, old)


def silence_dask() -> None:
    """No more log lines from Dask in this process (its scheduler runs here): once the user has
    pressed Ctrl-C, cancelling and closing make it log every task and gather it drops."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)


def _forget_exit_hook() -> None:
    import atexit

    with suppress(Exception):
        from distributed.deploy import spec

        atexit.unregister(spec.close_clusters)


def _quietly(close: Any) -> None:
    """Close a client or cluster; a second Ctrl-C or a dying worker must not turn into a traceback."""
    import asyncio

    with suppress(Exception, KeyboardInterrupt, asyncio.CancelledError):
        close()


@contextmanager
def _children_stderr_quiet() -> Iterator[None]:
    """Processes started inside inherit /dev/null as standard error (this process gets its own back)."""
    import sys

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
