"""A Vicon DataStream server: the frames a simulated motion capture publishes,
served over TCP to any number of DataStream clients (the SDK's own among them).

``async with DataStreamServer(host, port) as server:`` listens (port 0: any
free one, then :attr:`port`); :meth:`publish` hands it each new frame (number
1, 2, ..., time, subject name -> :class:`~aiko.drivers.datastream.Pose` or
None). Each client gets the server's item types, says which it wants, and asks
for a stream (the SDK's ServerPush) or for frames one at a time (ClientPull,
and its pre-fetch); pings are echoed. Slow clients skip frames
(:mod:`aiko.drivers.frame_server`). The wire format: :mod:`aiko.drivers.datastream`.
"""

from __future__ import annotations

from collections.abc import Iterable

from .datastream import (
    DATASTREAM_PORT,
    OBJECT_ENUMS,
    PING,
    REQUEST_FRAME,
    REQUEST_NEXT_FRAME,
    SERVED,
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
from .frame_server import Client, Frame, FrameServer

__all__ = ["DataStreamServer"]


class DataStreamServer(FrameServer):
    """See the module docstring; ``period``: the frame period served (s),
    ``latency``: the latency reported (s)."""

    name = "datastream"

    def __init__(self, host: str = "127.0.0.1", port: int = DATASTREAM_PORT,
                 period: float = 0.01, latency: float = 0.0,
                 subjects: Iterable[str] = ()) -> None:
        super().__init__(host, port, subjects)
        self.period = period
        self.latency = latency

    def greet(self, client: Client) -> None:
        client.options["wanted"] = frozenset()
        client.reply(packet([object_enums(SERVED)]))

    def split(self, buffer: bytearray) -> list[bytes]:
        return read_packets(buffer)       # a DataStreamError is a ValueError

    def request(self, client: Client, req: bytes) -> None:
        for kind, payload in split_packet(req):
            self._item(client, kind, payload)

    def _item(self, client: Client, kind: int, payload: bytes) -> None:
        if kind == OBJECT_ENUMS:
            client.options["wanted"] = parse_object_enums(payload) & SERVED
            client.wake.set()
        elif kind == REQUEST_FRAME:
            client.wants_frames = parse_request_frame(payload)
            if not client.wants_frames:
                client.owed += 1
                self.send_latest(client)
        elif kind == REQUEST_NEXT_FRAME:
            client.owed += 1            # the next frame published
        elif kind == PING:
            client.reply(packet([ping(parse_ping(payload))]))
        # other items (filters, haptics, multicast) are not served: ignored

    def encode(self, client: Client, frame: Frame) -> bytes | None:
        wanted = client.options["wanted"]
        if not wanted:
            return None                 # not before the client says what it wants
        number, _, subjects = frame
        return frame_packet(DataStreamFrame(number - 1, self.period, subjects, self.latency),
                            wanted)
