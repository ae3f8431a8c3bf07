"""The joint protocol as a cantools database, and its DBC file.

:func:`build_database` makes the database from the protocol's constants;
``aiko_joint.dbc`` beside this module is its DBC text (a test checks that the two
agree; ``python -m aiko.firmware_interface.dbc`` rewrites the file).
:func:`load_database` reads the file: that is what the codec uses, and what lab
tools and ``cantools generate_c_source`` read too.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from pathlib import Path

import cantools
from cantools.database.can import Database, Message, Node, Signal
from cantools.database.conversion import BaseConversion

from .protocol import (
    ANGLE_SCALE,
    EMCY_BASE,
    HEARTBEAT_BASE,
    MAX_NODE_ID,
    NMT_ID,
    RATE_SCALE,
    REF_BASE,
    STATE_BASE,
    SYNC_ID,
    EmcyCode,
    Motor,
    NmtCommand,
    NodeState,
)

__all__ = ["DBC_PATH", "DBC_NODES", "build_database", "load_database", "message_name",
           "STATUS_BITS"]

DBC_PATH = Path(__file__).with_name("aiko_joint.dbc")

DBC_NODES = 16
"""Nodes listed in the DBC file (Aiko has 10). A DBC cannot state identifier
ranges; every node's frames have the same layout, so the codec serves node ids up
to 63 with node 1's messages, and ``build_database(63)`` writes a complete file."""

STATUS_BITS = ("operational", "h_saturated", "v_saturated", "h_clamped", "v_clamped", "holding")
"""STATE status byte, bit 0 upward (bits 6-7 are zero)."""

PC = "PC"


def _conv(scale=1.0, choices=None):
    ch = None
    if choices is not None:
        ch = OrderedDict((int(k), v) for k, v in choices.items())
    return BaseConversion.factory(scale=scale, offset=0, choices=ch)


def _sig(name, start, length, signed=False, scale=1.0, minimum=None, maximum=None, unit=None,
         choices=None, receivers=None, comment=None):
    return Signal(name=name, start=start, length=length, byte_order="little_endian",
                  is_signed=signed, conversion=_conv(scale, choices), minimum=minimum,
                  maximum=maximum, unit=unit, receivers=receivers or [], comment=comment)


def node_name(node: int) -> str:
    return f"JOINT_{node:02d}"


def message_name(kind: str, node: int = 0) -> str:
    """Database name of a frame: NMT, SYNC, or e.g. STATE_03."""
    return kind if kind in ("NMT", "SYNC") else f"{kind}_{node:02d}"


def _angle(name, start, comment):
    lim = 32767 * ANGLE_SCALE
    return _sig(name, start, 16, True, ANGLE_SCALE, -32768 * ANGLE_SCALE, lim, "rad",
                comment=comment)


def build_database(max_node: int = DBC_NODES) -> Database:
    """The protocol's database with per-node frames for nodes 1..max_node."""
    joints = [node_name(i) for i in range(1, max_node + 1)]
    nmt_choices = {c.value: c.name for c in NmtCommand}
    state_choices = {s.value: s.name for s in NodeState}
    messages = [
        Message(NMT_ID, "NMT", 2, [
            _sig("command", 0, 8, choices=nmt_choices, receivers=joints),
            _sig("node_id", 8, 8, minimum=0, maximum=MAX_NODE_ID, receivers=joints,
                 comment="0 addresses every node"),
        ], senders=[PC], comment="Network management"),
        Message(SYNC_ID, "SYNC", 1, [
            _sig("counter", 0, 8, receivers=joints, comment="+1 per SYNC, wraps 255 -> 0"),
        ], senders=[PC], cycle_time=100, comment="Apply the latest REF and answer with STATE"),
    ]
    for i in range(1, max_node + 1):
        me = node_name(i)
        messages += [
            Message(EMCY_BASE + i, message_name("EMCY", i), 4, [
                _sig("error_code", 0, 16, choices={c.value: c.name for c in EmcyCode},
                     receivers=[PC]),
                _sig("error_register", 16, 8, receivers=[PC],
                     comment="bit0 generic, bit1 current, bit4 communication"),
                _sig("motor", 24, 8, choices={m.value: m.name for m in Motor}, receivers=[PC]),
            ], senders=[me]),
            Message(STATE_BASE + i, message_name("STATE", i), 8, [
                _angle("alpha_h", 0, "measured horizontal joint angle (motor encoder)"),
                _angle("alpha_v", 16, "measured vertical joint angle (motor encoder)"),
                _sig("duty_h", 32, 8, True, 1.0, -100, 100, "%", receivers=[PC]),
                _sig("duty_v", 40, 8, True, 1.0, -100, 100, "%", receivers=[PC]),
                *[_sig(name, 48 + k, 1, receivers=[PC]) for k, name in enumerate(STATUS_BITS)],
                _sig("sync_echo", 56, 8, receivers=[PC], comment="counter of the SYNC answered"),
            ], senders=[me]),
            Message(REF_BASE + i, message_name("REF", i), 8, [
                _angle("alpha_h_ref", 0, "horizontal joint angle reference"),
                _angle("alpha_v_ref", 16, "vertical joint angle reference"),
                _sig("omega_h_ref", 32, 16, True, RATE_SCALE, -32768 * RATE_SCALE,
                     32767 * RATE_SCALE, "rad/s", receivers=[me]),
                _sig("omega_v_ref", 48, 16, True, RATE_SCALE, -32768 * RATE_SCALE,
                     32767 * RATE_SCALE, "rad/s", receivers=[me]),
            ], senders=[PC]),
            Message(HEARTBEAT_BASE + i, message_name("HEARTBEAT", i), 1, [
                _sig("state", 0, 8, choices=state_choices, receivers=[PC]),
            ], senders=[me], cycle_time=100),
        ]
    for m in messages:
        for s in m.signals:
            if not s.receivers:
                s.receivers = [PC] if m.senders != [PC] else []
    nodes = [Node(PC, comment="control PC")] + [Node(j) for j in joints]
    return Database(messages=messages, nodes=nodes, version="aiko-joint-1")


@lru_cache(maxsize=1)
def load_database() -> Database:
    """The protocol database read from ``aiko_joint.dbc`` (strict checks)."""
    db = cantools.database.load_file(str(DBC_PATH), database_format="dbc", strict=True)
    assert isinstance(db, cantools.database.can.Database)
    return db


def write_dbc(path: Path = DBC_PATH) -> None:
    path.write_bytes(build_database().as_dbc_string().encode("ascii"))


if __name__ == "__main__":
    write_dbc()
