"""Motion capture sources behind one interface, and the logger that samples them.

A source (:class:`MocapSource`) is an async context manager with ``latest() ->
MocapSample | None``, the newest frame it has received for the tracked object;
``latest_objects()``, every object of its newest frame where the source
reports them (None where it does not); ``malformed``, the frames it could not
read. Sources:

* :class:`ViconUdpSource`: Vicon Tracker's UDP Object Stream (default port
  51001): little-endian packed datagrams, u32 frame number, u8 item count, then per
  item u8 id, u16 size (72), char name[24], 3 float64 translation (mm), 3 float64
  rotation (rad). The stream has no occlusion flag or latency: an object missing
  from a datagram is occluded. Malformed datagrams are ignored and counted.
* :class:`~aiko.drivers.vendor_mocap.VendorMocapSource`: a Vicon DataStream
  server through the DataStream SDK's own client (``motioncapture`` from PyPI),
  in a child process.
* :class:`~aiko.drivers.qualisys_source.QualisysSource`: Qualisys Track
  Manager's real-time server through Qualisys' Python SDK (``qtm-rt``).
* The served kinds by name: :mod:`aiko.drivers.mocap_sources`.
* ``None``: no motion capture.

:class:`MocapLogger` samples a source at a fixed rate on absolute deadlines and
hands every sample to a sink, marking repeated frame numbers as ``stale``:
nothing is dropped or invented.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from aiko.model.errors import AikoError

__all__ = ["MocapSample", "ViconUdpSource", "MocapLogger", "MocapSource", "NewestFrame",
           "MocapUnavailableError", "encode_object_stream", "decode_object_stream",
           "ObjectStreamError", "VICON_UDP_PORT", "ViconUdpSender"]

log = logging.getLogger(__name__)

VICON_UDP_PORT = 51001
_HEAD = struct.Struct("<IB")
_ITEM_HEAD = struct.Struct("<BH")
_ITEM_BODY = struct.Struct("<24s6d")


class MocapUnavailableError(AikoError):
    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        super().__init__(f"motion capture {source}: {reason}")


class ObjectStreamError(ValueError):
    """A datagram that is not a Tracker UDP Object Stream packet."""


@dataclass(frozen=True)
class MocapSample:
    """One motion-capture reading.

    t_receive: trial clock (s) when it arrived; frame: the source's frame number;
    position: (x, y, z) in m, None when occluded; latency: the source's own
    figure (s) where it reports one; stale: the logger saw this frame number
    before (no new frame since the previous sample).
    """

    t_receive: float
    frame: int
    position: tuple[float, float, float] | None
    latency: float | None = None
    stale: bool = False

    @property
    def occluded(self) -> bool:
        return self.position is None


@functools.lru_cache(maxsize=16)
def _datagram(count: int) -> struct.Struct:
    """A whole datagram of ``count`` items of 72 bytes, packed or unpacked in
    one call (a frame of 11 links in about a third of the time item by item)."""
    item = _ITEM_HEAD.format[1:] + _ITEM_BODY.format[1:]     # the layouts without "<"
    return struct.Struct(_HEAD.format + item * count)


_ITEM_FIELDS = 9
"""Fields of one item in :func:`_datagram`: id, size, name, 6 values."""


def encode_object_stream(frame: int, objects: dict[str, tuple]) -> bytes:
    """A Tracker UDP Object Stream datagram: objects name -> (x, y, z mm, rx, ry, rz)."""
    fields: list = [frame, len(objects)]
    for name, vals in objects.items():
        if len(vals) != 6:
            raise ValueError(f"object {name!r} has {len(vals)} values, not 6")
        fields += (0, _ITEM_BODY.size, _raw_name(name), *map(float, vals))
    return _datagram(len(objects)).pack(*fields)


@functools.lru_cache(maxsize=256)
def _raw_name(name: str) -> bytes:
    """An object's name as sent: ASCII, at most 23 bytes (NUL-padded by the packing)."""
    return name.encode("ascii")[:23]


