"""A trial log in other formats, and what it holds.

* :func:`export_csv`: one CSV per channel (references with one column per
  node and quantity and the steering offset, joint states, EMCY, motion
  capture, the parallel model's link 6, the steering, events with their data
  as JSON), times in s on the trial clock;
* :func:`export_can`: the raw CAN frames (/can/tx and /can/rx, in time
  order) through python-can's own log writers, Vector ASC or BLF, so CAN tools
  open them; time stamps are the wall clock of the trial's start plus the
  trial clock;
* :func:`trial_info`: gait, rig, duration, counts per channel, faults, phases,
  the stored comparison and, for a steered trial, its steering metrics, as a dict.

Reading never executes anything from the file (:func:`read_trial`).
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable
from pathlib import Path

import can

from aiko.experiments.files.triallog import LoggedFrame, TrialData

__all__ = ["export_csv", "export_can", "trial_info", "INFO_TOPICS", "CAN_TOPICS", "can_messages",
           "CSV_CHANNELS", "REFERENCE_COLUMNS", "JOINT_COLUMNS", "EVENT_COLUMNS",
           "FORMATS"]

FORMATS = ("csv", "asc", "blf")


def _message(frame: LoggedFrame, wall_start: float) -> can.Message:
    t, channel, ident, payload = frame
    return can.Message(timestamp=wall_start + t, arbitration_id=ident, is_extended_id=False,
                       data=payload, is_rx=channel == "/can/rx", channel=1)


def can_messages(data: TrialData) -> list[can.Message]:
    """Every logged CAN frame as a python-can Message (time order; rx/tx set)."""
    t0 = data.wall_start()
    return [_message(f, t0) for f in data.can_frames()]


def export_can(frames: Iterable[LoggedFrame], wall_start: float, path: Path) -> int:
    """Write ``frames`` (time order; :meth:`TrialData.can_frames`, or
    :func:`~aiko.experiments.files.triallog.stream_frames` for a long trial)
    to ``path`` (.asc or .blf) through python-can's writer, time stamps
    ``wall_start`` + the trial clock; the number written. Written beside the
    target and moved into place: a failure leaves no partial file."""
    path = Path(path)
    writer_cls = {".asc": can.ASCWriter, ".blf": can.BLFWriter}[path.suffix.lower()]
    part = path.with_name(f".{path.name}.part")
    n = 0
    try:
        writer = writer_cls(str(part))
        try:
            for frame in frames:
                writer.on_message_received(_message(frame, wall_start))
                n += 1
        finally:
            writer.stop()
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return n


def _write(path: Path, header: list[str], rows) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


REFERENCE_COLUMNS = ("t", "phase", "k", "t_gait", "counter", "offset")
"""``STEM-references.csv``'s first columns; then, for each node N, the
references of :data:`JOINT_COLUMNS` as ``alpha_h_N``, ..."""

JOINT_COLUMNS = ("alpha_h", "alpha_v", "omega_h", "omega_v")

CSV_CHANNELS = {
    "/joint_state": ("joint_state", ("node", "alpha_h", "alpha_v", "duty_h", "duty_v",
                                     "status", "sync_echo")),
    "/emcy": ("emcy", ("node", "error_code", "error_register", "motor")),
    "/mocap": ("mocap", ("frame", "x", "y", "z", "occluded", "stale", "latency", "t_receive")),
    "/model": ("model", ("t", "x", "y", "z", "lag")),
    "/steering": ("steering", ("t_gait", "mode", "offset", "heading", "target", "x", "y",
                               "cross_track", "segment", "age", "tracked")),
}
"""The channels written one record a row as ``STEM-NAME.csv``: channel ->
(NAME, the record's fields after the log stamp ``t_log``)."""

EVENT_COLUMNS = ("t", "kind", "data")
"""``STEM-events.csv``: the stamp, the event's kind and its data as JSON."""


def export_csv(data: TrialData, folder: Path, stem: str) -> list[Path]:
    """One CSV per channel present into ``folder`` (``STEM-CHANNEL.csv``; the
    columns: :data:`REFERENCE_COLUMNS`, :data:`CSV_CHANNELS`,
    :data:`EVENT_COLUMNS`)."""
    folder = Path(folder)
    written = []
    refs = data.records.get("/references", [])
    if refs:
        nodes = refs[0][1].get("nodes", [])
        cols = [f"{q}_{n}" for n in nodes for q in JOINT_COLUMNS]
        rows = []
        for t, d in refs:
            vals = []
            for i in range(len(nodes)):
                vals += [d[q][i] for q in JOINT_COLUMNS]
            rows.append([t, d.get("phase", "gait"), d["k"], d.get("t_gait"), d["counter"],
                         d.get("offset", 0.0), *vals])
        written.append(_write(folder / f"{stem}-references.csv", [*REFERENCE_COLUMNS, *cols],
                              rows))
    for channel, (name, keys) in CSV_CHANNELS.items():
        recs = data.records.get(channel, [])
        if recs:
            written.append(_write(folder / f"{stem}-{name}.csv", ["t_log", *keys],
                                  ([t, *(d.get(k) for k in keys)] for t, d in recs)))
    events = data.records.get("/events", [])
    if events:
        written.append(_write(folder / f"{stem}-events.csv", list(EVENT_COLUMNS),
                              ([t, d.get("kind"), json.dumps(d.get("data"))]
                               for t, d in events)))
    return written


CAN_TOPICS = ("/events",)
"""The channels a CAN export reads whole (the trial's wall-clock start is in
its events); the frames themselves are streamed
(:func:`~aiko.experiments.files.triallog.stream_frames`)."""

INFO_TOPICS = ("/events", "/references", "/comparison", "/steering")
"""The channels :func:`trial_info` reads; the others it counts (``read_trial(path,
INFO_TOPICS)`` keeps a long trial's CAN frames and samples out of memory)."""


def trial_info(data: TrialData) -> dict:
    """What a trial holds (see the module docstring)."""
    def meta(key, default=None):
        raw = data.metadata.get(key)
        if isinstance(raw, str):
            try:
                return json.loads(raw)
            except ValueError:
                return raw
        return default if raw is None else raw

    config = meta("config", {}) or {}
    ends = data.events("trial_end")
    comparison = data.records.get("/comparison", [])
    return {
        "file": str(data.path), "complete": data.complete,
        "gait": meta("gait_name", "?"), "rig": config.get("rig"),
        "nodes": config.get("nodes"), "software_version": meta("software_version"),
        "git_revision": meta("git_revision"),
        "duration_s": (data.span[1] - data.span[0]) if data.span else 0.0,
        "gait_periods": len(data.references("gait")[0]),
        "channels": dict(sorted(data.counts.items())),
        "phases": [e["data"].get("phase") for _, e in data.events("phase")],
        "faults": [e["data"] for _, e in data.events("fault")],
        "end": ends[-1][1]["data"].get("reason") if ends else None,
        "comparison": comparison[-1][1].get("metrics") if comparison else None,
        "steering": _steering(data),
        "scene": _scene(meta("scene")),
        "attachments": sorted(data.attachments),
    }


def _scene(raw) -> str | None:
    """The logged scene in one line (None: a log from before scenes; "flat
    floor" when it had none)."""
    if raw is None:
        return None
    from aiko.experiments.files.scene_file import scene_from_json
    from aiko.model.scene import SceneError
    try:
        return scene_from_json(raw).describe()
    except (SceneError, TypeError, ValueError) as exc:
        return f"unreadable ({exc})"


def _steering(data: TrialData) -> dict | None:
    from aiko.experiments.analysis.steering_report import steering_metrics, steering_series

    series = steering_series(data)
    return None if series is None else steering_metrics(series)
