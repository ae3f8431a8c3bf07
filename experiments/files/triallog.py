"""The trial log: one MCAP file per trial, and its reader.

Written unchunked (a killed writer loses at most what the OS had not been given)
and flushed at least once a second; JSON-schema channels, so the file opens in
Foxglove and any MCAP reader. Every timestamp is integer nanoseconds on the
trial's monotonic clock (log_time = publish_time). Metadata ``trial`` holds the
resolved configuration, the gait, the software version and git revision; the
joint protocol's DBC is attached.

Channels:

=================  ============================================================
/references        one record per streamed period: k, phase (ramp, gait,
                   wind-down), t_gait (null outside the gait), deadline, sent,
                   sync counter, nodes, alpha_h, alpha_v, omega_h, omega_v (rad),
                   offset (the steering offset phi_0 they include, rad)
/can/tx, /can/rx   raw frames: id, data (hex), plus rx-side decode errors
/joint_state       decoded STATE frames
/emcy              decoded EMCY frames
/events            supervisor and trial events (start, phases, ramps, faults,
                   safe stop, end)
/mocap             link-6 samples: frame, position (m) or occluded, latency,
                   stale, receive time
/model             the parallel model at 20 Hz: t, link 6 (x, y, z), every
                   link's position (n, 3), its lag behind the trial (s)
/steering          a steered trial, one record per gait period: mode (wait,
                   closed, hold, open), the offset sent (rad), the heading
                   estimate and target (rad), the tracked position (m), the
                   cross-track error (m, paths), the waypoint segment, the age
                   of the newest tracked position (s), what was tracked
/comparison        the comparison at the trial's end: metrics, figure and JSON
                   file names
=================  ============================================================

The reader never executes anything from a file: JSON and MCAP records only.
"""

from __future__ import annotations

import heapq
import io
import json
import math
import struct
import tempfile
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from mcap.exceptions import McapError
from mcap.writer import CompressionType, Writer

from aiko.model.errors import AikoError

__all__ = ["TrialLog", "TrialData", "read_trial", "stream_frames", "TrialLogError", "CHANNELS",
           "CAN_CHANNELS", "LoggedFrame", "frame_record",
           "check_log_path", "free_log_path"]

_NUM = {"type": "number"}
_INT = {"type": "integer"}
_STR = {"type": "string"}
_NUMS = {"type": "array", "items": _NUM}
_NUM_OR_NULL = {"type": ["number", "null"]}

CHANNELS: dict[str, dict] = {
    "/references": {"title": "aiko.References", "properties": {
        "k": _INT, "phase": _STR, "t_gait": {"type": ["number", "null"]}, "deadline": _NUM, "sent": _NUM, "counter": _INT,
        "nodes": {"type": "array", "items": _INT}, "alpha_h": _NUMS, "alpha_v": _NUMS,
        "omega_h": _NUMS, "omega_v": _NUMS, "offset": _NUM}},
    "/can/tx": {"title": "aiko.CanFrame", "properties": {"id": _INT, "data": _STR}},
    "/can/rx": {"title": "aiko.CanFrame", "properties": {"id": _INT, "data": _STR,
                                                         "error": _STR}},
    "/joint_state": {"title": "aiko.JointState", "properties": {
        "node": _INT, "alpha_h": _NUM, "alpha_v": _NUM, "duty_h": _INT, "duty_v": _INT,
        "status": _INT, "sync_echo": _INT}},
    "/emcy": {"title": "aiko.Emcy", "properties": {
        "node": _INT, "error_code": _INT, "error_register": _INT, "motor": _INT}},
    "/events": {"title": "aiko.Event", "properties": {"kind": _STR, "data": {"type": "object"}}},
    "/mocap": {"title": "aiko.MocapSample", "properties": {
        "frame": {"type": ["integer", "null"]}, "x": {"type": ["number", "null"]},
        "y": {"type": ["number", "null"]}, "z": {"type": ["number", "null"]},
        "occluded": {"type": "boolean"}, "stale": {"type": "boolean"},
        "latency": {"type": ["number", "null"]}, "t_receive": {"type": ["number", "null"]}}},
    "/model": {"title": "aiko.ModelOutput", "properties": {
        "t": _NUM, "x": _NUM, "y": _NUM, "z": _NUM, "lag": _NUM,
        "positions": {"type": "array", "items": _NUMS}}},
    "/steering": {"title": "aiko.Steering", "properties": {
        "t": _NUM, "t_gait": _NUM, "mode": _STR, "offset": _NUM, "heading": _NUM_OR_NULL,
        "target": _NUM_OR_NULL, "x": _NUM_OR_NULL, "y": _NUM_OR_NULL,
        "cross_track": _NUM_OR_NULL, "segment": {"type": ["integer", "null"]},
        "age": _NUM_OR_NULL, "tracked": {"type": ["string", "null"]}}},
    "/comparison": {"title": "aiko.Comparison", "properties": {
        "metrics": {"type": "object"}, "figure": _STR, "json": _STR}},
}


