"""The trial's records and the one fan-out that hands each to its listeners.

Every part of a trial that makes something worth keeping or showing (the
streamer's periods, the CAN dispatcher's frames and joint states, the mocap
sink's samples, the parallel model's samples, the steering's periods, events,
the reporter's status) emits one record to the trial's :class:`Fanout`; the
fan-out calls ``on_record(record)`` of every listener in the order they were
added, as python-can's ``Notifier`` hands each frame to its ``Listener``\\ s.
Listeners decide for themselves what to do with each kind of record
(:mod:`aiko.experiments.trial.listeners`: the trial log, MQTT telemetry, the
live page and Foxglove).

Adding a listener (a ROS 2 bridge, say) is one class with
``on_record(record)`` (``functools.singledispatchmethod`` on the record types
it cares about, the rest ignored) and one line in
:func:`aiko.experiments.trial.runner.run_trial`'s wiring::

    fanout.add(Ros2Bridge(node))

``on_record`` runs on the event loop in the middle of the trial: it must not
block; an exception it raises ends the trial like any other service's.

Records are frozen dataclasses; every one has ``t``, the trial clock's time
(s) it belongs to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from aiko.control.steering import SteeringConfig
from aiko.control.streamer import PeriodRecord
from aiko.control.supervisor import TrialFault
from aiko.drivers.mocap import MocapSample
from aiko.firmware_interface.codec import Emcy, JointState

__all__ = ["Fanout", "Listener", "Record", "PeriodSent", "FrameReceived", "StateReceived",
           "EmcyReceived", "MocapRecord", "ModelSampled", "SteeringPeriod", "Event", "Status",
           "TrialStarted", "TrialEnded"]


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
    t: float
    reason: str
    fault: TrialFault | None


class Listener(Protocol):
    def on_record(self, record: Record) -> None: ...


class Fanout:
    """Hands every record to every listener, in the order they were added."""

    def __init__(self, listeners: Iterable[Listener] = ()) -> None:
        self._listeners: list[Listener] = list(listeners)

    def add(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def emit(self, record: Record) -> None:
        for listener in self._listeners:
            listener.on_record(record)

    def event(self, t: float, kind: str, data: dict) -> None:
        """Emit an :class:`Event` (the supervisor's and the model's ``on_event``)."""
        self.emit(Event(t, kind, data))
