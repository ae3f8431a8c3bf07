"""What the simulated motion-capture servers share: a TCP server whose clients
each get the newest frame, never a backlog.

A :class:`FrameServer` subclass says how a connection starts
(:meth:`~FrameServer.greet`), how the client's bytes split into requests
(:meth:`~FrameServer.split`), what a request does (:meth:`~FrameServer.request`)
and how a frame is written for a client (:meth:`~FrameServer.encode`).
:meth:`~FrameServer.publish` hands every client that wants frames the newest
one; a client that reads slowly skips frames rather than have them buffered,
and never holds the others up. Subjects once published stay in every later
frame, None (occluded) while a frame leaves them out, so their order (and
their ids, where a protocol numbers them) holds; ``subjects`` names them
before the first frame (as a motion-capture system's project defines its
objects before it streams), for a client that asks for them at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["FrameServer", "Client", "Frame"]

log = logging.getLogger(__name__)

Frame = tuple[int, float, Mapping[str, Any]]
"""(frame number, time s, subject name -> pose or None)."""


class Client:
    """One connection: what it asked for, and its newest unwritten frame."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.wants_frames = False     # streaming, or owed one
        self.owed = 0                 # single frames asked for
        self.options: dict[str, Any] = {}
        self.replies: list[bytes] = []
        self.pending: Frame | None = None
        self.wake = asyncio.Event()
        self.sent = 0
        self.skipped = 0

    def reply(self, data: bytes) -> None:
        self.replies.append(data)
        self.wake.set()


class _Closed(Exception):
    """The client's side ended, or sent what does not read: its tasks stop."""


class FrameServer:
    """See the module docstring. ``clients``: connected now; ``malformed``:
    client requests that did not read (the connection is closed)."""

    name = "frame server"

    def __init__(self, host: str, port: int, subjects: Iterable[str] = ()) -> None:
        self.host = host
        self.port = port
        self.malformed = 0
        self.published = 0
        self._clients: set[Client] = set()
        self._latest: Frame | None = None
        self._names: dict[str, None] = dict.fromkeys(subjects)   # known before any frame
        self._server: asyncio.Server | None = None

    # ------------------------------------------------- what a protocol says
    def greet(self, client: Client) -> None:
        """What the server says first."""

    def split(self, buffer: bytearray) -> list[Any]:
        """Whole requests off the front of ``buffer`` (as the protocol reads
        them); ValueError (or a subclass) if unreadable."""
        raise NotImplementedError

    def request(self, client: Client, req: Any) -> None:
        """One request of :meth:`split`'s; ValueError if it does not read."""
        raise NotImplementedError

    def encode(self, client: Client, frame: Frame) -> bytes | None:
        """A frame as this client gets it (None: not yet, keep it)."""
        raise NotImplementedError

    def due(self, client: Client, frame: Frame) -> bool:
        """Whether a published frame goes to this client (a rate it asked for)."""
        return True

    # ------------------------------------------------------------- serving
    @property
    def clients(self) -> int:
        return len(self._clients)

    @property
    def latest(self) -> Frame | None:
        return self._latest

    async def __aenter__(self):
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            for c in list(self._clients):
                c.writer.close()
            await self._server.wait_closed()

    def publish(self, number: int, t: float, subjects: Mapping[str, Any]) -> None:
        """A new frame: to every client that wants frames and is due one."""
        self._names.update(dict.fromkeys(subjects))
        if list(subjects) != list(self._names):
            subjects = {n: subjects.get(n) for n in self._names}
        frame = (number, t, subjects)
        self._latest = frame
        self.published += 1
        for c in self._clients:
            if (c.wants_frames or c.owed) and self.due(c, frame):
                if c.pending is not None:
                    c.skipped += 1
                c.pending = frame
                c.wake.set()

    def send_latest(self, client: Client) -> None:
        """The newest frame to ``client`` now (a request for one frame)."""
        if self._latest is not None:
            client.pending = self._latest
        client.wake.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = Client(writer)
        self._clients.add(client)
        peer = writer.get_extra_info("peername")
        log.info("%s: client %s connected", self.name, peer)
        try:
            self.greet(client)
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._write(client), name=f"{self.name} write {peer}")
                await self._read(reader, client)
                raise _Closed
        except* _Closed:
            pass
        except* (ConnectionError, OSError) as group:
            log.info("%s: client %s: %s", self.name, peer, group.exceptions[0])
        finally:
            self._clients.discard(client)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
            log.info("%s: client %s gone (%d frames sent, %d skipped)", self.name, peer,
                     client.sent, client.skipped)

    async def _read(self, reader: asyncio.StreamReader, client: Client) -> None:
        buffer = bytearray()
        while True:
            data = await reader.read(65536)
            if not data:
                return
            buffer += data
            try:
                for req in self.split(buffer):
                    self.request(client, req)
            except ValueError as exc:
                self.malformed += 1
                log.warning("%s: a client's request does not read (%s): closed", self.name, exc)
                return

    async def _write(self, client: Client) -> None:
        while True:
            await client.wake.wait()
            client.wake.clear()
            replies, client.replies = client.replies, []
            for data in replies:
                client.writer.write(data)
            frame, client.pending = client.pending, None
            if frame is not None:
                encoded = self.encode(client, frame)
                if encoded is None:
                    client.pending = frame
                else:
                    client.writer.write(encoded)
                    client.sent += 1
                    client.owed = max(0, client.owed - 1)
            await client.writer.drain()
