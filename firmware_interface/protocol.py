"""Constants of the Aiko joint-module CAN protocol, version 1.

The protocol is a fact of the firmware (see the DBC file ``aiko_joint.dbc`` beside
this module, generated from these constants by :mod:`aiko.firmware_interface.dbc`).
CAN 2.0A, 11-bit identifiers, little-endian payloads. Module ``i`` drives joint
``i`` (between links i and i+1); node ids 1..63.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

__all__ = [
    "NMT_ID", "SYNC_ID", "EMCY_BASE", "STATE_BASE", "REF_BASE", "HEARTBEAT_BASE",
    "MAX_NODE_ID", "DLC", "NmtCommand", "NodeState", "Status", "EmcyCode", "ErrorRegister",
    "Motor", "ANGLE_SCALE", "RATE_SCALE", "JOINT_LIMIT", "HEARTBEAT_PERIOD", "SYNC_TIMEOUT",
    "CURRENT_LIMIT_TIME", "frame_kind", "error_register_bit",
]

NMT_ID = 0x000
SYNC_ID = 0x080
EMCY_BASE = 0x080
STATE_BASE = 0x180
REF_BASE = 0x200
HEARTBEAT_BASE = 0x700
MAX_NODE_ID = 0x3F
ROBOT_BITRATE = 1_000_000
"""The robot's CAN bit rate, bit/s (500 kbit/s must also work)."""

DLC = {"NMT": 2, "SYNC": 1, "EMCY": 4, "STATE": 8, "REF": 8, "HEARTBEAT": 1}

ANGLE_SCALE = 1e-4
"""rad per bit of every alpha field."""
RATE_SCALE = 1e-3
"""rad/s per bit of every omega field."""
JOINT_LIMIT = 0.7854
"""|alpha| limit of both motors, rad (45 degrees)."""
HEARTBEAT_PERIOD = 0.1
SYNC_TIMEOUT = 0.3
CURRENT_LIMIT_TIME = 0.2


class NmtCommand(IntEnum):
    START = 0x01
    STOP = 0x02
    ENTER_PRE_OPERATIONAL = 0x80
    RESET_NODE = 0x81
    RESET_COMMUNICATION = 0x82


class NodeState(IntEnum):
    BOOT_UP = 0x00
    STOPPED = 0x04
    OPERATIONAL = 0x05
    PRE_OPERATIONAL = 0x7F


class Status(IntFlag):
    """STATE status byte."""

    OPERATIONAL = 0x01
    H_SATURATED = 0x02
    V_SATURATED = 0x04
    H_CLAMPED = 0x08
    V_CLAMPED = 0x10
    HOLDING = 0x20


class EmcyCode(IntEnum):
    ERROR_RESET = 0x0000
    GENERIC = 0x1000
    CURRENT_LIMIT = 0x2310
    ENCODER_FAULT = 0x5000
    RX_OVERRUN = 0x8110
    SYNC_TIMEOUT = 0x8130
    JOINT_LIMIT = 0x8611


class ErrorRegister(IntFlag):
    GENERIC = 0x01
    CURRENT = 0x02
    COMMUNICATION = 0x10


class Motor(IntEnum):
    H = 0
    V = 1
    NONE = 0xFF


def error_register_bit(code: int) -> ErrorRegister:
    """The error-register bit a condition sets."""
    if code in (EmcyCode.GENERIC, EmcyCode.ENCODER_FAULT, EmcyCode.JOINT_LIMIT):
        return ErrorRegister.GENERIC
    if code == EmcyCode.CURRENT_LIMIT:
        return ErrorRegister.CURRENT
    if code in (EmcyCode.RX_OVERRUN, EmcyCode.SYNC_TIMEOUT):
        return ErrorRegister.COMMUNICATION
    return ErrorRegister(0)


def frame_kind(arbitration_id: int) -> tuple[str, int] | None:
    """(kind, node id) of an identifier of the protocol, or None.

    SYNC is 0x080 itself; 0x081..0x0BF are EMCY of nodes 1..63.
    """
    if arbitration_id == NMT_ID:
        return "NMT", 0
    if arbitration_id == SYNC_ID:
        return "SYNC", 0
    for kind, base in (("EMCY", EMCY_BASE), ("STATE", STATE_BASE), ("REF", REF_BASE),
                       ("HEARTBEAT", HEARTBEAT_BASE)):
        node = arbitration_id - base
        if 1 <= node <= MAX_NODE_ID:
            return kind, node
    return None