def frame_record(frame) -> dict:
    """A decoded protocol frame as /joint_state and /emcy keep it: its fields,
    flags and enums as plain integers."""
    from enum import IntEnum, IntFlag

    from aiko.firmware_interface.codec import frame_fields

    return {k: int(v) if isinstance(v, (IntEnum, IntFlag)) else v
            for k, v in frame_fields(frame).items()}


class TrialLogError(AikoError):
    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        super().__init__(f"trial log {path}: {reason}")


def check_log_path(path: str | Path) -> Path:
    """TrialLogError unless a new trial log can be created at ``path``: its
    folder exists and takes a new file, and no file is there already (a trial
    is never overwritten). Creates nothing that stays."""
    path = Path(path)
    if path.exists() and path.is_file():
        raise TrialLogError(str(path), "exists already (a trial log is never overwritten)")
    if path.exists() and path.is_dir():
        raise TrialLogError(str(path), "is a folder")
    parent = path.parent
    if not parent.is_dir():
        raise TrialLogError(str(path), f"no such folder {parent}")
    if not path.exists():  # a device such as /dev/null is written as it is
        try:
            with tempfile.TemporaryFile(dir=parent):
                pass
        except OSError as exc:
            raise TrialLogError(str(path), f"cannot create files in {parent} "
                                           f"({exc.strerror})") from exc
    return path


def free_log_path(stem: str, folder: str | Path = ".") -> Path:
    """``stem.mcap`` in ``folder``, or ``stem-2.mcap``, ... if taken."""
    folder = Path(folder)
    path = folder / f"{stem}.mcap"
    i = 1
    while path.exists():
        i += 1
        path = folder / f"{stem}-{i}.mcap"
    return path


class TrialLog:
    """The one writer of a trial's MCAP file. ``write(channel, t, obj)`` with t on
    the trial clock (s); ``close()`` (or the context manager) finishes the file."""

    def __init__(self, path: str | Path, metadata: dict,
                 attachments: dict[str, bytes] | None = None, flush_interval: float = 0.5) -> None:
        self.path = Path(path)
        try:
            self._f = open(self.path, "wb")
        except OSError as exc:
            raise TrialLogError(str(path), f"cannot create ({exc.strerror})") from exc
        self._w = Writer(self._f, use_chunking=False, compression=CompressionType.NONE)
        self._w.start(profile="", library="aiko-hil")
        self._channels = {}
        for topic, schema in CHANNELS.items():
            body = {"type": "object", **schema}
            sid = self._w.register_schema(schema["title"], "jsonschema",
                                          json.dumps(body).encode())
            self._channels[topic] = self._w.register_channel(topic, "json", sid)
        self._w.add_metadata("trial", {k: v if isinstance(v, str) else json.dumps(v)
                                       for k, v in metadata.items()})
        for name, data in (attachments or {}).items():
            self._w.add_attachment(0, 0, name, "text/plain", data)
        self._seq = 0
        self.messages = 0
        self.flush_interval = flush_interval
        self._last_flush = time.monotonic()
        self._f.flush()
        self.closed = False

    def write(self, channel: str, t: float, obj: dict) -> None:
        if self.closed:
            return
        ns = int(round(t * 1e9))
        self._seq += 1
        self._w.add_message(self._channels[channel], ns, json.dumps(obj).encode(), ns, self._seq)
        self.messages += 1
        if time.monotonic() - self._last_flush >= self.flush_interval:
            self.flush()

    def flush(self) -> None:
        if not self.closed:
            self._f.flush()
            self._last_flush = time.monotonic()

    def close(self) -> None:
        if self.closed:
            return
        self._w.finish()
        self._f.close()
        self.closed = True

    def __enter__(self) -> TrialLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


CAN_CHANNELS = ("/can/tx", "/can/rx")
"""The channels of the raw CAN frames."""

LoggedFrame = tuple[float, str, int, bytes]
"""A logged CAN frame: (t on the trial clock (s), channel, identifier, payload)."""


