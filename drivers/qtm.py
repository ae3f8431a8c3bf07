"""Qualisys Track Manager's real-time protocol (QTM RT), as bytes in and bytes
out (no sockets): what a QTM server and its clients (Qualisys' own `qtm-rt`
among them) say over TCP, port 22223 (little-endian), as far as 6DOF bodies go.

* every packet is ``u32 size`` (header included), ``u32 type`` and a payload;
  types: 0 error, 1 command, 2 XML, 3 data, 4 no more data, 6 event. Error,
  command and XML payloads are text ending in a NUL;
* on connect the server says ``QTM RT Interface connected``; the client sets
  the protocol's version (``Version 1.25`` -> ``Version set to 1.25``), asks
  for the bodies' settings (``GetParameters 6D``: XML whose ``The_6D`` lists
  each ``Body`` by ``Name``, in the order of the data) and for frames
  (``StreamFrames AllFrames|Frequency:N|FrequencyDivisor:N 6D``, ``StreamFrames
  Stop``, ``GetCurrentFrame 6D``); a command the server does not take gets an
  error packet;
* a data packet: i64 timestamp (µs), u32 frame number, u32 component count;
  a component: u32 size (its 8-byte header included), u32 type (5: 6D),
  then for 6D i32 body count, u16 2D drop rate, u16 out-of-sync rate, and
  per body 3 float32 position (mm) and 9 float32 rotation matrix; a body
  not tracked in the frame has NaN for every value.

The rotation matrix is sent column after column.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Sequence
from xml.sax.saxutils import escape

__all__ = ["QTM_PORT", "ERROR", "COMMAND", "XML", "DATA", "NO_MORE_DATA", "EVENT",
           "COMPONENT_6D", "QtmError", "packet", "text_packet", "data_packet",
           "parameters_xml", "split", "parse_data"]

QTM_PORT = 22223
ERROR, COMMAND, XML, DATA, NO_MORE_DATA, EVENT = 0, 1, 2, 3, 4, 6
COMPONENT_6D = 5

_HEAD = struct.Struct("<II")
_DATA_HEAD = struct.Struct("<qII")
_COMPONENT_6D = struct.Struct("<iHH")
_BODY = struct.Struct("<12f")
_NAN_BODY = _BODY.pack(*(math.nan,) * 12)

Body = tuple[Sequence[float], Sequence[float]]
"""((x, y, z) mm, 3x3 rotation row-major, 9 values)."""


class QtmError(ValueError):
    """Bytes that are not a QTM RT packet, or a payload that does not read."""


def packet(kind: int, payload: bytes) -> bytes:
    return _HEAD.pack(_HEAD.size + len(payload), kind) + payload


def text_packet(kind: int, text: str) -> bytes:
    """An error, command or XML packet."""
    return packet(kind, text.encode("utf-8") + b"\0")


def _body(body: Body | None) -> bytes:
    if body is None:
        return _NAN_BODY
    (x, y, z), r = body
    return _BODY.pack(x, y, z, r[0], r[3], r[6], r[1], r[4], r[7], r[2], r[5], r[8])


def data_packet(frame: int, timestamp_us: int, bodies: Iterable[Body | None]) -> bytes:
    """A data packet with one 6D component: the bodies in the order of
    :func:`parameters_xml`, None for one not tracked."""
    blob = [_body(b) for b in bodies]
    component = _COMPONENT_6D.pack(len(blob), 0, 0) + b"".join(blob)
    payload = (_DATA_HEAD.pack(timestamp_us, frame & 0xFFFFFFFF, 1)
               + _HEAD.pack(_HEAD.size + len(component), COMPONENT_6D) + component)
    return packet(DATA, payload)


def parameters_xml(names: Iterable[str], frequency: float, version: str = "1.25") -> str:
    """``GetParameters``' answer: the General settings' capture frequency and
    the 6D bodies by name, in the order of the data."""
    listed = list(names)
    bodies = "".join(f"<Body><Name>{escape(n)}</Name><Enabled>true</Enabled></Body>"
                     for n in listed)
    tag = f"QTM_Parameters_Ver_{version}"
    return (f"<{tag}><General><Frequency>{frequency:g}</Frequency></General>"
            f"<The_6D><Bodies>{len(listed)}</Bodies>{bodies}</The_6D></{tag}>")


def split(buffer: bytearray) -> list[tuple[int, bytes]]:
    """Take every whole packet (type, payload) off the front of ``buffer``,
    leaving a partial one; QtmError on a size that cannot be."""
    out = []
    while len(buffer) >= _HEAD.size:
        size, kind = _HEAD.unpack_from(buffer, 0)
        if size < _HEAD.size or size > 1 << 24:
            raise QtmError(f"packet size {size}")
        if len(buffer) < size:
            break
        out.append((kind, bytes(buffer[_HEAD.size:size])))
        del buffer[:size]
    return out


def parse_data(payload: bytes) -> tuple[int, int, list[Body | None]]:
    """A data packet's payload: (timestamp µs, frame, its 6D bodies), None for
    one not tracked; QtmError if it does not read."""
    if len(payload) < _DATA_HEAD.size:
        raise QtmError(f"data of {len(payload)} bytes")
    stamp, frame, count = _DATA_HEAD.unpack_from(payload, 0)
    pos, bodies = _DATA_HEAD.size, None
    for _ in range(count):
        if pos + _HEAD.size > len(payload):
            raise QtmError("data ends inside a component's header")
        size, kind = _HEAD.unpack_from(payload, pos)
        if size < _HEAD.size or pos + size > len(payload):
            raise QtmError(f"component of {size} bytes runs past the packet")
        if kind == COMPONENT_6D:
            bodies = _bodies(payload[pos + _HEAD.size:pos + size])
        pos += size
    if pos != len(payload):
        raise QtmError(f"{len(payload) - pos} bytes after the last component")
    return stamp, frame, bodies or []


def _bodies(data: bytes) -> list[Body | None]:
    if len(data) < _COMPONENT_6D.size:
        raise QtmError("a 6D component shorter than its header")
    n, _, _ = _COMPONENT_6D.unpack_from(data, 0)
    if n < 0 or len(data) != _COMPONENT_6D.size + n * _BODY.size:
        raise QtmError(f"a 6D component of {len(data)} bytes for {n} bodies")
    out: list[Body | None] = []
    for k in range(n):
        v = _BODY.unpack_from(data, _COMPONENT_6D.size + k * _BODY.size)
        if math.isnan(v[0]):
            out.append(None)
        else:
            c = v[3:]
            out.append(((v[0], v[1], v[2]), (c[0], c[3], c[6], c[1], c[4], c[7], c[2], c[5], c[8])))
    return out
