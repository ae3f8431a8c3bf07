"""Typed codec of the joint protocol over the DBC (cantools packs the bits).

Every frame is a small frozen dataclass in SI units (rad, rad/s); :func:`encode`
gives ``(arbitration_id, data)``, :func:`decode` the dataclass. Values are
rounded to the nearest step of their field (1e-4 rad, 1e-3 rad/s, 1 %); out of
range values raise :class:`FrameValueError`, unknown identifiers
:class:`UnknownFrameError`, a wrong length :class:`MalformedFrameError`. Pure: no
I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache

from aiko.model.errors import AikoError

from .dbc import DBC_NODES, STATUS_BITS, load_database, message_name
from .protocol import (
    ANGLE_SCALE,
    DLC,
    EMCY_BASE,
    HEARTBEAT_BASE,
    MAX_NODE_ID,
    NMT_ID,
    RATE_SCALE,
    REF_BASE,
    STATE_BASE,
    SYNC_ID,
    Status,
    frame_kind,
)

__all__ = ["Nmt", "Sync", "Emcy", "JointState", "Ref", "Heartbeat", "Frame", "RawFrame", "encode",
           "decode",
           "FrameError", "UnknownFrameError", "MalformedFrameError", "FrameValueError"]


class FrameError(AikoError, ValueError):
    """A CAN frame that does not belong to the protocol or cannot be made."""


class UnknownFrameError(FrameError):
    def __init__(self, arbitration_id: int) -> None:
        self.arbitration_id = arbitration_id
        super().__init__(f"unknown frame id 0x{arbitration_id:03X}")


class MalformedFrameError(FrameError):
    def __init__(self, kind: str, arbitration_id: int, dlc: int, expected: int) -> None:
        self.kind = kind
        self.arbitration_id = arbitration_id
        self.dlc = dlc
        self.expected = expected
        super().__init__(f"{kind} frame 0x{arbitration_id:03X} has {dlc} data bytes, "
                         f"expected {expected}")


class FrameValueError(FrameError):
    def __init__(self, kind: str, field: str, value: object, lo: float, hi: float) -> None:
        self.kind = kind
        self.field = field
        self.value = value
        super().__init__(f"{kind}.{field} = {value!r} is outside [{lo:g}, {hi:g}]")


@dataclass(frozen=True)
class Nmt:
    command: int
    node_id: int = 0  # 0: every node


@dataclass(frozen=True)
class Sync:
    counter: int


@dataclass(frozen=True)
class Emcy:
    node: int
    error_code: int
    error_register: int
    motor: int


@dataclass(frozen=True)
class JointState:
    node: int
    alpha_h: float
    alpha_v: float
    duty_h: int
    duty_v: int
    status: Status
    sync_echo: int


@dataclass(frozen=True)
class Ref:
    node: int
    alpha_h: float
    alpha_v: float
    omega_h: float
    omega_v: float


@dataclass(frozen=True)
class Heartbeat:
    node: int
    state: int


Frame = Nmt | Sync | Emcy | JointState | Ref | Heartbeat


@dataclass(frozen=True)
class RawFrame:
    """Any standard frame, protocol or not, sent as it is: what a babbling
    node puts on the bus (the emulator's ``babble`` fault). :func:`decode`
    never returns one."""

    arbitration_id: int
    data: bytes

    def __post_init__(self) -> None:
        if not 0 <= self.arbitration_id <= 0x7FF or len(self.data) > 8:
            raise ValueError(f"not a standard CAN frame: 0x{self.arbitration_id:X}, "
                             f"{len(self.data)} bytes")


CACHED_FRAMES = 16384
"""Payloads and frames the codec keeps (a 15 s trial's references are 1500
REF frames; a fit replays three trials dozens of times in each process)."""

_I16 = (-32768, 32767)
_U8 = (0, 255)


def _raw(kind: str, field: str, value: float, scale: float, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FrameValueError(kind, field, value, lo * scale, hi * scale)
    raw = int(round(value / scale))
    if not lo <= raw <= hi:
        raise FrameValueError(kind, field, value, lo * scale, hi * scale)
    return raw


def _node(kind: str, node: int) -> int:
    if isinstance(node, bool) or not isinstance(node, int) or not 1 <= node <= MAX_NODE_ID:
        raise FrameValueError(kind, "node", node, 1, MAX_NODE_ID)
    return node


def _message(kind: str, node: int):
    """The database message of a frame; nodes beyond the DBC use node 1's layout."""
    if kind not in ("NMT", "SYNC") and node > DBC_NODES:
        node = 1
    return load_database().get_message_by_name(message_name(kind, node))


def _pack(kind: str, node: int, raw: dict) -> bytes:
    return _packed(kind, node, tuple(raw.items()))


@lru_cache(maxsize=CACHED_FRAMES)
def _packed(kind: str, node: int, raw: tuple) -> bytes:
    """The payload of checked raw values (cached: a trial's replays send the
    same frames again and again)."""
    return bytes(_message(kind, node).encode(dict(raw), scaling=False, strict=False))


def encode(frame: Frame | RawFrame) -> tuple[int, bytes]:
    """(arbitration_id, payload) of a frame."""
    if isinstance(frame, RawFrame):
        return frame.arbitration_id, bytes(frame.data)
    if isinstance(frame, Nmt):
        raw = {"command": _raw("NMT", "command", frame.command, 1, *_U8),
               "node_id": _raw("NMT", "node_id", frame.node_id, 1, 0, MAX_NODE_ID)}
        return NMT_ID, _pack("NMT", 0, raw)
    if isinstance(frame, Sync):
        return SYNC_ID, _pack("SYNC", 0, {"counter": _raw("SYNC", "counter", frame.counter, 1, *_U8)})
    if isinstance(frame, Ref):
        n = _node("REF", frame.node)
        raw = {"alpha_h_ref": _raw("REF", "alpha_h", frame.alpha_h, ANGLE_SCALE, *_I16),
               "alpha_v_ref": _raw("REF", "alpha_v", frame.alpha_v, ANGLE_SCALE, *_I16),
               "omega_h_ref": _raw("REF", "omega_h", frame.omega_h, RATE_SCALE, *_I16),
               "omega_v_ref": _raw("REF", "omega_v", frame.omega_v, RATE_SCALE, *_I16)}
        return REF_BASE + n, _pack("REF", n, raw)
    if isinstance(frame, JointState):
        n = _node("STATE", frame.node)
        status = int(frame.status)
        if not 0 <= status <= 0x3F:
            raise FrameValueError("STATE", "status", status, 0, 0x3F)
        raw = {"alpha_h": _raw("STATE", "alpha_h", frame.alpha_h, ANGLE_SCALE, *_I16),
               "alpha_v": _raw("STATE", "alpha_v", frame.alpha_v, ANGLE_SCALE, *_I16),
               "duty_h": _raw("STATE", "duty_h", frame.duty_h, 1, -100, 100),
               "duty_v": _raw("STATE", "duty_v", frame.duty_v, 1, -100, 100),
               "sync_echo": _raw("STATE", "sync_echo", frame.sync_echo, 1, *_U8)}
        for k, name in enumerate(STATUS_BITS):
            raw[name] = (status >> k) & 1
        return STATE_BASE + n, _pack("STATE", n, raw)
    if isinstance(frame, Emcy):
        n = _node("EMCY", frame.node)
        raw = {"error_code": _raw("EMCY", "error_code", frame.error_code, 1, 0, 0xFFFF),
               "error_register": _raw("EMCY", "error_register", frame.error_register, 1, *_U8),
               "motor": _raw("EMCY", "motor", frame.motor, 1, *_U8)}
        return EMCY_BASE + n, _pack("EMCY", n, raw)
    if isinstance(frame, Heartbeat):
        n = _node("HEARTBEAT", frame.node)
        raw = {"state": _raw("HEARTBEAT", "state", frame.state, 1, *_U8)}
        return HEARTBEAT_BASE + n, _pack("HEARTBEAT", n, raw)
    raise TypeError(f"not a protocol frame: {frame!r}")


def decode(arbitration_id: int, data: bytes | bytearray) -> Frame:
    """The frame of an identifier and payload; raises FrameError subclasses."""
    return _decoded(arbitration_id, bytes(data))


@lru_cache(maxsize=CACHED_FRAMES)
def _decoded(arbitration_id: int, data: bytes) -> Frame:
    """:func:`decode`, cached by identifier and payload (the frames are
    frozen; an error is raised again each time, never cached)."""
    kind_node = frame_kind(arbitration_id)
    if kind_node is None:
        raise UnknownFrameError(arbitration_id)
    kind, node = kind_node
    if len(data) != DLC[kind]:
        raise MalformedFrameError(kind, arbitration_id, len(data), DLC[kind])
    raw = _message(kind, node).decode(data, decode_choices=False, scaling=False)
    if kind == "NMT":
        return Nmt(int(raw["command"]), int(raw["node_id"]))
    if kind == "SYNC":
        return Sync(int(raw["counter"]))
    if kind == "REF":
        return Ref(node, raw["alpha_h_ref"] * ANGLE_SCALE, raw["alpha_v_ref"] * ANGLE_SCALE,
                   raw["omega_h_ref"] * RATE_SCALE, raw["omega_v_ref"] * RATE_SCALE)
    if kind == "STATE":
        status = sum(int(raw[name]) << k for k, name in enumerate(STATUS_BITS))
        return JointState(node, raw["alpha_h"] * ANGLE_SCALE, raw["alpha_v"] * ANGLE_SCALE,
                          int(raw["duty_h"]), int(raw["duty_v"]), Status(status),
                          int(raw["sync_echo"]))
    if kind == "EMCY":
        return Emcy(node, int(raw["error_code"]), int(raw["error_register"]), int(raw["motor"]))
    return Heartbeat(node, int(raw["state"]))


def frame_fields(frame: Frame) -> dict:
    """The frame's fields as a plain dict (for logs and JSON)."""
    return {f.name: getattr(frame, f.name) for f in fields(frame)}