@dataclass
class TrialData:
    """A trial loaded back: per channel, times (s) and records; arrays for the
    common ones; ``truncated`` when the file ended early (e.g. a killed run)."""

    path: Path
    metadata: dict = field(default_factory=dict)
    attachments: dict = field(default_factory=dict)
    records: dict = field(default_factory=dict)   # channel -> list of (t, dict)
    truncated: bool = False
    complete: bool = False
    counts: dict = field(default_factory=dict)    # channel -> messages, read or not
    span: tuple[float, float] | None = None       # first and last message time, s

    def times(self, channel: str) -> np.ndarray:
        return np.array([t for t, _ in self.records.get(channel, [])])

    def mocap(self) -> tuple[np.ndarray, np.ndarray]:
        """(t (k,), positions (k, 3) with NaN where occluded or missing)."""
        rec = self.records.get("/mocap", [])
        t = np.array([r[0] for r in rec])
        pos = np.array([[np.nan if d["x"] is None else d["x"], np.nan if d["y"] is None else d["y"],
                         np.nan if d["z"] is None else d["z"]] for _, d in rec]).reshape(-1, 3)
        return t, pos

    def tracked(self) -> list[tuple[float, tuple[float, float, float]]]:
        """Link 6 as motion capture tracked it: [(t_receive (s), (x, y, z) m)],
        each camera frame once, occluded and stale samples left out (the
        experiment a comparison uses)."""
        seen = set()
        out = []
        for t, d in self.records.get("/mocap", []):
            if d.get("stale") or d.get("occluded") or d.get("x") is None:
                continue
            if d.get("frame") in seen:
                continue
            seen.add(d.get("frame"))
            out.append((d["t_receive"] if d.get("t_receive") is not None else t,
                        (d["x"], d["y"], d["z"])))
        return out

    def references(self, phase: str | None = "gait") -> tuple[np.ndarray, np.ndarray]:
        """(t_sent (k,), refs (k, nodes, 4)) of the streamed periods of one
        phase (``gait``, ``ramp``, ``wind-down``; None: all)."""
        rec = [r for r in self.records.get("/references", [])
               if phase is None or r[1].get("phase", "gait") == phase]
        t = np.array([d["sent"] for _, d in rec])
        refs = np.array([np.column_stack([d["alpha_h"], d["alpha_v"], d["omega_h"], d["omega_v"]])
                         for _, d in rec])
        return t, refs

    def wall_start(self) -> float:
        """The wall clock (s since the epoch) at the trial clock's zero, from
        the ``trial_start`` event (0.0 for a log without one)."""
        for _, e in self.events("trial_start"):
            w = e.get("data", {}).get("wall_start")
            if isinstance(w, (int, float)) and not isinstance(w, bool):
                return float(w)
        return 0.0

    def frames(self, channel: str) -> list[tuple[float, int, bytes]]:
        """The standard CAN frames of /can/tx or /can/rx as (t, identifier,
        payload); a record that is not one is left out."""
        out = []
        for t, r in self.records.get(channel, []):
            frame = _standard_frame(r)
            if frame is not None:
                out.append((t, *frame))
        return out

    def can_frames(self, channels: Collection[str] = CAN_CHANNELS) -> list[LoggedFrame]:
        """The standard CAN frames of ``channels`` as (t, channel, identifier,
        payload), in time order, frames of the same time in the order of
        ``channels`` and then as logged (:func:`stream_frames` streams the
        same from a file; in virtual time many frames share an instant)."""
        rank = {ch: k for k, ch in enumerate(channels)}
        out = [(t, ch, ident, payload) for ch in channels
               for t, ident, payload in self.frames(ch)]
        out.sort(key=lambda f: (f[0], rank[f[1]]))
        return out

    def events(self, kind: str | None = None) -> list[tuple[float, dict]]:
        return [(t, d) for t, d in self.records.get("/events", []) if kind is None
                or d["kind"] == kind]


def read_trial(path: str | Path, topics: Collection[str] | None = None) -> TrialData:
    """Load a trial log, streamed from the file; a truncated file yields
    everything up to where it ends. ``topics``: parse and keep only these
    channels' records (the others are counted in ``counts`` and ``span``
    only), e.g. for a summary of a long trial without holding its every
    CAN frame in memory. A rosbag2 exported from a trial (its folder or its
    MCAP file) is read as the trial it came from
    (:mod:`aiko.experiments.files.rosbag2_read`)."""
    path = Path(path)
    if _is_rosbag2(path):
        from .rosbag2_read import read_rosbag2
        return read_rosbag2(path, topics)
    try:
        with path.open("rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                raise TrialLogError(str(path), "not an MCAP file")
            f.seek(0)
            data = TrialData(path)
            _read_into(data, _records(f), topics)
            f.seek(0, io.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - len(MAGIC)))
            data.truncated = f.read() != MAGIC or size < 2 * len(MAGIC)
    except OSError as exc:
        raise TrialLogError(str(path), f"cannot read ({exc.strerror})") from exc
    data.complete = not data.truncated
    return data


