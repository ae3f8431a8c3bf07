"""A trial as a rosbag2: a folder with ``metadata.yaml`` and one MCAP file of
CDR messages with their ``ros2msg`` schemas, for ROS 2's own tools
(``ros2 bag info``, ``ros2 bag play``, RViz, PlotJuggler) and readers
(rosbags, rosbag2_py).

Written with rosbags (pure Python, no ROS installation): it writes the
``metadata.yaml`` that ``ros2 bag`` reads, the MCAP storage plugin's layout
and the message definitions from its typestore, so nothing of the bag's
format is ours. The topics (:data:`aiko.experiments.files.ros_types.TOPICS`):

=====================  ======================================================
/trial                 the trial's metadata (gait, configuration, scene, ...)
                       and its comparison's metrics, JSON, latched at the start
/tf_static             ``world`` -> ``mocap`` and ``world`` -> ``model``, both
                       identity: the parallel model starts on motion capture's
                       posture, in its frame (the start alignment)
/joint_references      each period's references: position alpha (rad),
                       velocity omega (rad/s), names ``joint<n>_h``/``_v``
/reference_periods     each period's k, phase, t_gait, counter, deadline,
                       exact send time and steering offset (JSON)
/joint_states          each STATE reply: position (rad), ``effort`` holds the
                       motors' duty in percent of full PWM (not a torque)
/tf                    ``mocap`` -> ``link6`` for each tracked camera frame,
                       ``model`` -> ``model/link1``.. for each model sample
                       (positions; the logs hold no orientations: identity)
/link6, /model/link6   the compared point (``PointStamped``)
/can/tx, /can/rx       every frame on the bus (``can_msgs/msg/Frame``)
/diagnostics           faults, EMCY, and each node's state once a second
/events                every trial event as JSON (kind, data)
=====================  ======================================================

Stamps: header stamps and log times are the same nanoseconds, the wall clock
of the trial's start plus the trial clock.
"""

from __future__ import annotations

import heapq
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from aiko.experiments.files.ros_types import LATCHED, TOPICS, joint_names, to_ns, typestore
from aiko.experiments.files.triallog import TrialData
from aiko.model.errors import AikoError

from .rosbag2_diagnostics import diagnostics

__all__ = ["export_rosbag2", "BagExportError", "BagSummary"]


class BagExportError(AikoError):
    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        super().__init__(f"{path}: {reason}")


@dataclass(frozen=True)
class BagSummary:
    folder: Path
    counts: dict[str, int]   # topic -> messages written


Item = tuple[int, str, object]   # (stamp ns, topic, message)


