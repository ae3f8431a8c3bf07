"""The trial's records and the one fan-out that hands each to its listeners.

Every part of a session that makes something worth keeping or showing (the
session's preflight and processes, the streamer's periods, the CAN driver's
frames sent, the CAN dispatcher's frames and joint states received, the mocap
sink's samples, the parallel model's samples, the steering's periods, events,
the reporter's status, the comparison, the outcome) emits one record to the
session's :class:`Fanout`; the fan-out calls ``on_record(record)`` of every
listener in the order they were added, as python-can's ``Notifier`` hands
each frame to its ``Listener``\\ s. Listeners decide for themselves what to
do with each kind of record (:mod:`aiko.experiments.trial.listeners`: the
trial log, MQTT telemetry, the live page and Foxglove). Nothing else writes
the trial log or publishes.

The fan-out is an async context manager: entering it starts every listener
(``await listener.start()``: MQTT connects), leaving it stops them in the
reverse order (``await listener.stop()``: each flushes what it holds). A
listener (a ROS 2 bridge, say) is one class with ``on_record(record)``
(``functools.singledispatchmethod`` on the record types it cares about, the
rest ignored), ``start()`` and ``stop()``, added before the session starts::

    fanout.add(Ros2Bridge(node))

``on_record`` runs on the event loop in the middle of the trial: it must not
block; an exception it raises ends the trial like any other service's.

Records are frozen dataclasses; every one has ``t``, the trial clock's time
(s) it belongs to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Protocol

import numpy as np

from aiko.control.steering import SteeringConfig
from aiko.control.streamer import PeriodRecord
from aiko.control.supervisor import TrialFault
from aiko.drivers.mocap import MocapSample
from aiko.firmware_interface.codec import Emcy, JointState

__all__ = ["Fanout", "Listener", "Record", "PeriodSent", "FrameSent", "FrameReceived",
           "StateReceived", "EmcyReceived", "MocapRecord", "ModelSampled", "SteeringPeriod",
           "Event", "Status", "TrialStarted", "TrialEnded", "Compared", "TrialOutcome",
           "EndReason", "RECORD_KINDS"]

EndReason = Literal["completed", "fault", "interrupted", "nodes_missing"]
"""Why a trial ended: its duration ran out; the supervisor stopped it; Ctrl-C,
SIGTERM or a cancelled task; expected joint modules never sent a heartbeat."""


class Record:
    """Base of the trial's records (each a frozen dataclass with ``t``)."""

    __slots__ = ()
    t: float


@dataclass(frozen=True, slots=True)
class PeriodSent(Record):
    """One period of references sent (REF frames and SYNC), any phase."""

    rec: PeriodRecord
    nodes: list[int]

    @property
    def t(self) -> float:  # type: ignore[override]
        return self.rec.sent


@dataclass(frozen=True, slots=True)
class FrameSent(Record):
    """One CAN frame written to the bus (``arbitration_id``, ``data``)."""

    t: float
    arbitration_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class FrameReceived(Record):
    """One CAN frame received (``rx``: the driver's received frame, ``rx.t``
    its time); ``error``: why it did not decode, if it did not."""

    rx: Any
    error: str | None = None

    @property
    def t(self) -> float:  # type: ignore[override]
        return self.rx.t


@dataclass(frozen=True, slots=True)
class StateReceived(Record):
    """A joint module's STATE reply, decoded."""

    t: float
    frame: JointState


@dataclass(frozen=True, slots=True)
class EmcyReceived(Record):
    """A joint module's EMCY frame, decoded."""

    t: float
    frame: Emcy


@dataclass(frozen=True, slots=True)
class MocapRecord(Record):
    """One motion-capture sample as the logger took it (None: no frame yet);
    ``links``: ``{N: (x, y, z)}`` of the ``linkN`` objects of its frame where
    someone wants them (steering, live views), else empty."""

    t: float
    sample: MocapSample | None
    links: dict[int, tuple] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelSampled(Record):
    """The parallel model's links at ``t``: ``positions`` (N, 3) m, ``point``
    the compared link's (3,), ``lag`` how far the model ran behind, s."""

    t: float
    positions: np.ndarray
    point: np.ndarray
    lag: float


