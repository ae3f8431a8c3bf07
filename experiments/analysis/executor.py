"""Where many simulations run: a local process pool, or a Dask cluster.

:func:`open_executor` gives a :class:`concurrent.futures.Executor` either way
(``submit``, ``map``; a context manager that shuts it down). Locally it is a
process pool with one worker per core; given a scheduler address
(``tcp://host:8786``) it is a ``distributed.Client``'s executor on that
cluster. Either way every worker loads the model's kernels once when it
starts (numba's on-disk cache: compiled once per machine), not once per task.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import multiprocessing
import os
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

from aiko.model.errors import AikoError

__all__ = ["open_executor", "ExecutorError", "worker_init"]

log = logging.getLogger(__name__)


class ExecutorError(AikoError):
    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        super().__init__(f"executor {where}: {reason}")


def worker_init() -> None:
    """Load (or compile once) the kernels in a fresh worker: the model's and
    the simulated Aiko's offline loop (the plant's replays)."""
    from aiko.experiments.rig.plant import warm_up_plant
    from aiko.model import warm_up

    warm_up()
    warm_up_plant()


def _client(address: str, timeout: float):
    try:
        from distributed import Client
    except ImportError as exc:
        raise ExecutorError(address, "the dask distributed package is not installed") from exc
    _probe(address, timeout)
    try:
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError) as exc:
        raise ExecutorError(address, f"cannot reach the scheduler ({exc})") from exc


def _probe(address: str, timeout: float) -> None:
    """A ``tcp://HOST:PORT`` scheduler that refuses the connection is an
    error at once (Dask's client would retry until its timeout)."""
    parts = urlsplit(address)
    if parts.scheme != "tcp" or parts.hostname is None:
        return
    try:
        port = parts.port
    except ValueError as exc:
        raise ExecutorError(address, "the port is not a number") from exc
    if port is None:
        return
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as exc:
        raise ExecutorError(address, f"cannot reach the scheduler "
                                     f"({exc.strerror or type(exc).__name__})") from exc


@contextlib.contextmanager
def open_executor(scheduler: str | None = None, workers: int | None = None,
                  timeout: float = 10.0) -> Iterator[cf.Executor]:
    """A process pool (``workers`` processes, default one per core) or, with
    ``scheduler``, the Dask cluster there; see the module docstring."""
    if scheduler is None:
        n = workers or os.cpu_count() or 1
        ctx = multiprocessing.get_context("spawn")
        with cf.ProcessPoolExecutor(max_workers=n, mp_context=ctx,
                                    initializer=worker_init) as pool:
            yield pool
        return
    client = _client(scheduler, timeout)
    try:
        client.run(worker_init)
        with client.get_executor(pure=False) as ex:
            yield ex
    finally:
        client.close()