class _Stamps:
    """Trial time (s) to the bag's nanoseconds: wall start + trial clock."""

    def __init__(self, data: TrialData) -> None:
        self.wall_ns = to_ns(data.wall_start())

    def ns(self, t: float) -> int:
        return self.wall_ns + to_ns(t)

    def header(self, t: float, frame_id: str = ""):
        types = typestore().types
        ns = self.ns(t)
        return types["std_msgs/msg/Header"](
            stamp=types["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9),
            frame_id=frame_id)


def export_rosbag2(data: TrialData, folder: str | Path) -> BagSummary:
    """Write ``data`` as a rosbag2 into ``folder`` (created; it must not exist).
    On any failure nothing is left behind."""
    folder = Path(folder)
    if folder.exists():
        raise BagExportError(str(folder), "exists already (a bag is never overwritten)")
    if not folder.parent.is_dir():
        raise BagExportError(str(folder), f"no such folder {folder.parent}")
    # written in a hidden folder beside it, moved into place when complete
    partial = folder.parent / f".{folder.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        partial.mkdir()
        counts = _write(data, partial / folder.name)
        os.replace(partial / folder.name, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return BagSummary(folder, counts)


def _write(data: TrialData, folder: Path) -> dict[str, int]:
    from rosbags.interfaces import (
        Qos,
        QosDurability,
        QosHistory,
        QosLiveliness,
        QosReliability,
        QosTime,
    )
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = typestore()
    latched = Qos(QosHistory.KEEP_LAST, 1, QosReliability.RELIABLE, QosDurability.TRANSIENT_LOCAL,
                  QosTime(0, 0), QosTime(0, 0), QosLiveliness.AUTOMATIC, QosTime(0, 0), False)
    counts = dict.fromkeys(TOPICS, 0)
    with Writer(folder, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {topic: writer.add_connection(
            topic, msgtype, typestore=store,
            offered_qos_profiles=[latched] if topic in LATCHED else [])
            for topic, msgtype in TOPICS.items()}
        writer.set_custom_data("aiko.gait", str(data.metadata.get("gait_name", "?")))
        writer.set_custom_data("aiko.comparison", json.dumps(_metrics(data)))
        for ns, topic, msg in _messages(data):
            writer.write(conns[topic], ns, store.serialize_cdr(msg, TOPICS[topic]))
            counts[topic] += 1
    return counts


def _messages(data: TrialData) -> Iterator[Item]:
    """Every message of the bag in time order (each source is in time order)."""
    s = _Stamps(data)
    sources = [_trial(data, s), _references(data, s), _states(data, s), _mocap(data, s),
               _model(data, s), _can(data, s, "/can/tx"), _can(data, s, "/can/rx"),
               _events(data, s), diagnostics(data, s)]
    return heapq.merge(*(sorted(src, key=lambda item: item[0]) for src in sources),
                       key=lambda item: item[0])


def _metrics(data: TrialData) -> dict | None:
    comparison = data.records.get("/comparison", [])
    return comparison[-1][1].get("metrics") if comparison else None


def _metrics_t(data: TrialData) -> float | None:
    comparison = data.records.get("/comparison", [])
    return comparison[-1][0] if comparison else None


def _string(text: str):
    return typestore().types["std_msgs/msg/String"](data=text)


def _meta_value(raw):
    """A metadata value: JSON objects and arrays decoded, text as it is (so
    that reading the bag back gives the same strings)."""
    if isinstance(raw, str) and raw[:1] in ("{", "["):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _trial(data: TrialData, s: _Stamps) -> list[Item]:
    t0 = data.span[0] if data.span else 0.0
    payload = {"metadata": {k: _meta_value(v) for k, v in data.metadata.items()},
               "comparison": _metrics(data), "comparison_t": _metrics_t(data),
               "wall_start": data.wall_start(),
               "file": data.path.name, "truncated": data.truncated}
    return [(s.ns(t0), "/trial", _string(json.dumps(payload))),
            (s.ns(t0), "/tf_static", _tf([(s.header(t0, "world"), name, (0.0, 0.0, 0.0))
                                         for name in ("mocap", "model")]))]


def _tf(frames):
    types = typestore().types
    out = []
    for header, child, (x, y, z) in frames:
        out.append(types["geometry_msgs/msg/TransformStamped"](
            header=header, child_frame_id=child,
            transform=types["geometry_msgs/msg/Transform"](
                translation=types["geometry_msgs/msg/Vector3"](x=float(x), y=float(y), z=float(z)),
                rotation=types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0))))
    return types["tf2_msgs/msg/TFMessage"](transforms=out)


def _joint_state(header, names, position, velocity=(), effort=()):
    import numpy as np

    return typestore().types["sensor_msgs/msg/JointState"](
        header=header, name=list(names), position=np.asarray(position, dtype=np.float64),
        velocity=np.asarray(velocity, dtype=np.float64),
        effort=np.asarray(effort, dtype=np.float64))


def _references(data: TrialData, s: _Stamps) -> Iterator[Item]:
    for _, d in data.records.get("/references", []):
        t = d["sent"]
        names: list[str] = []
        pos: list[float] = []
        vel: list[float] = []
        for i, node in enumerate(d["nodes"]):
            names += joint_names(node)
            pos += [d["alpha_h"][i], d["alpha_v"][i]]
            vel += [d["omega_h"][i], d["omega_v"][i]]
        yield s.ns(t), "/joint_references", _joint_state(s.header(t), names, pos, vel)
        period = {k: d.get(k) for k in ("k", "phase", "t_gait", "deadline", "sent", "counter",
                                        "offset")}
        yield s.ns(t), "/reference_periods", _string(json.dumps(period))


def _states(data: TrialData, s: _Stamps) -> Iterator[Item]:
    for t, d in data.records.get("/joint_state", []):
        yield s.ns(t), "/joint_states", _joint_state(
            s.header(t), joint_names(d["node"]), [d["alpha_h"], d["alpha_v"]], (),
            [d["duty_h"], d["duty_v"]])


def _point(header, x, y, z):
    types = typestore().types
    return types["geometry_msgs/msg/PointStamped"](
        header=header, point=types["geometry_msgs/msg/Point"](x=float(x), y=float(y), z=float(z)))


def _mocap(data: TrialData, s: _Stamps) -> Iterator[Item]:
    for t, p in data.tracked():
        yield s.ns(t), "/tf", _tf([(s.header(t, "mocap"), "link6", p)])
        yield s.ns(t), "/link6", _point(s.header(t, "mocap"), *p)


def _model(data: TrialData, s: _Stamps) -> Iterator[Item]:
    for _, d in data.records.get("/model", []):
        t = d["t"]
        links = [(s.header(t, "model"), f"model/link{i + 1}", p)
                 for i, p in enumerate(d.get("positions") or [])]
        if links:
            yield s.ns(t), "/tf", _tf(links)
        yield s.ns(t), "/model/link6", _point(s.header(t, "model"), d["x"], d["y"], d["z"])


def _can(data: TrialData, s: _Stamps, channel: str) -> Iterator[Item]:
    import numpy as np

    make = typestore().types["can_msgs/msg/Frame"]
    for t, ident, payload in data.frames(channel):
        padded = np.zeros(8, dtype=np.uint8)
        padded[:len(payload)] = np.frombuffer(payload, dtype=np.uint8)
        yield s.ns(t), channel, make(header=s.header(t), id=ident, is_rtr=False,
                                     is_extended=False, is_error=False, dlc=len(payload),
                                     data=padded)


def _events(data: TrialData, s: _Stamps) -> Iterator[Item]:
    for t, e in data.records.get("/events", []):
        yield s.ns(t), "/events", _string(json.dumps(e))