REORDER_WINDOW = 1.0
"""How far (s) a record may be logged out of time order for
:func:`stream_frames` to still put it in order."""


def stream_frames(path: str | Path, channels: Collection[str] = CAN_CHANNELS
                  ) -> Iterator[LoggedFrame]:
    """The standard CAN frames of ``channels`` as (t, channel, identifier,
    payload) in time order, streamed from the log: at most
    :data:`REORDER_WINDOW` of frames is held at once, so a long trial's frames
    never all sit in memory (:meth:`TrialData.frames` gives them as a list).
    A truncated log yields what it holds; a rosbag2 is read whole
    (:func:`read_trial`)."""
    path = Path(path)
    if _is_rosbag2(path):
        yield from read_trial(path, topics=tuple(channels)).can_frames(channels)
        return
    try:
        with path.open("rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                raise TrialLogError(str(path), "not an MCAP file")
            f.seek(0)
            rank = {ch: k for k, ch in enumerate(channels)}
            yield from _ordered(_frame_records(_records(f), set(channels)),
                                lambda item: rank[item[1]])
    except OSError as exc:
        raise TrialLogError(str(path), f"cannot read ({exc.strerror})") from exc


def _frame_records(records, channels: set[str]) -> Iterator[LoggedFrame]:
    from mcap.records import Channel, Message

    topics: dict[int, str] = {}
    for rec in records:
        if isinstance(rec, Channel):
            if rec.topic in channels and rec.message_encoding == "json":
                topics[rec.id] = rec.topic
        elif isinstance(rec, Message) and rec.channel_id in topics:
            frame = _frame(rec.data)
            if frame is not None:
                yield (rec.log_time * 1e-9, topics[rec.channel_id], *frame)


def _frame(raw: bytes) -> tuple[int, bytes] | None:
    try:
        r = json.loads(raw)
    except ValueError:
        return None
    return _standard_frame(r) if isinstance(r, dict) else None


def _standard_frame(r: dict) -> tuple[int, bytes] | None:
    """(identifier, payload) of a /can/* record, None unless a standard frame."""
    try:
        payload = bytes.fromhex(r["data"])
        ident = int(r["id"])
    except (KeyError, TypeError, ValueError):
        return None
    return (ident, payload) if 0 <= ident <= 0x7FF and len(payload) <= 8 else None


def _ordered(items: Iterator[tuple], tie=lambda item: 0) -> Iterator[tuple]:
    """``items`` (time first) in time order, within :data:`REORDER_WINDOW`;
    items of the same time by ``tie(item)``, then as they came."""
    heap: list[tuple] = []
    for seq, item in enumerate(items):
        heapq.heappush(heap, (item[0], tie(item), seq, item))
        while heap[0][0] < item[0] - REORDER_WINDOW:
            yield heapq.heappop(heap)[3]
    while heap:
        yield heapq.heappop(heap)[3]


def _is_rosbag2(path: Path) -> bool:
    """A rosbag2 folder, or an MCAP file written with the ``ros2`` profile."""
    if path.is_dir():
        return (path / "metadata.yaml").is_file()
    from mcap.records import Header
    try:
        with path.open("rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return False
            f.seek(0)
            first = next(iter(_records(f)), None)
    except OSError:
        return False
    return isinstance(first, Header) and first.profile == "ros2"


def _read_into(data: TrialData, records, topics: Collection[str] | None) -> None:
    from mcap.records import Attachment, Channel, Message, Metadata

    channels = {}
    lo, hi = math.inf, -math.inf
    for rec in records:
        if isinstance(rec, Channel):
            channels[rec.id] = rec
        elif isinstance(rec, Message):
            ch = channels.get(rec.channel_id)
            if ch is None or ch.message_encoding != "json":
                continue
            t = rec.log_time * 1e-9
            data.counts[ch.topic] = data.counts.get(ch.topic, 0) + 1
            lo, hi = min(lo, t), max(hi, t)
            if topics is not None and ch.topic not in topics:
                continue
            try:
                obj = json.loads(rec.data)
            except ValueError:
                continue
            data.records.setdefault(ch.topic, []).append((t, obj))
        elif isinstance(rec, Metadata) and rec.name == "trial":
            data.metadata = dict(rec.metadata)
        elif isinstance(rec, Attachment):
            data.attachments[rec.name] = rec.data
    data.span = (lo, hi) if hi >= lo else None


MAGIC = b"\x89MCAP0\r\n"


def _records(stream):
    """Every record of the stream, stopping quietly where a truncated file ends."""
    from mcap.stream_reader import StreamReader

    try:
        yield from StreamReader(stream, skip_magic=False).records
    except (McapError, EOFError, ValueError, KeyError, IndexError, struct.error):
        return
