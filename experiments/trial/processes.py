"""The one owner of the processes a trial starts (the simulated Aiko, the parallel
model), which ends them on every way out.

``async with ChildProcesses() as procs:`` then ``await procs.start(name, argv)``.
Leaving the block, however it is left (normal end, a fault, Ctrl-C, SIGTERM,
an exception of the owner), terminates every child still running: SIGTERM,
then SIGKILL after ``grace`` seconds. Children run in their own session, so a
Ctrl-C in the terminal reaches the trial's process alone, which then stops the
robot before it stops them; and they get a pipe on stdin whose end of file
tells them that the owner is gone, even after a SIGKILL of the owner.

``start(..., nice=N)`` lowers a child's scheduling priority: the parallel model
may lag (its lag is measured and reported), the trial and the simulated Aiko
must keep real time, and on a two-core machine the three compete.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from aiko.model.errors import AikoError

__all__ = ["ChildProcesses", "Child", "ChildStartError", "python_module", "wait_all_ready"]

log = logging.getLogger(__name__)


class ChildStartError(AikoError):
    """A child process did not start, or ended before it was ready."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        super().__init__(f"{name}: {reason}")


def python_module(module: str, *args: str) -> list[str]:
    """argv that runs ``python -m module args`` with this interpreter."""
    return [sys.executable, "-m", module, *args]


@dataclass
class Child:
    """One started process: its name, pid and asyncio process; ``stderr_tail``
    keeps its last lines of standard error."""

    name: str
    proc: asyncio.subprocess.Process
    stderr_tail: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def describe_exit(self) -> str:
        code = self.proc.returncode
        if code is None:
            return "running"
        if code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = str(-code)
            how = f"killed by {sig}"
        else:
            how = f"exited with status {code}"
        tail = self.stderr_tail[-1] if self.stderr_tail else ""
        return how + (f" ({tail})" if tail else "")

    async def readline(self, timeout: float | None = None) -> str | None:
        """The next line of its standard output (None at its end)."""
        assert self.proc.stdout is not None  # started with a pipe
        coro = self.proc.stdout.readline()
        line = await (coro if timeout is None else asyncio.wait_for(coro, timeout))
        return line.decode(errors="replace").rstrip("\n") if line else None

    async def wait_ready(self, timeout: float) -> dict:
        """Read JSON lines of its standard output until ``{"ready": {...}}``
        (returned); ``{"error": "..."}``, its end or the timeout raise
        ChildStartError. Other lines are skipped."""
        try:
            while True:
                line = await self.readline(timeout)
                if line is None:
                    await self.proc.wait()
                    raise ChildStartError(self.name, f"ended before it was ready: "
                                                     f"{self.describe_exit()}")
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict) and "ready" in msg:
                    return msg["ready"]
                if isinstance(msg, dict) and "error" in msg:
                    raise ChildStartError(self.name, str(msg["error"]))
        except TimeoutError:
            raise ChildStartError(self.name, f"not ready within {timeout:g} s") from None

    def write_line(self, text: str) -> bool:
        """Queue a line for its standard input; False if the pipe is gone."""
        w = self.proc.stdin
        if w is None or w.is_closing() or self.proc.returncode is not None:
            return False
        try:
            w.write(text.encode() + b"\n")
        except (BrokenPipeError, ConnectionResetError, RuntimeError):
            return False
        return True


async def wait_all_ready(children: list[Child], timeout: float) -> list[dict]:
    """Each child's ready message (:meth:`Child.wait_ready`), waited for
    together: children that load their kernels at the same time start in
    about the time of the slowest, not the sum. The first failure raises its
    :class:`ChildStartError` (the others' waits are cancelled; the owner ends
    them)."""
    try:
        async with asyncio.TaskGroup() as tg:
            waits = [tg.create_task(c.wait_ready(timeout), name=f"{c.name}: ready")
                     for c in children]
    except* ChildStartError as group:
        raise group.exceptions[0] from None
    return [w.result() for w in waits]


class ChildProcesses:
    """See the module docstring."""

    def __init__(self, grace: float = 3.0) -> None:
        self.grace = grace
        self.children: list[Child] = []
        self._tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> ChildProcesses:
        return self

    async def __aexit__(self, *exc) -> None:
        await asyncio.shield(self.stop_all())

    async def start(self, name: str, argv: list[str], nice: int = 0) -> Child:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        except OSError as exc:
            raise ChildStartError(name, f"cannot start ({exc.strerror})") from exc
        child = Child(name, proc)
        self.children.append(child)
        if nice > 0:
            try:
                os.setpriority(os.PRIO_PROCESS, proc.pid, os.getpriority(os.PRIO_PROCESS, 0) + nice)
            except OSError as exc:  # it ended already, or a policy forbids it: run as is
                log.warning("%s: priority not lowered (%s)", name, exc)
        task = asyncio.get_running_loop().create_task(self._drain_stderr(child),
                                                      name=f"{name}-stderr")
        self._tasks.add(task)
        log.info("started %s (pid %d)", name, proc.pid)
        return child

    def drain_stdout(self, child: Child, on_line: Callable[[str], None]) -> None:
        """From now on, hand each line of the child's standard output to
        ``on_line`` (in a task this owner ends), so that its pipe never fills."""
        async def drain() -> None:
            while (line := await child.readline()) is not None:
                on_line(line)

        task = asyncio.get_running_loop().create_task(drain(), name=f"{child.name}-stdout")
        self._tasks.add(task)

    async def _drain_stderr(self, child: Child) -> None:
        assert child.proc.stderr is not None  # started with a pipe
        while True:
            line = await child.proc.stderr.readline()
            if not line:
                return
            text = line.decode(errors="replace").rstrip()
            if text:
                child.stderr_tail = (child.stderr_tail + [text])[-20:]
                log.debug("%s: %s", child.name, text)

    async def stop(self, child: Child) -> None:
        """End one child: close its stdin, SIGTERM, SIGKILL after the grace time."""
        proc = child.proc
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), self.grace)
            except TimeoutError:
                log.warning("%s (pid %d) ignored SIGTERM: killing it", child.name, proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()

    async def stop_all(self) -> None:
        await asyncio.gather(*(self.stop(c) for c in self.children), return_exceptions=True)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
