"""The messages a running trial publishes to its viewers and its broker: one
frozen dataclass per kind, each with its ``topic``, its JSON ``payload()``
and the JSON schema of that payload (:attr:`Message.SCHEMA`).

MQTT telemetry (:mod:`.telemetry`) sends ``payload()`` under
``PREFIX/TRIAL/topic``; the live page (:mod:`.live`) and Foxglove
(:mod:`.foxglove_view`) take each kind by its type. The trial's publishing
listener (:mod:`aiko.experiments.trial.listeners`) makes them from the trial's
records. Every schema is checked against what the messages give in the tests,
and the documentation's topic table is generated from them.

Units: s, m, rad; ``t`` on the trial clock.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

__all__ = ["Message", "Link6", "ModelLink6", "MocapLinks", "SteeringUpdate", "StatusUpdate",
           "FaultMessage", "EmcyMessage", "TrialStart", "TrialEnd", "Comparison",
           "MESSAGE_KINDS", "finite"]

_NUM = {"type": "number"}
_INT = {"type": "integer"}
_STR = {"type": "string"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_INT_OR_NULL = {"type": ["integer", "null"]}
_STR_OR_NULL = {"type": ["string", "null"]}
_POINTS = {"type": "array", "items": {"type": "array", "items": _NUM}}


def finite(v: Any) -> Any:
    """None for NaN and infinities (what JSON cannot say); anything else as it is."""
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


class Message:
    """Base of the published messages: ``topic`` and ``SCHEMA`` per kind,
    ``payload()`` the JSON object (by default the fields)."""

    __slots__ = ()
    topic: ClassVar[str]
    SCHEMA: ClassVar[dict]
    about: ClassVar[str]

    def payload(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


def _schema(title: str, props: dict, required: tuple[str, ...] | None = None) -> dict:
    return {"title": f"aiko.{title}", "type": "object", "properties": props,
            "required": list(props if required is None else required)}


@dataclass(frozen=True, slots=True)
class Link6(Message):
    """Link 6 from motion capture: its position, or occluded (x, y, z None)."""

    topic: ClassVar[str] = "link6"
    about: ClassVar[str] = "link 6 from motion capture, every sample (occluded: no position)"
    SCHEMA: ClassVar[dict] = _schema("Link6", {
        "t": _NUM, "frame": _INT_OR_NULL, "x": _NUM_OR_NULL, "y": _NUM_OR_NULL,
        "z": _NUM_OR_NULL, "occluded": {"type": "boolean"}})

    t: float
    frame: int | None
    x: float | None
    y: float | None
    z: float | None

    @property
    def occluded(self) -> bool:
        return self.x is None

    def payload(self) -> dict[str, Any]:
        return {"t": self.t, "frame": self.frame, "x": self.x, "y": self.y, "z": self.z,
                "occluded": self.occluded}


@dataclass(frozen=True, slots=True)
class ModelLink6(Message):
    """The parallel model's link 6 and its lag behind the trial; ``positions``
    every link's (n, 3) for the views (None for telemetry)."""

    topic: ClassVar[str] = "model"
    about: ClassVar[str] = ("the parallel model's link 6 and its lag at the mocap rate, when "
                            "asked (`--mqtt-model`); `positions` (every link) to live views only")
    SCHEMA: ClassVar[dict] = _schema("ModelLink6", {
        "t": _NUM, "x": _NUM, "y": _NUM, "z": _NUM, "lag": _NUM, "positions": _POINTS},
        ("t", "x", "y", "z", "lag"))

    t: float
    x: float
    y: float
    z: float
    lag: float
    positions: tuple[tuple[float, float, float], ...] | None = None

    def payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": self.t, "x": self.x, "y": self.y, "z": self.z,
                               "lag": self.lag}
        if self.positions is not None:
            out["positions"] = [list(p) for p in self.positions]
        return out


@dataclass(frozen=True, slots=True)
class MocapLinks(Message):
    """Every link motion capture tracks in one frame (views only)."""

    topic: ClassVar[str] = "mocap_links"
    about: ClassVar[str] = "every tracked link of a motion-capture frame (live views only)"
    SCHEMA: ClassVar[dict] = _schema("MocapLinks", {"t": _NUM, "frame": _INT_OR_NULL,
                                                    "positions": _POINTS})

    t: float
    frame: int | None
    positions: tuple[tuple[float, float, float], ...]

    def payload(self) -> dict[str, Any]:
        return {"t": self.t, "frame": self.frame, "positions": [list(p) for p in self.positions]}


@dataclass(frozen=True, slots=True)
class SteeringUpdate(Message):
    """One gait period of a steered trial (the log's /steering record)."""

    topic: ClassVar[str] = "steering"
    about: ClassVar[str] = "a steered trial, every gait period: mode, offset, heading, target"
    SCHEMA: ClassVar[dict] = _schema("SteeringUpdate", {
        "t": _NUM, "t_gait": _NUM_OR_NULL, "mode": _STR, "offset": _NUM,
        "heading": _NUM_OR_NULL, "target": _NUM_OR_NULL, "x": _NUM_OR_NULL,
        "y": _NUM_OR_NULL, "cross_track": _NUM_OR_NULL, "segment": _INT_OR_NULL,
        "age": _NUM_OR_NULL, "tracked": _STR_OR_NULL})

    t: float
    t_gait: float | None
    mode: str
    offset: float
    heading: float | None
    target: float | None
    x: float | None
    y: float | None
    cross_track: float | None
    segment: int | None
    age: float | None
    tracked: str | None


