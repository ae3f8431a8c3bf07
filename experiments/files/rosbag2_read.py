"""A trial exported as a rosbag2 (:mod:`aiko.experiments.analysis.rosbag2_export`),
read back as :class:`~aiko.experiments.files.triallog.TrialData`, so that
``aiko replay`` and ``aiko info`` take the bag as they take the trial log.

Read with rosbags' ``AnyReader`` (the message definitions come from the bag
itself). What comes back, per channel of the trial log:

* metadata and the comparison's metrics from ``/trial``; ``/events`` as logged;
* ``/references`` from ``/joint_references`` with ``/reference_periods``
  (exact send times, phases, counters);
* ``/can/tx``, ``/can/rx`` byte for byte; ``/joint_state`` and ``/emcy``
  decoded from ``/can/rx`` with the codec, as the trial runner decoded them;
* ``/mocap`` from ``/link6`` (the tracked samples; stamps to the nanosecond);
* ``/model`` from ``/model/link6`` (link 6 only; the model's lag is not in a
  bag).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from aiko.firmware_interface.codec import Emcy, FrameError, JointState, decode

from .ros_types import REQUIRED_TOPICS, split_joint_name, to_ns, typestore
from .triallog import TrialData, TrialLogError, frame_record

__all__ = ["read_rosbag2", "bag_folder"]


def bag_folder(path: Path) -> Path | None:
    """The rosbag2 folder of ``path`` (the folder, or a storage file in it), else None."""
    if path.is_dir():
        return path if (path / "metadata.yaml").is_file() else None
    if path.is_file() and (path.parent / "metadata.yaml").is_file():
        return path.parent
    return None


def read_rosbag2(path: str | Path, topics: Collection[str] | None = None) -> TrialData:
    """The trial in the rosbag2 at ``path`` (its folder or its MCAP file);
    ``topics`` as for :func:`~aiko.experiments.files.triallog.read_trial`.
    TrialLogError for what is not a bag of a trial."""
    from rosbags.highlevel import AnyReader, AnyReaderError
    from rosbags.rosbag2 import ReaderError

    path = Path(path)
    folder = bag_folder(path)
    if folder is None:
        raise TrialLogError(str(path), "not a rosbag2 (no metadata.yaml)")
    try:
        with AnyReader([folder], default_typestore=typestore()) as reader:
            return _read(path, reader, topics)
    except (AnyReaderError, ReaderError, KeyError, ValueError, TypeError, AssertionError,
            EOFError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TrialLogError(str(path), f"unreadable rosbag2 ({first})") from exc


class _Bag:
    def __init__(self, path: Path, reader) -> None:
        self.path = path
        self.reader = reader
        self.conns = {c.topic: c for c in reader.connections}
        self.missing = [t for t in REQUIRED_TOPICS if t not in self.conns]

    def messages(self, topic: str):
        conn = self.conns.get(topic)
        if conn is None:
            return
        for _, ns, raw in self.reader.messages(connections=[conn]):
            yield ns, self.reader.deserialize(raw, conn.msgtype)


def _read(path: Path, reader, topics: Collection[str] | None) -> TrialData:
    bag = _Bag(path, reader)
    if bag.missing:
        raise TrialLogError(str(path), "not an exported trial: no topic "
                                       + ", ".join(bag.missing))
    trial = next((json.loads(m.data) for _, m in bag.messages("/trial")), None)
    if not isinstance(trial, dict) or not isinstance(trial.get("metadata"), dict):
        raise TrialLogError(str(path), "/trial holds no trial metadata")
    wall_ns = to_ns(float(trial.get("wall_start") or 0.0))
    data = TrialData(path, truncated=bool(trial.get("truncated")))
    data.complete = not data.truncated
    data.metadata = {k: v if isinstance(v, str) else json.dumps(v)
                     for k, v in trial["metadata"].items()}

    def t_of(ns: int) -> float:
        return (ns - wall_ns) * 1e-9

    readers = {"/events": _events, "/references": _references, "/can/tx": _can_tx,
               "/can/rx": _can_rx, "/mocap": _mocap, "/model": _model}
    for channel, read in readers.items():
        for t, record in read(bag, t_of):
            data.records.setdefault(channel, []).append((t, record))
    _decode_rx(data)
    if trial.get("comparison") is not None:
        t = trial.get("comparison_t")
        data.records["/comparison"] = [(float(t) if isinstance(t, (int, float)) else
                                        t_of(bag.reader.end_time),
                                        {"metrics": trial["comparison"]})]
    _count(data)
    if topics is not None:
        data.records = {k: v for k, v in data.records.items() if k in topics}
    return data


def _count(data: TrialData) -> None:
    times = [recs[i][0] for recs in data.records.values() for i in (0, -1) if recs]
    data.span = (min(times), max(times)) if times else None
    data.counts = {k: len(v) for k, v in data.records.items()}


def _events(bag: _Bag, t_of):
    for ns, m in bag.messages("/events"):
        e = json.loads(m.data)
        if isinstance(e, dict) and "kind" in e:
            yield t_of(ns), e


def _references(bag: _Bag, t_of):
    periods = bag.messages("/reference_periods")
    for ns, m in bag.messages("/joint_references"):
        period_ns, period = next(periods, (None, None))
        if period_ns != ns or period is None:
            raise ValueError("/joint_references and /reference_periods do not pair up")
        d = json.loads(period.data)
        nodes: list[int] = []
        refs: dict[int, list[float]] = {}
        for i, name in enumerate(m.name):
            split = split_joint_name(name)
            if split is None:
                raise ValueError(f"/joint_references: joint name {name!r}")
            node, axis = split
            if node not in refs:
                nodes.append(node)
                refs[node] = [0.0] * 4
            refs[node][axis] = float(m.position[i])
            refs[node][2 + axis] = float(m.velocity[i])
        d["nodes"] = nodes
        for j, key in enumerate(("alpha_h", "alpha_v", "omega_h", "omega_v")):
            d[key] = [refs[n][j] for n in nodes]
        yield t_of(ns), d


def _frames(bag: _Bag, t_of, topic: str):
    for ns, m in bag.messages(topic):
        yield t_of(ns), {"id": int(m.id), "data": bytes(m.data[:m.dlc]).hex()}


def _can_tx(bag: _Bag, t_of):
    return _frames(bag, t_of, "/can/tx")


def _can_rx(bag: _Bag, t_of):
    return _frames(bag, t_of, "/can/rx")


def _decode_rx(data: TrialData) -> None:
    """/joint_state and /emcy from the received frames, as the runner decoded them."""
    for t, ident, payload in data.frames("/can/rx"):
        try:
            frame = decode(ident, payload)
        except FrameError:
            continue
        if isinstance(frame, JointState):
            data.records.setdefault("/joint_state", []).append((t, frame_record(frame)))
        elif isinstance(frame, Emcy):
            data.records.setdefault("/emcy", []).append((t, frame_record(frame)))


def _mocap(bag: _Bag, t_of):
    for i, (ns, m) in enumerate(bag.messages("/link6")):
        t = t_of(ns)
        yield t, {"frame": i, "x": m.point.x, "y": m.point.y, "z": m.point.z,
                  "occluded": False, "stale": False, "latency": None, "t_receive": t}


def _model(bag: _Bag, t_of):
    for ns, m in bag.messages("/model/link6"):
        t = t_of(ns)
        yield t, {"t": t, "x": m.point.x, "y": m.point.y, "z": m.point.z}
