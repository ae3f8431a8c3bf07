"""Motion capture through a vendor's own client library, in a child process.

:class:`VendorMocapSource` reads a Vicon DataStream server through the
DataStream SDK's client as ``motioncapture`` (libmotioncapture, from PyPI)
carries it. The client runs in a process of its own, for two reasons found in
its source: its connect retries for ever while the server cannot be reached
(holding the interpreter), and once connected its wait for a frame spins
without end if the server goes away. So the source first checks that the
server answers (a one-line error if not), starts the child, reads one line per
frame from it, and ends it on every way out; frames that stop coming show as
stale samples in the trial, as with any source.

The child (``python -m aiko.drivers.vendor_mocap KIND ADDRESS PARENT_PID``,
killed by the kernel if its parent ends first) prints
``ready`` once connected, then per frame a JSON line ``{"n": frames so far,
"objects": {name: [x, y, z] m}}`` of the objects it sees: an occluded object
is left out. The binding reports neither frame numbers nor latency: ``frame``
counts the frames received, latency is None. The client asks for segment
data once connected, so its first frame or two can come before the server
has that wish and hold no object at all: frames before the first with any
object are not taken (:attr:`unsubscribed` counts them).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
import socket
import sys
from typing import Any

from .mocap import MocapUnavailableError, NewestFrame
from .mocap_sources import SERVED_KINDS

__all__ = ["VendorMocapSource", "VENDOR_KINDS", "split_address"]

log = logging.getLogger(__name__)

VENDOR_KINDS = {"vicon-datastream": ("vicon", SERVED_KINDS["vicon-datastream"].port)}
"""Source kind -> (libmotioncapture's name for it, the server's default port)."""

READY_TIMEOUT = 10.0
"""Seconds the child may take to import its client and connect."""


def split_address(address: str, default_port: int) -> tuple[str, int]:
    """``HOST[:PORT]`` -> (host, port); ValueError with a one-line message."""
    host, sep, port_text = address.rpartition(":")
    if not sep:
        return address, default_port
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"{address}: the port must be an integer") from None
    if not host or not 0 < port <= 65535:
        raise ValueError(f"{address}: expected HOST[:PORT] with a port in 1..65535")
    return host, port


class VendorMocapSource(NewestFrame):
    """``kind`` (a key of :data:`VENDOR_KINDS`) at ``address`` (HOST[:PORT]),
    tracking object ``subject``; a :class:`~aiko.drivers.mocap.MocapSource`."""

    def __init__(self, kind: str, address: str, subject: str, clock) -> None:
        if kind not in VENDOR_KINDS:
            raise ValueError(f"unknown motion capture {kind!r}: expected one of "
                             f"{', '.join(VENDOR_KINDS)}")
        self.kind = kind
        self.host, self.port = split_address(address, VENDOR_KINDS[kind][1])
        super().__init__(subject)
        self.clock = clock
        self.frames = 0
        self.unsubscribed = 0
        self.malformed = 0
        self.errors = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task | None = None

    @property
    def name(self) -> str:
        return f"{self.kind} {self.host}:{self.port}"

    async def __aenter__(self) -> VendorMocapSource:
        await self._probe()
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aiko.drivers.vendor_mocap", VENDOR_KINDS[self.kind][0],
            f"{self.host}:{self.port}", str(os.getpid()), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            await self._wait_ready()
        except BaseException:
            await self._end()
            raise
        self._reader = asyncio.create_task(self._read(), name=f"mocap {self.name}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._end()

    async def _probe(self) -> None:
        """The server answers on its port, or a one-line error (the vendor's
        client would retry for ever)."""
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(self.host, self.port, family=socket.AF_INET,
                                           type=socket.SOCK_STREAM)
            _, writer = await asyncio.wait_for(asyncio.open_connection(*infos[0][4]), 3.0)
        except (OSError, TimeoutError) as exc:
            reason = getattr(exc, "strerror", None) or "no answer within 3 s"
            raise MocapUnavailableError(self.name, f"cannot connect ({reason})") from exc
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()

    async def _wait_ready(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), READY_TIMEOUT)
        except TimeoutError:
            raise MocapUnavailableError(self.name, f"the client did not connect within "
                                                   f"{READY_TIMEOUT:.0f} s") from None
        if line.strip() != b"ready":
            err = b""
            if self._proc.stderr is not None:
                with contextlib.suppress(TimeoutError):
                    err = await asyncio.wait_for(self._proc.stderr.read(), 2.0)
            last = (err.decode(errors="replace").strip().splitlines() or ["it ended"])[-1]
            raise MocapUnavailableError(self.name, f"the client failed: {last}")

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while True:
            line = await self._proc.stdout.readline()
            if not line:
                self.errors += 1
                log.warning("motion capture %s: the client ended (exit %s)", self.name,
                            await self._proc.wait())
                return
            self._frame(line)

    def _frame(self, line: bytes) -> None:
        t = self.clock.now()
        try:
            msg = json.loads(line)
            n = int(msg["n"])
            objects = {str(k): (float(v[0]), float(v[1]), float(v[2]))
                       for k, v in msg["objects"].items()}
        except (ValueError, KeyError, TypeError, IndexError):
            self.malformed += 1
            return
        if self._objects is None and not objects:
            self.unsubscribed += 1     # before the server had the client's wishes
            return
        self.frames += 1
        self.take(t, n, objects)

    async def _end(self) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 2.0)
        except TimeoutError:
            proc.kill()
            await proc.wait()



def _end_with(parent: int) -> None:
    """The child is killed when its parent ends, however it ends (an orphaned
    client would spin on a server that went away)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:      # the parent ended before the line above
        sys.exit(0)


def _child(kind: str, address: str, parent: int) -> None:
    """The child's loop (module docstring)."""
    _end_with(parent)
    import motioncapture  # type: ignore[import-not-found]

    mc = motioncapture.connect(kind, {"hostname": address})
    print("ready", flush=True)
    # nobody reads the child's errors after its start: a client that talks
    # on stderr must not fill the pipe and stall
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    n = 0
    out = sys.stdout
    while True:
        mc.waitForNextFrame()
        n += 1
        objects: dict[str, Any] = {name: [float(x) for x in body.position]
                                   for name, body in mc.rigidBodies.items()}
        out.write(json.dumps({"n": n, "objects": objects}) + "\n")
        out.flush()


if __name__ == "__main__":
    try:
        _child(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    except (KeyboardInterrupt, BrokenPipeError):
        pass
