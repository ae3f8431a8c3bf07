"""The fan-out's listeners (:mod:`aiko.experiments.trial.fanout`): the trial log,
and the sinks that publish a trial as it runs (MQTT telemetry, the live page,
Foxglove).

* :class:`TrialLogListener` writes every record to its channel of the trial
  log (/references, /can/tx, /can/rx, /joint_state, /emcy, /mocap, /model,
  /steering, /events, /comparison); it flushes the log whenever a record is
  ``FLUSH_EVERY`` s of trial time past the last flush (the reporter's status
  comes twice a second, so at least that often) and when it stops.
* :class:`PublishListener` turns records into ``publish(topic, payload)``
  calls of a sink that never blocks nor raises. Telemetry (``full=False``)
  gets link 6, the steering, faults, EMCYs, the trial's start, its end with
  the outcome and the comparison's metrics, every other status and, with
  ``model=True``, the model's link 6; a live view (``full=True``) gets all
  of that, every status, the model's and motion capture's links, the
  trial's end as soon as the joints are safe and the comparison.
* :class:`TelemetryListener`: a :class:`PublishListener` that also starts
  and stops its sink (MQTT: connect with a last will; at the end publish
  what is queued, then offline).
"""

from __future__ import annotations

from functools import singledispatchmethod

from aiko.drivers.messages import (
    Comparison,
    EmcyMessage,
    FaultMessage,
    Link6,
    MocapLinks,
    ModelLink6,
    StatusUpdate,
    SteeringUpdate,
    TrialEnd,
    TrialStart,
)
from aiko.experiments.files.triallog import frame_record

from .fanout import (
    Compared,
    EmcyReceived,
    Event,
    FrameReceived,
    FrameSent,
    MocapRecord,
    ModelSampled,
    PeriodSent,
    Record,
    StateReceived,
    Status,
    SteeringPeriod,
    TrialEnded,
    TrialOutcome,
    TrialStarted,
)

__all__ = ["TrialLogListener", "PublishListener", "TelemetryListener", "FLUSH_EVERY"]

FLUSH_EVERY = 0.5
"""Trial time between two flushes of the trial log, s."""

_NO_MOCAP = {"frame": None, "x": None, "y": None, "z": None, "occluded": True, "stale": True,
             "latency": None, "t_receive": None}


class TrialLogListener:
    """Writes the records to the trial log (``write(channel, t, record)`` and
    ``flush()``, :class:`aiko.experiments.files.triallog.TrialLog`)."""

    def __init__(self, trial_log) -> None:
        self.log = trial_log
        self._flushed = -float("inf")
        # bound once: singledispatchmethod builds a new wrapper at every access
        self._record = self._write

    async def start(self) -> None:
        """The log is open already (its owner opened it)."""

    async def stop(self) -> None:
        self.log.flush()

    def on_record(self, record: Record) -> None:
        self._record(record)
        if record.t >= self._flushed + FLUSH_EVERY:
            self.log.flush()
            self._flushed = record.t

    @singledispatchmethod
    def _write(self, record: Record) -> None:
        """Records without a channel are not logged."""

    @_write.register
    def _(self, r: PeriodSent) -> None:
        rec = r.rec
        self.log.write("/references", rec.sent, {
            "k": rec.k, "phase": rec.phase, "t_gait": rec.t_gait, "deadline": rec.deadline,
            "sent": rec.sent, "counter": rec.counter, "nodes": r.nodes,
            "alpha_h": rec.refs[:, 0].tolist(), "alpha_v": rec.refs[:, 1].tolist(),
            "omega_h": rec.refs[:, 2].tolist(), "omega_v": rec.refs[:, 3].tolist(),
            "offset": rec.offset})

    @_write.register
    def _(self, r: FrameReceived) -> None:
        out = {"id": r.rx.arbitration_id, "data": r.rx.data.hex()}
        if r.error:
            out["error"] = r.error
        self.log.write("/can/rx", r.rx.t, out)

    @_write.register
    def _(self, r: StateReceived) -> None:
        self.log.write("/joint_state", r.t, frame_record(r.frame))

    @_write.register
    def _(self, r: EmcyReceived) -> None:
        self.log.write("/emcy", r.t, frame_record(r.frame))

    @_write.register
    def _(self, r: MocapRecord) -> None:
        s = r.sample
        if s is None:
            self.log.write("/mocap", r.t, dict(_NO_MOCAP))
            return
        x, y, z = s.position if s.position is not None else (None, None, None)
        self.log.write("/mocap", r.t, {"frame": s.frame, "x": x, "y": y, "z": z,
                                       "occluded": s.occluded, "stale": s.stale,
                                       "latency": s.latency, "t_receive": s.t_receive})

    @_write.register
    def _(self, r: ModelSampled) -> None:
        self.log.write("/model", r.t, _model_payload(r))

    @_write.register
    def _(self, r: SteeringPeriod) -> None:
        self.log.write("/steering", r.t, r.data)

    @_write.register
    def _(self, r: Event) -> None:
        self.log.write("/events", r.t, {"kind": r.kind, "data": r.data})

    @_write.register
    def _(self, r: FrameSent) -> None:
        self.log.write("/can/tx", r.t, {"id": r.arbitration_id, "data": r.data.hex()})

    @_write.register
    def _(self, r: Compared) -> None:
        self.log.write("/comparison", r.t, {"metrics": r.metrics, "figure": r.figure,
                                            "json": r.json})

    @_write.register
    def _(self, r: TrialStarted) -> None:
        self.log.write("/events", r.t, {"kind": "trial_start", "data": {
            "nodes": r.nodes, "gait": r.gait, "wall_start": r.wall_start}})

    @_write.register
    def _(self, r: TrialEnded) -> None:
        self.log.write("/events", r.t, {"kind": "trial_end", "data": {
            "reason": r.reason, "fault": None if r.fault is None else r.fault.reason}})

    @_write.register
    def _(self, r: TrialOutcome) -> None:
        self.log.write("/events", r.t, {"kind": "outcome", "data": {
            "reason": r.reason, "fault": _fault(r.fault), "compared": r.metrics is not None,
            "comparison_error": r.comparison_error}})