@dataclass(frozen=True, slots=True)
class SteeringPeriod(Record):
    """The steering loop's record of one gait period (its ``to_dict`` with
    ``t_gait`` and ``tracked``)."""

    t: float
    data: dict


@dataclass(frozen=True, slots=True)
class Event(Record):
    """Something that happened: a phase, a fault, a node's state, a ramp's end,
    the model's news (``kind`` and its ``data``, as in the log's /events)."""

    t: float
    kind: str
    data: dict


@dataclass(frozen=True, slots=True)
class Status(Record):
    """The reporter's snapshot, twice a second; ``k`` counts them from 1."""

    t: float
    snapshot: dict
    k: int


@dataclass(frozen=True, slots=True)
class TrialStarted(Record):
    t: float
    gait: str
    nodes: list[int]
    wall_start: float | None
    steering: SteeringConfig | None


@dataclass(frozen=True, slots=True)
class TrialEnded(Record):
    """The trial is over and the joints are in the safe state (the comparison
    is not made yet: :class:`TrialOutcome` follows it)."""

    t: float
    reason: EndReason
    fault: TrialFault | None


@dataclass(frozen=True, slots=True)
class Compared(Record):
    """The comparison at the trial's end: ``metrics``
    (:func:`aiko.experiments.analysis.compare.compare_paths`) and the names of
    the figure and JSON files written beside the log ("" when not written)."""

    t: float
    metrics: dict
    figure: str
    json: str


@dataclass(frozen=True, slots=True)
class TrialOutcome(Record):
    """The session's last record: how the trial ended, its fault, and the
    comparison's metrics (None without one; ``comparison_error`` says why)."""

    t: float
    reason: EndReason
    fault: TrialFault | None
    metrics: dict | None
    comparison_error: str | None = None


RECORD_KINDS: tuple[type[Record], ...] = (
    TrialStarted, PeriodSent, FrameSent, FrameReceived, StateReceived, EmcyReceived,
    MocapRecord, ModelSampled, SteeringPeriod, Event, Status, TrialEnded, Compared,
    TrialOutcome)
"""Every kind of record, in about the order a session makes them."""


class Listener(Protocol):
    """What the fan-out hands records to (module docstring)."""

    def on_record(self, record: Record) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Fanout:
    """Hands every record to every listener, in the order they were added;
    as an async context manager, starts them all and stops them all."""

    def __init__(self, listeners: Iterable[Listener] = ()) -> None:
        self._listeners: list[Listener] = list(listeners)
        self._started: list[Listener] | None = None

    def add(self, listener: Listener) -> None:
        if self._started is not None:
            raise RuntimeError("a listener is added before the fan-out starts")
        self._listeners.append(listener)

    async def __aenter__(self) -> Fanout:
        self._started = []
        try:
            for listener in self._listeners:
                await listener.start()
                self._started.append(listener)
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._stop()

    async def _stop(self) -> None:
        """Stop the started listeners, the last first; each one is stopped even
        when another's stop fails (the first failure is raised after)."""
        started, self._started = self._started or [], None
        failure: BaseException | None = None
        for listener in reversed(started):
            try:
                await listener.stop()
            except Exception as exc:  # noqa: BLE001 - raised once all are stopped
                failure = failure or exc
        if failure is not None:
            raise failure

    def emit(self, record: Record) -> None:
        for listener in self._listeners:
            listener.on_record(record)

    def event(self, t: float, kind: str, data: dict) -> None:
        """Emit an :class:`Event` (the supervisor's and the model's ``on_event``)."""
        self.emit(Event(t, kind, data))