@dataclass(frozen=True, slots=True)
class StatusUpdate(Message):
    """The trial's status (twice a second to the views, once to the broker)."""

    topic: ClassVar[str] = "status"
    about: ClassVar[str] = ("the trial's status once a second, with `state` `running` (the "
                            "live views get it twice a second)")
    SCHEMA: ClassVar[dict] = _schema("StatusUpdate", {
        "t": _NUM, "phase": _STR_OR_NULL, "periods": _INT, "late": _INT, "missed": _INT,
        "nodes_ok": _INT, "nodes": _INT, "model_lag": _NUM_OR_NULL},
        ("t", "phase", "periods", "late", "missed", "nodes_ok", "nodes"))

    t: float
    phase: str | None
    periods: int
    late: int
    missed: int
    nodes_ok: int
    nodes: int
    model_lag: float | None = None


@dataclass(frozen=True, slots=True)
class FaultMessage(Message):
    """A fault the supervisor stopped (or would stop) the trial for."""

    topic: ClassVar[str] = "fault"
    about: ClassVar[str] = "a fault of the supervisor's: kind, node, reason"
    SCHEMA: ClassVar[dict] = _schema("Fault", {"t": _NUM, "kind": _STR_OR_NULL,
                                               "node": _INT_OR_NULL, "reason": _STR_OR_NULL})

    t: float
    kind: str | None
    node: int | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class EmcyMessage(Message):
    """A joint module's EMCY frame, as it came."""

    topic: ClassVar[str] = "emcy"
    about: ClassVar[str] = "a joint module's EMCY frame, as it came"
    SCHEMA: ClassVar[dict] = _schema("Emcy", {"t": _NUM, "node": _INT, "error_code": _INT,
                                              "error_register": _INT, "motor": _INT})

    t: float
    node: int
    error_code: int
    error_register: int
    motor: int


@dataclass(frozen=True, slots=True)
class TrialStart(Message):
    """The trial's start: its gait and steering target."""

    topic: ClassVar[str] = "event"
    about: ClassVar[str] = "the trial's start: its gait and the steering asked for"
    SCHEMA: ClassVar[dict] = _schema("TrialStart", {
        "t": _NUM, "kind": {"const": "trial_start"}, "gait": _STR, "steering": _STR_OR_NULL,
        "heading_target": _NUM_OR_NULL,
        "waypoints": {"type": ["array", "null"], "items": {"type": "array", "items": _NUM}}})

    t: float
    gait: str
    steering: str | None = None
    heading_target: float | None = None
    waypoints: tuple[tuple[float, float], ...] | None = None

    def payload(self) -> dict[str, Any]:
        return {"t": self.t, "kind": "trial_start", "gait": self.gait,
                "steering": self.steering, "heading_target": self.heading_target,
                "waypoints": None if self.waypoints is None else [list(w) for w in
                                                                  self.waypoints]}


@dataclass(frozen=True, slots=True)
class TrialEnd(Message):
    """The trial's end: why (``completed``, ``fault``, ``interrupted``,
    ``nodes_missing``), the fault, and, once compared, the comparison's
    metrics (None before or without one)."""

    topic: ClassVar[str] = "event"
    about: ClassVar[str] = ("the trial's end, once compared: why it ended, its fault and the "
                            "comparison's metrics (`null` without a comparison)")
    SCHEMA: ClassVar[dict] = _schema("TrialEnd", {
        "t": _NUM, "kind": {"const": "trial_end"}, "reason": _STR,
        "fault": {"type": ["object", "null"]}, "metrics": {"type": ["object", "null"]},
        "comparison_error": _STR_OR_NULL})

    t: float
    reason: str
    fault: dict | None = None
    metrics: dict | None = None
    comparison_error: str | None = None

    def payload(self) -> dict[str, Any]:
        return {"t": self.t, "kind": "trial_end", "reason": self.reason, "fault": self.fault,
                "metrics": self.metrics, "comparison_error": self.comparison_error}


@dataclass(frozen=True, slots=True)
class Comparison(Message):
    """The comparison's metrics (views only: the broker has them in trial_end)."""

    topic: ClassVar[str] = "comparison"
    about: ClassVar[str] = "the comparison's metrics (live views only)"
    SCHEMA: ClassVar[dict] = _schema("Comparison", {"metrics": {"type": "object"}})

    metrics: dict


MESSAGE_KINDS: tuple[type[Message], ...] = (
    Link6, ModelLink6, MocapLinks, SteeringUpdate, StatusUpdate, FaultMessage, EmcyMessage,
    TrialStart, TrialEnd, Comparison)
"""Every kind of message, in the order the documentation lists them."""
