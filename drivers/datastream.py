"""Vicon DataStream's wire protocol, as bytes in and bytes out (no sockets).

What a DataStream server (Vicon Tracker, Nexus, Shogun; here the simulated
Aiko) and the DataStream SDK's client say to each other over TCP (port 801 by
default), read from the SDK's MIT-licensed source (ViconCGStream and
ViconCGStreamClient, DataStream SDK 1.11; docs/mocap/vicon.md):

* everything is little-endian; a **packet** is ``u32 0x1a2b0001, u32 length``
  and ``length`` bytes of **items**, each ``u32 type, u32 length, payload``;
  a string is ``u32 n`` and n bytes, a vector or set ``u32 n`` and n elements;
* the server speaks first: a packet with ObjectEnums, the set of item types it
  serves; the client answers with the ones it wants (an ObjectEnums), asks for
  frames (RequestFrame: a bool, true for a stream; RequestNextFrame) and pings
  (Ping: u64 id, echoed by the server);
* a frame is one packet: StreamInfo (i64 frame period in ticks of 135 MHz),
  SubjectInfo per subject (u32 id, name, its segments: u32 parent, u32 id, six
  float bounds, name; markers, attachments), FrameInfo (u32 frame id; the SDK
  reports id + 1 as the frame number), GlobalSegments per subject (u32 subject
  id, per segment u32 id, 3 double translation in mm, 9 double rotation,
  row-major), LatencyInfo (samples: name, double seconds). A subject's segment
  left out of GlobalSegments reads as occluded.

Subjects here are as a lab names them in Tracker: object ``link6`` is a subject
whose one segment is also ``link6`` (segment id 1, its parent 0: the root).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["DATASTREAM_PORT", "TICKS_PER_SECOND", "PACKET", "OBJECT_ENUMS", "REQUEST_FRAME",
           "REQUEST_NEXT_FRAME", "STREAM_INFO", "SUBJECT_INFO", "FRAME_INFO",
           "GLOBAL_SEGMENTS", "LATENCY_INFO", "PING", "SERVED", "DataStreamError", "Pose",
           "DataStreamFrame", "item", "packet", "object_enums", "ping", "frame_packet",
           "split_packet", "read_packets", "parse_object_enums", "parse_request_frame",
           "parse_ping", "parse_frame", "rotation_xyz", "tracker_poses"]

DATASTREAM_PORT = 801
TICKS_PER_SECOND = 135_000_000
"""The clock a DataStream frame period is counted in."""

PACKET = 0x1A2B0001
OBJECT_ENUMS = 100001
REQUEST_FRAME = 100002
REQUEST_NEXT_FRAME = 100008
STREAM_INFO = 1
SUBJECT_INFO = 2
FRAME_INFO = 5
GLOBAL_SEGMENTS = 9
LATENCY_INFO = 26
PING = 42

SERVED = frozenset({STREAM_INFO, SUBJECT_INFO, FRAME_INFO, GLOBAL_SEGMENTS, LATENCY_INFO})
"""The item types a simulated Aiko serves."""

_HEAD = struct.Struct("<II")
_U32 = struct.Struct("<I")
_SEGMENT_POSE = struct.Struct("<I3d9d")
_SEGMENT_INFO = struct.Struct("<II6f")
_ROOT = 0
_SEGMENT_ID = 1


class DataStreamError(ValueError):
    """Bytes that are not a DataStream packet, or an item that does not read."""


class Pose(NamedTuple):
    """A segment's global pose: translation (x, y, z) mm, rotation 3x3
    row-major (9 values)."""

    translation: tuple[float, float, float]
    rotation: tuple[float, ...]


@dataclass(frozen=True)
class DataStreamFrame:
    """One frame: ``frame_id`` (0, 1, ...; the SDK's frame number is id + 1),
    ``period`` (s), ``subjects`` name -> Pose or None (occluded), in the order
    served, ``latency`` (s) as the server reports it."""

    frame_id: int
    period: float
    subjects: Mapping[str, Pose | None]
    latency: float = 0.0


def rotation_xyz(rx: float, ry: float, rz: float) -> tuple[float, ...]:
    """R = Rx(rx) Ry(ry) Rz(rz), row-major (the Tracker UDP stream's angles)."""
    cx, sx, cy, sy, cz, sz = (math.cos(rx), math.sin(rx), math.cos(ry), math.sin(ry),
                              math.cos(rz), math.sin(rz))
    return (cy * cz, -cy * sz, sy,
            cx * sz + sx * sy * cz, cx * cz - sx * sy * sz, -sx * cy,
            sx * sz - cx * sy * cz, sx * cz + cx * sy * sz, cx * cy)


def tracker_poses(objects: Mapping[str, tuple[float, ...]]) -> dict[str, Pose]:
    """A Tracker UDP stream's objects (name -> (x, y, z mm, rx, ry, rz rad))
    as DataStream poses."""
    return {name: Pose((v[0], v[1], v[2]), rotation_xyz(v[3], v[4], v[5]))
            for name, v in objects.items()}


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _U32.pack(len(raw)) + raw


def item(kind: int, payload: bytes) -> bytes:
    """One item: its type, its length, its payload."""
    return _HEAD.pack(kind, len(payload)) + payload


def packet(items: Iterable[bytes]) -> bytes:
    """A packet of these items."""
    body = b"".join(items)
    return _HEAD.pack(PACKET, len(body)) + body


def object_enums(kinds: Iterable[int]) -> bytes:
    """The ObjectEnums item: a set of item types, ascending."""
    ordered = sorted(set(kinds))
    return item(OBJECT_ENUMS, _U32.pack(len(ordered)) + b"".join(_U32.pack(k) for k in ordered))


def ping(ping_id: int) -> bytes:
    return item(PING, struct.pack("<Q", ping_id))


def _subject_info(subject_id: int, name: str) -> bytes:
    segment = _SEGMENT_INFO.pack(_ROOT, _SEGMENT_ID, *(0.0,) * 6) + _string(name)
    payload = (_U32.pack(subject_id) + _string(name) + _U32.pack(1) + segment
               + _U32.pack(0) + _U32.pack(0))      # no markers, no attachments
    return item(SUBJECT_INFO, payload)


def _global_segments(subject_id: int, pose: Pose | None) -> bytes:
    if pose is None:                               # occluded: no segment this frame
        return item(GLOBAL_SEGMENTS, _U32.pack(subject_id) + _U32.pack(0))
    body = _SEGMENT_POSE.pack(_SEGMENT_ID, *pose.translation, *pose.rotation)
    return item(GLOBAL_SEGMENTS, _U32.pack(subject_id) + _U32.pack(1) + body)


def frame_packet(frame: DataStreamFrame, wanted: Iterable[int] = SERVED) -> bytes:
    """The packet of one frame, with only the item types in ``wanted`` (what
    the client asked for). Subject ids are 1, 2, ... in ``frame.subjects``'
    order: a server keeps its subjects in one order for their ids to hold."""
    want = set(wanted)
    names = list(frame.subjects)
    items = []
    if STREAM_INFO in want:
        period = max(1, round(frame.period * TICKS_PER_SECOND))
        items.append(item(STREAM_INFO, struct.pack("<q", period)))
    if SUBJECT_INFO in want:
        items += [_subject_info(k, name) for k, name in enumerate(names, 1)]
    if FRAME_INFO in want:
        items.append(item(FRAME_INFO, _U32.pack(frame.frame_id & 0xFFFFFFFF)))
    if GLOBAL_SEGMENTS in want:
        items += [_global_segments(k, frame.subjects[name]) for k, name in enumerate(names, 1)]
    if LATENCY_INFO in want:
        items.append(item(LATENCY_INFO, _U32.pack(1) + _string("Tracker")
                          + struct.pack("<d", frame.latency)))
    return packet(items)


# ------------------------------------------------------------------ reading
def split_packet(data: bytes) -> list[tuple[int, bytes]]:
    """The items (type, payload) of one whole packet; DataStreamError if it
    is not one."""
    if len(data) < _HEAD.size:
        raise DataStreamError(f"{len(data)} bytes are shorter than a packet's header")
    tag, length = _HEAD.unpack_from(data, 0)
    if tag != PACKET:
        raise DataStreamError(f"packet tag 0x{tag:08x}, not 0x{PACKET:08x}")
    if _HEAD.size + length != len(data):
        raise DataStreamError(f"packet says {length} bytes, holds {len(data) - _HEAD.size}")
    items, pos = [], _HEAD.size
    while pos < len(data):
        if pos + _HEAD.size > len(data):
            raise DataStreamError("packet ends inside an item's header")
        kind, size = _HEAD.unpack_from(data, pos)
        pos += _HEAD.size
        if pos + size > len(data):
            raise DataStreamError(f"item {kind} of {size} bytes runs past the packet")
        items.append((kind, data[pos:pos + size]))
        pos += size
    return items


def read_packets(buffer: bytearray) -> list[bytes]:
    """Take every whole packet off the front of ``buffer`` (a stream's bytes
    so far), leaving a partial one; DataStreamError on a bad tag."""
    out = []
    while len(buffer) >= _HEAD.size:
        tag, length = _HEAD.unpack_from(buffer, 0)
        if tag != PACKET:
            raise DataStreamError(f"packet tag 0x{tag:08x}, not 0x{PACKET:08x}")
        end = _HEAD.size + length
        if len(buffer) < end:
            break
        out.append(bytes(buffer[:end]))
        del buffer[:end]
    return out


class _Reader:
    def __init__(self, payload: bytes, kind: str) -> None:
        self.data, self.pos, self.kind = payload, 0, kind

    def take(self, fmt: struct.Struct) -> tuple:
        if self.pos + fmt.size > len(self.data):
            raise DataStreamError(f"{self.kind} ends early")
        values = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return values

    def u32(self) -> int:
        return self.take(_U32)[0]

    def string(self) -> str:
        n = self.u32()
        if self.pos + n > len(self.data):
            raise DataStreamError(f"{self.kind}: a string runs past the item")
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def done(self) -> None:
        if self.pos != len(self.data):
            raise DataStreamError(f"{self.kind}: {len(self.data) - self.pos} bytes left over")


def parse_object_enums(payload: bytes) -> frozenset[int]:
    r = _Reader(payload, "ObjectEnums")
    kinds = frozenset(r.u32() for _ in range(r.u32()))
    r.done()
    return kinds


def parse_request_frame(payload: bytes) -> bool:
    """Whether the client asks for a stream (True) or one frame (False)."""
    if len(payload) != 1:
        raise DataStreamError(f"RequestFrame of {len(payload)} bytes, expected 1")
    return payload != b"\0"


def parse_ping(payload: bytes) -> int:
    if len(payload) != 8:
        raise DataStreamError(f"Ping of {len(payload)} bytes, expected 8")
    return struct.unpack("<Q", payload)[0]


def _subject(payload: bytes) -> tuple[int, str, dict[int, str]]:
    r = _Reader(payload, "SubjectInfo")
    subject_id, name = r.u32(), r.string()
    segments = {}
    for _ in range(r.u32()):
        _, segment_id, *_bounds = r.take(_SEGMENT_INFO)
        segments[segment_id] = r.string()
    for _ in range(r.u32()):
        r.u32()
        r.string()
    for _ in range(r.u32()):
        r.u32()
        r.u32()
    r.done()
    return subject_id, name, segments


def _poses(payload: bytes) -> tuple[int, dict[int, Pose]]:
    r = _Reader(payload, "GlobalSegments")
    subject_id = r.u32()
    poses = {}
    for _ in range(r.u32()):
        segment_id, *v = r.take(_SEGMENT_POSE)
        poses[segment_id] = Pose((v[0], v[1], v[2]), tuple(v[3:]))
    r.done()
    return subject_id, poses


def _latency(payload: bytes) -> float:
    r = _Reader(payload, "LatencyInfo")
    total = 0.0
    for _ in range(r.u32()):
        r.string()
        total += r.take(struct.Struct("<d"))[0]
    r.done()
    return total


def parse_frame(data: bytes) -> DataStreamFrame:
    """A frame packet read back as the SDK's client reads it: each subject's
    root segment's pose, None where the frame leaves it out (occluded)."""
    period, frame_id, latency = 0, None, 0.0
    subjects: dict[int, tuple[str, dict[int, str]]] = {}
    poses: dict[int, dict[int, Pose]] = {}
    for kind, payload in split_packet(data):
        if kind == STREAM_INFO:
            if len(payload) != 8:
                raise DataStreamError(f"StreamInfo of {len(payload)} bytes, expected 8")
            period = struct.unpack("<q", payload)[0]
        elif kind == SUBJECT_INFO:
            sid, name, segments = _subject(payload)
            subjects[sid] = (name, segments)
        elif kind == FRAME_INFO:
            if len(payload) != 4:
                raise DataStreamError(f"FrameInfo of {len(payload)} bytes, expected 4")
            frame_id = _U32.unpack(payload)[0]
        elif kind == GLOBAL_SEGMENTS:
            sid, p = _poses(payload)
            poses[sid] = p
        elif kind == LATENCY_INFO:
            latency = _latency(payload)
    if frame_id is None:
        raise DataStreamError("a frame without FrameInfo")
    out: dict[str, Pose | None] = {}
    for sid, (name, segments) in subjects.items():
        root = next((k for k, seg in segments.items() if seg == name), _SEGMENT_ID)
        out[name] = poses.get(sid, {}).get(root)
    return DataStreamFrame(frame_id, period / TICKS_PER_SECOND, out, latency)
