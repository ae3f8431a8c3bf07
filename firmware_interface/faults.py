"""Fault specifications for the emulator's command line: ``NODE:KIND[=VALUE][@T]``.

Kinds: ``drop=FRACTION`` (frames lost both ways), ``silent@T`` (transmits nothing
from T on), ``encoder[=h|v]@T`` (encoder failure at T), ``saturate[=h|v]@T``
(motor down to a tenth of its torque from T), ``delay=SECONDS`` (every
transmission late). T is in seconds from the emulator's start (default 0).
"""

from __future__ import annotations

import dataclasses
import math

from aiko.model.errors import AikoError

from .emulator import FaultConfig
from .protocol import MAX_NODE_ID, Motor

__all__ = ["FaultSpecError", "parse_fault", "faults_by_node"]


class FaultSpecError(AikoError, ValueError):
    def __init__(self, spec: str, reason: str) -> None:
        self.spec = spec
        super().__init__(f"fault {spec!r}: {reason}")


def _number_in(value: str, lo: float, hi: float, lo_open: bool = False) -> float:
    """``value`` as a float in [lo, hi] ((lo, hi] with ``lo_open``); ValueError if not."""
    v = float(value)
    if not (lo < v <= hi if lo_open else lo <= v <= hi):
        raise ValueError(value)
    return v


def _changes(kind: str, value: str, at: float) -> dict | None:
    """FaultConfig changes of one kind (None: no such kind); ValueError for a bad value."""
    motor = {"": None, "h": Motor.H, "v": Motor.V}
    if kind == "drop":
        return {"drop_fraction": _number_in(value, 0.0, 1.0)}
    if kind == "delay":
        return {"reply_delay": _number_in(value, 0.0, math.inf)}
    if kind == "babble":
        return {"babble_from": at, "babble_rate": _number_in(value, 0.0, 5000.0, lo_open=True)}
    if kind == "silent" and not value:
        return {"silent_from": at}
    if kind == "encoder" and value in motor:
        return {"encoder_fault_at": at, "encoder_motor": motor[value] if value else Motor.H}
    if kind == "saturate" and value in motor:
        return {"saturate_from": at, "saturate_motor": motor[value] if value else Motor.V}
    return None


def parse_fault(spec: str) -> tuple[int, dict]:
    """(node, FaultConfig field changes) of one spec."""
    try:
        node_text, rest = spec.split(":", 1)
        node = int(node_text)
    except ValueError:
        raise FaultSpecError(spec, "expected NODE:KIND[=VALUE][@T]") from None
    if not 1 <= node <= MAX_NODE_ID:
        raise FaultSpecError(spec, f"node must lie in 1..{MAX_NODE_ID}")
    at = 0.0
    if "@" in rest:
        rest, at_text = rest.split("@", 1)
        try:
            at = float(at_text)
        except ValueError:
            raise FaultSpecError(spec, f"bad time {at_text!r}") from None
        if not (math.isfinite(at) and at >= 0):
            raise FaultSpecError(spec, "time must be >= 0")
    kind, _, value = rest.partition("=")
    try:
        changes = _changes(kind, value, at)
    except ValueError:
        raise FaultSpecError(spec, f"bad value {value!r} for {kind}") from None
    if changes is None:
        raise FaultSpecError(spec, "kind must be drop=F, delay=S, silent, encoder[=h|v], "
                                   "saturate[=h|v] or babble=RATE")
    return node, changes


def faults_by_node(specs: list[str]) -> dict[int, FaultConfig]:
    """Combine specs into one FaultConfig per node."""
    changes: dict[int, dict] = {}
    for spec in specs:
        node, ch = parse_fault(spec)
        changes.setdefault(node, {}).update(ch)
    return {node: dataclasses.replace(FaultConfig(), **ch) for node, ch in changes.items()}