def decode_object_stream(data: bytes) -> tuple[int, dict[str, tuple[float, ...]]]:
    """(frame number, {name: (x, y, z mm, rx, ry, rz rad)}); ObjectStreamError if malformed."""
    if len(data) < _HEAD.size:
        raise ObjectStreamError(f"datagram of {len(data)} bytes is shorter than its header")
    frame, count = _HEAD.unpack_from(data, 0)
    whole = _datagram(count)
    if len(data) == whole.size:
        fields = whole.unpack(data)
        objects = {}
        for k in range(2, len(fields), _ITEM_FIELDS):
            vals = fields[k + 3:k + 9]
            if fields[k + 1] != _ITEM_BODY.size or not math.isfinite(sum(vals)):
                break     # not well formed (or finite values whose sum overflows)
            objects[_name(fields[k + 2])] = vals
        else:
            return frame, objects
    return frame, _items(data, count)   # malformed somewhere: item by item, to say where


@functools.lru_cache(maxsize=256)
def _name(raw: bytes) -> str:
    """An item's name from its 24 bytes (NUL-padded ASCII)."""
    return raw.split(b"\0", 1)[0].decode("ascii", errors="replace")


def _items(data: bytes, count: int) -> dict[str, tuple[float, ...]]:
    """The ``count`` items after the header, read one by one."""
    pos = _HEAD.size
    objects = {}
    for _ in range(count):
        if pos + _ITEM_HEAD.size > len(data):
            raise ObjectStreamError("datagram ends inside an item header")
        _, size = _ITEM_HEAD.unpack_from(data, pos)
        pos += _ITEM_HEAD.size
        if size != _ITEM_BODY.size or pos + size > len(data):
            raise ObjectStreamError(f"item of size {size} (expected 72) or truncated")
        name_raw, *vals = _ITEM_BODY.unpack_from(data, pos)
        pos += size
        if not all(map(math.isfinite, vals)):
            raise ObjectStreamError("non-finite value")
        objects[_name(name_raw)] = tuple(vals)
    if pos != len(data):
        raise ObjectStreamError(f"{len(data) - pos} bytes after the last item")
    return objects


class _UdpProtocol(asyncio.DatagramProtocol):
    def __init__(self, source: ViconUdpSource) -> None:
        self.source = source

    def datagram_received(self, data: bytes, addr) -> None:
        self.source._datagram(data)


class MocapSource(Protocol):
    """What the trial takes from a motion-capture source (module docstring)."""

    malformed: int

    async def __aenter__(self) -> MocapSource: ...

    async def __aexit__(self, *exc: object) -> None: ...

    def latest(self) -> MocapSample | None: ...

    def latest_objects(self) -> tuple[float, int, dict[str, tuple[float, float, float]]] | None:
        ...


Objects = dict[str, tuple[float, float, float]]
"""Every object of a frame: name -> (x, y, z) m."""


class NewestFrame:
    """What every source keeps: the newest frame it took, as the tracked
    ``subject``'s sample (:meth:`latest`) and as every object in it
    (:meth:`latest_objects`)."""

    def __init__(self, subject: str) -> None:
        self.subject = subject
        self._latest: MocapSample | None = None
        self._objects: tuple[float, int, Objects] | None = None

    def take(self, t: float, frame: int, objects: Objects) -> None:
        """A frame received at t (trial clock): the subject occluded where absent."""
        self._latest = MocapSample(t, frame, objects.get(self.subject))
        self._objects = (t, frame, objects)

    def latest(self) -> MocapSample | None:
        return self._latest

    def latest_objects(self) -> tuple[float, int, Objects] | None:
        """(receive time, frame, {name: (x, y, z) m}) of every object in the
        newest frame, or None before the first."""
        return self._objects


class ViconUdpSource(NewestFrame):
    """Receives the Tracker UDP Object Stream for object ``subject``."""

    def __init__(self, subject: str, clock, host: str = "0.0.0.0", port: int = VICON_UDP_PORT):
        super().__init__(subject)
        self.clock = clock
        self.host = host
        self.port = port
        self.datagrams = 0
        self.malformed = 0
        self._transport: Any = None

    async def __aenter__(self) -> ViconUdpSource:
        loop = asyncio.get_running_loop()
        try:
            self._transport, _ = await loop.create_datagram_endpoint(
                lambda: _UdpProtocol(self), local_addr=(self.host, self.port))
        except OSError as exc:
            raise MocapUnavailableError(f"vicon-udp {self.host}:{self.port}",
                                        f"cannot listen ({exc.strerror})") from exc
        self.port = self._transport.get_extra_info("sockname")[1]
        return self

    async def __aexit__(self, *exc) -> None:
        if self._transport is not None:
            self._transport.close()

    def take_datagram(self, data: bytes) -> None:
        """One datagram of the stream, as the socket hands it over (also
        called directly by an in-process sender, in virtual time)."""
        self._datagram(data)

    def _datagram(self, data: bytes) -> None:
        t = self.clock.now()
        try:
            frame, objects = decode_object_stream(data)
        except ObjectStreamError as exc:
            self.malformed += 1
            log.debug("vicon-udp: malformed datagram: %s", exc)
            return
        self.datagrams += 1
        self.take(t, frame, {name: (v[0] / 1000.0, v[1] / 1000.0, v[2] / 1000.0)
                             for name, v in objects.items()})


