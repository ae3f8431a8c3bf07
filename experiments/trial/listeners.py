"""The fan-out's listeners (:mod:`aiko.experiments.trial.fanout`): the trial log,
and the sinks that publish a trial as it runs (MQTT telemetry, the live page,
Foxglove).

* :class:`TrialLogListener` writes every record to its channel of the trial
  log (/references, /can/rx, /joint_state, /emcy, /mocap, /model, /steering,
  /events) and flushes the log with every status (twice a second).
* :class:`PublishListener` turns records into ``publish(topic, payload)``
  calls of a sink that never blocks nor raises. Telemetry (``full=False``)
  gets the link, the steering, faults, the trial's start and every other
  status; a live view (``full=True``) gets all of that, every status, the
  model's and motion capture's links and the trial's end.
"""

from __future__ import annotations

from functools import singledispatchmethod

from aiko.experiments.files.triallog import frame_record

from .fanout import (
    EmcyReceived,
    Event,
    FrameReceived,
    MocapRecord,
    ModelSampled,
    PeriodSent,
    Record,
    StateReceived,
    Status,
    SteeringPeriod,
    TrialEnded,
    TrialStarted,
)

__all__ = ["TrialLogListener", "PublishListener"]

_NO_MOCAP = {"frame": None, "x": None, "y": None, "z": None, "occluded": True, "stale": True,
             "latency": None, "t_receive": None}


class TrialLogListener:
    """Writes the records to the trial log (``write(channel, t, record)`` and
    ``flush()``, :class:`aiko.experiments.files.triallog.TrialLog`)."""

    def __init__(self, trial_log) -> None:
        self.log = trial_log

    @singledispatchmethod
    def on_record(self, record: Record) -> None:
        """Records without a channel are not logged."""

    @on_record.register
    def _(self, r: PeriodSent) -> None:
        rec = r.rec
        self.log.write("/references", rec.sent, {
            "k": rec.k, "phase": rec.phase, "t_gait": rec.t_gait, "deadline": rec.deadline,
            "sent": rec.sent, "counter": rec.counter, "nodes": r.nodes,
            "alpha_h": rec.refs[:, 0].tolist(), "alpha_v": rec.refs[:, 1].tolist(),
            "omega_h": rec.refs[:, 2].tolist(), "omega_v": rec.refs[:, 3].tolist(),
            "offset": rec.offset})

    @on_record.register
    def _(self, r: FrameReceived) -> None:
        out = {"id": r.rx.arbitration_id, "data": r.rx.data.hex()}
        if r.error:
            out["error"] = r.error
        self.log.write("/can/rx", r.rx.t, out)

    @on_record.register
    def _(self, r: StateReceived) -> None:
        self.log.write("/joint_state", r.t, frame_record(r.frame))

    @on_record.register
    def _(self, r: EmcyReceived) -> None:
        self.log.write("/emcy", r.t, frame_record(r.frame))

    @on_record.register
    def _(self, r: MocapRecord) -> None:
        s = r.sample
        if s is None:
            self.log.write("/mocap", r.t, dict(_NO_MOCAP))
            return
        x, y, z = s.position if s.position is not None else (None, None, None)
        self.log.write("/mocap", r.t, {"frame": s.frame, "x": x, "y": y, "z": z,
                                       "occluded": s.occluded, "stale": s.stale,
                                       "latency": s.latency, "t_receive": s.t_receive})

    @on_record.register
    def _(self, r: ModelSampled) -> None:
        self.log.write("/model", r.t, _model_payload(r))

    @on_record.register
    def _(self, r: SteeringPeriod) -> None:
        self.log.write("/steering", r.t, r.data)

    @on_record.register
    def _(self, r: Event) -> None:
        self.log.write("/events", r.t, {"kind": r.kind, "data": r.data})

    @on_record.register
    def _(self, r: Status) -> None:
        self.log.flush()  # at least twice a second, even when nothing is written

    @on_record.register
    def _(self, r: TrialStarted) -> None:
        self.log.write("/events", r.t, {"kind": "trial_start", "data": {
            "nodes": r.nodes, "gait": r.gait, "wall_start": r.wall_start}})

    @on_record.register
    def _(self, r: TrialEnded) -> None:
        self.log.write("/events", r.t, {"kind": "trial_end", "data": {
            "reason": r.reason, "fault": None if r.fault is None else r.fault.reason}})


class PublishListener:
    """Publishes records to a sink's ``publish(topic, payload)``; ``full``: a
    live view (everything) rather than telemetry (see the module docstring)."""

    def __init__(self, sink, *, full: bool) -> None:
        self.sink = sink
        self.full = full

    @singledispatchmethod
    def on_record(self, record: Record) -> None:
        """Records that are not published."""

    @on_record.register
    def _(self, r: MocapRecord) -> None:
        s = r.sample
        if s is None or s.stale:
            return
        if s.position is not None:
            x, y, z = s.position
            self.sink.publish("link6", {"t": r.t, "frame": s.frame, "x": x, "y": y, "z": z})
        else:
            self.sink.publish("link6", {"t": r.t, "frame": s.frame, "occluded": True})
        if self.full and len(r.links) > 1:
            self.sink.publish("mocap_links", {
                "t": r.t, "frame": s.frame,
                "positions": [list(r.links[i]) for i in sorted(r.links)]})

    @on_record.register
    def _(self, r: ModelSampled) -> None:
        if self.full:
            self.sink.publish("model", _model_payload(r))

    @on_record.register
    def _(self, r: SteeringPeriod) -> None:
        self.sink.publish("steering", r.data)

    @on_record.register
    def _(self, r: Event) -> None:
        if r.kind == "fault":
            self.sink.publish("fault", {"t": r.t, "kind": r.data.get("fault"),
                                        "node": r.data.get("node"),
                                        "reason": r.data.get("reason")})

    @on_record.register
    def _(self, r: Status) -> None:
        if self.full or r.k % 2 == 0:
            self.sink.publish("status", {k: v for k, v in r.snapshot.items() if k != "link6"})

    @on_record.register
    def _(self, r: TrialStarted) -> None:
        st = r.steering
        self.sink.publish("event", {
            "t": r.t, "kind": "trial_start", "gait": r.gait,
            "steering": None if st is None else st.mode,
            "heading_target": None if st is None else st.heading,
            "waypoints": None if st is None else st.waypoints})

    @on_record.register
    def _(self, r: TrialEnded) -> None:
        if self.full:
            self.sink.publish("event", {"t": r.t, "kind": "trial_end", "reason": r.reason,
                                        "fault": None if r.fault is None else str(r.fault)})


def _model_payload(r: ModelSampled) -> dict:
    p = r.point
    return {"t": r.t, "x": float(p[0]), "y": float(p[1]), "z": float(p[2]), "lag": r.lag,
            "positions": r.positions.tolist()}