class PublishListener:
    """Publishes records as messages (:mod:`aiko.drivers.messages`) to a sink's
    ``publish(message)``; ``full``: a live view (everything) rather than
    telemetry; ``model``: telemetry gets the model's link 6 too (see the
    module docstring)."""

    def __init__(self, sink, *, full: bool, model: bool = False) -> None:
        self.sink = sink
        self.full = full
        self.model = model

    async def start(self) -> None:
        """The sink is served by its owner (the live page and Foxglove serve
        before and after the trial)."""

    async def stop(self) -> None:
        """As :meth:`start`."""

    @singledispatchmethod
    def on_record(self, record: Record) -> None:
        """Records that are not published."""

    @on_record.register
    def _(self, r: MocapRecord) -> None:
        s = r.sample
        if s is None or s.stale:
            return
        x, y, z = s.position if s.position is not None else (None, None, None)
        self.sink.publish(Link6(r.t, s.frame, x, y, z))
        if self.full and len(r.links) > 1:
            self.sink.publish(MocapLinks(r.t, s.frame, tuple(
                tuple(r.links[i]) for i in sorted(r.links))))

    @on_record.register
    def _(self, r: ModelSampled) -> None:
        if not (self.full or self.model):
            return
        p = r.point
        positions = tuple(tuple(q) for q in r.positions.tolist()) if self.full else None
        self.sink.publish(ModelLink6(r.t, float(p[0]), float(p[1]), float(p[2]), r.lag,
                                     positions))

    @on_record.register
    def _(self, r: EmcyReceived) -> None:
        f = r.frame
        self.sink.publish(EmcyMessage(r.t, f.node, int(f.error_code), int(f.error_register),
                                      int(f.motor)))

    @on_record.register
    def _(self, r: SteeringPeriod) -> None:
        d = r.data
        self.sink.publish(SteeringUpdate(
            r.t, d.get("t_gait"), d["mode"], d["offset"], d.get("heading"), d.get("target"),
            d.get("x"), d.get("y"), d.get("cross_track"), d.get("segment"), d.get("age"),
            d.get("tracked")))

    @on_record.register
    def _(self, r: Event) -> None:
        if r.kind == "fault":
            self.sink.publish(FaultMessage(r.t, r.data.get("fault"), r.data.get("node"),
                                           r.data.get("reason")))

    @on_record.register
    def _(self, r: Status) -> None:
        if self.full or r.k % 2 == 0:
            s = r.snapshot
            self.sink.publish(StatusUpdate(s["t"], s["phase"], s["periods"], s["late"],
                                           s["missed"], s["nodes_ok"], s["nodes"],
                                           s.get("model_lag")))

    @on_record.register
    def _(self, r: TrialStarted) -> None:
        st = r.steering
        self.sink.publish(TrialStart(
            r.t, r.gait, None if st is None else st.mode, None if st is None else st.heading,
            None if st is None else st.waypoints))

    @on_record.register
    def _(self, r: TrialEnded) -> None:
        if self.full:   # telemetry has it with the metrics (TrialOutcome)
            self.sink.publish(TrialEnd(r.t, r.reason, _fault(r.fault)))

    @on_record.register
    def _(self, r: Compared) -> None:
        if self.full:
            self.sink.publish(Comparison(r.metrics))

    @on_record.register
    def _(self, r: TrialOutcome) -> None:
        if not self.full:   # the views had the end already, and the comparison
            self.sink.publish(TrialEnd(r.t, r.reason, _fault(r.fault), r.metrics,
                                       r.comparison_error))


class TelemetryListener(PublishListener):
    """Telemetry (``full=False``) whose sink it starts and stops:
    :class:`aiko.drivers.telemetry.MqttTelemetry`, whose ``start`` connects in
    the background and whose ``stop`` publishes what is queued and leaves."""

    def __init__(self, telemetry, *, model: bool = False) -> None:
        super().__init__(telemetry, full=False, model=model)

    async def start(self) -> None:
        await self.sink.start()

    async def stop(self) -> None:
        await self.sink.stop()


def _fault(fault) -> dict | None:
    """A trial fault as the outcome gives it."""
    if fault is None:
        return None
    return {"kind": fault.kind, "node": fault.node, "reason": fault.reason}


def _model_payload(r: ModelSampled) -> dict:
    p = r.point
    return {"t": r.t, "x": float(p[0]), "y": float(p[1]), "z": float(p[2]), "lag": r.lag,
            "positions": r.positions.tolist()}