class _Handover:
    """A transport that hands each datagram to a receiver in this process."""

    def __init__(self, deliver: Callable[[bytes], None]) -> None:
        self.sendto = deliver

    def close(self) -> None:
        pass


class ViconUdpSender:
    """Sends a Tracker UDP Object Stream to ``target`` (host, port) at ``rate``
    datagrams per second on absolute deadlines: frame numbers 1, 2, ... and the
    objects ``objects(t)`` returns ({name: (x, y, z mm, rx, ry, rz rad)}; None:
    nothing to send yet). ``await sender.run()`` until cancelled. ``deliver``:
    hand each datagram to a receiver in this process instead of a socket
    (:meth:`ViconUdpSource.take_datagram`, in virtual time). ``on_frame``:
    also called with every frame sent (frame number, time, objects), e.g. by a
    DataStream server serving the same frames."""

    def __init__(self, target: tuple[str, int], objects: Callable[[float], dict | None],
                 clock, rate: float = 100.0,
                 deliver: Callable[[bytes], None] | None = None,
                 on_frame: Callable[[int, float, dict], None] | None = None) -> None:
        self.target = target
        self.objects = objects
        self.clock = clock
        self.rate = rate
        self.deliver = deliver
        self.on_frame = on_frame
        self.frame = 0
        self.sent = 0
        self.errors = 0

    async def _open(self):
        if self.deliver is not None:
            return _Handover(self.deliver)
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.create_datagram_endpoint(
                asyncio.DatagramProtocol, remote_addr=self.target)
        except OSError as exc:
            raise MocapUnavailableError(f"vicon-udp sender to {self.target[0]}:{self.target[1]}",
                                        f"cannot open ({exc.strerror})") from exc
        return transport

    async def run(self) -> None:
        transport = await self._open()
        try:
            t0 = self.clock.now()
            k = 0
            while True:
                k += 1
                await self.clock.sleep_until(t0 + k / self.rate)
                now = self.clock.now()
                objs = self.objects(now)
                if objs is None:
                    continue
                self.frame += 1
                try:
                    transport.sendto(encode_object_stream(self.frame, objs))
                    self.sent += 1
                except OSError:  # nobody listening (ICMP refused): a Vicon keeps sending
                    self.errors += 1
                if self.on_frame is not None:
                    self.on_frame(self.frame, now, objs)
                k = max(k, int((self.clock.now() - t0) * self.rate))
        finally:
            transport.close()


class MocapLogger:
    """Samples ``source`` every 1/rate s on absolute deadlines; every sample goes
    to ``sink`` (stale ones marked), or a 'no frame yet' record."""

    def __init__(self, source, clock, sink: Callable[[float, MocapSample | None], None],
                 rate: float = 20.0) -> None:
        self.source = source
        self.clock = clock
        self.sink = sink
        self.rate = rate
        self.samples = 0
        self.stale = 0
        self.occluded = 0
        self.empty = 0
        self._last_frame: int | None = None

    async def run(self) -> None:
        t0 = self.clock.now()
        k = 0
        while True:
            deadline = t0 + k / self.rate
            await self.clock.sleep_until(deadline)
            now = self.clock.now()
            s = self.source.latest()
            if s is None:
                self.empty += 1
                self.sink(now, None)
            else:
                if s.frame == self._last_frame:
                    s = replace(s, stale=True)
                    self.stale += 1
                self._last_frame = s.frame
                if s.occluded:
                    self.occluded += 1
                self.samples += 1
                self.sink(now, s)
            k = max(k + 1, int((self.clock.now() - t0) * self.rate))
