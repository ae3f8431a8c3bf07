"""A Vicon DataStream server: the frames a simulated motion capture publishes,
served over TCP to any number of DataStream clients (the SDK's own among them).

``async with DataStreamServer(host, port) as server:`` listens (port 0: any
free one, then :attr:`port`); :meth:`publish` hands it each new frame. Each
client gets the server's item types, says which it wants, and asks for a
stream (the SDK's ServerPush) or for frames one at a time (ClientPull, and
its pre-fetch); pings are echoed. A client keeps only the newest frame not
yet written: one that reads slowly skips frames rather than have them
buffered, and never holds the others up. The wire format:
:mod:`aiko.drivers.datastream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace

from .datastream import (
    DATASTREAM_PORT,
    OBJECT_ENUMS,
    PING,
    REQUEST_FRAME,
    REQUEST_NEXT_FRAME,
    SERVED,
    DataStreamError,
    DataStreamFrame,
    frame_packet,
    object_enums,
    packet,
    parse_object_enums,
    parse_ping,
    parse_request_frame,
    ping,
    read_packets,
    split_packet,
)

__all__ = ["DataStreamServer"]

log = logging.getLogger(__name__)


class _Client:
    """One connection's wishes and its newest unwritten frame."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.wanted: frozenset[int] = frozenset()
        self.streaming = False
        self.owed = 0                 # single frames asked for (RequestFrame false)
        self.next_owed = 0            # RequestNextFrame: the next new frame
        self.pings: list[int] = []
        self.pending: DataStreamFrame | None = None
        self.wake = asyncio.Event()
        self.sent = 0
        self.skipped = 0


class DataStreamServer:
    """See the module docstring. ``clients``: connected now; ``malformed``:
    client packets that did not read (the connection is closed)."""

    def __init__(self, host: str = "127.0.0.1", port: int = DATASTREAM_PORT) -> None:
        self.host = host
        self.port = port
        self.malformed = 0
        self.published = 0
        self._clients: set[_Client] = set()
        self._latest: DataStreamFrame | None = None
        self._names: dict[str, None] = {}          # every subject so far, in order
        self._server: asyncio.Server | None = None

    @property
    def clients(self) -> int:
        return len(self._clients)

    async def __aenter__(self) -> DataStreamServer:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            for c in list(self._clients):
                c.writer.close()
            await self._server.wait_closed()

    def publish(self, frame: DataStreamFrame) -> None:
        """A new frame: to every streaming client and every one owed a frame.
        A subject once served stays in every later frame (its id with it),
        occluded while a frame leaves it out."""
        self._names.update(dict.fromkeys(frame.subjects))
        if list(frame.subjects) != list(self._names):
            frame = replace(frame, subjects={n: frame.subjects.get(n) for n in self._names})
        self._latest = frame
        self.published += 1
        for c in self._clients:
            if c.streaming or c.owed or c.next_owed:
                if c.pending is not None:
                    c.skipped += 1
                c.pending = frame
                c.next_owed = 0
                c.wake.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = _Client(writer)
        self._clients.add(client)
        peer = writer.get_extra_info("peername")
        log.info("datastream: client %s connected", peer)
        try:
            writer.write(packet([object_enums(SERVED)]))
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._write(client), name=f"datastream-write-{peer}")
                await self._read(reader, client)
                raise _Closed
        except* _Closed:
            pass
        except* (ConnectionError, OSError) as group:
            log.info("datastream: client %s: %s", peer, group.exceptions[0])
        finally:
            self._clients.discard(client)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
            log.info("datastream: client %s gone (%d frames sent, %d skipped)", peer,
                     client.sent, client.skipped)

    async def _read(self, reader: asyncio.StreamReader, client: _Client) -> None:
        """The client's packets until it closes or sends one that does not read."""
        buffer = bytearray()
        while True:
            data = await reader.read(65536)
            if not data:
                return
            buffer += data
            try:
                for raw in read_packets(buffer):
                    self._request(client, split_packet(raw))
            except DataStreamError as exc:
                self.malformed += 1
                log.warning("datastream: a client's packet does not read (%s): closed", exc)
                return

    def _request(self, client: _Client, items: list[tuple[int, bytes]]) -> None:
        for kind, payload in items:
            if kind == OBJECT_ENUMS:
                client.wanted = parse_object_enums(payload) & SERVED
            elif kind == REQUEST_FRAME:
                client.streaming = parse_request_frame(payload)
                if not client.streaming:
                    client.owed += 1
                    if self._latest is not None:
                        client.pending = self._latest
            elif kind == REQUEST_NEXT_FRAME:
                client.next_owed = 1
            elif kind == PING:
                client.pings.append(parse_ping(payload))
            # other items (filters, haptics, multicast) are not served: ignored
        client.wake.set()

    async def _write(self, client: _Client) -> None:
        while True:
            await client.wake.wait()
            client.wake.clear()
            items = [ping(p) for p in client.pings]
            client.pings.clear()
            frame, client.pending = client.pending, None
            if items:
                client.writer.write(packet(items))
            if frame is not None and not client.wanted:
                client.pending = frame    # not before the client says what it wants
            elif frame is not None:
                client.writer.write(frame_packet(frame, client.wanted))
                client.sent += 1
                client.owed = max(0, client.owed - 1)
            await client.writer.drain()


class _Closed(Exception):
    """The client's side ended: the connection's tasks stop."""
