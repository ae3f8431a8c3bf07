"""What the stack does about each fault of the joint modules: one table.

The supervisor raises its faults with the messages written here, the
``--tolerate`` flag takes the names written here, and the documentation's
fault table is generated from here (``docs/reference_tables.py``): a fault
kind, a message or an EMCY code that changes without its row fails the
tests. Pure data, no I/O.

Three kinds of row:

* :data:`TRIAL_FAULTS`: the conditions that stop a running trial (the
  joints sent to hold, the log records the fault, ``aiko run`` exits 1),
  each named by its ``kind`` as the log, the telemetry and
  :class:`~aiko.control.supervisor.TrialFault` name it; some may be
  tolerated (``--tolerate NAME``).
* :data:`START_FAULTS`: what refuses to start a trial (exit 2, nothing
  streamed).
* :data:`EMCY_ROWS`: every EMCY error code of the protocol, whether it
  stops the trial or is only logged.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiko.firmware_interface.protocol import EmcyCode

__all__ = ["FaultRow", "EmcyRow", "TRIAL_FAULTS", "START_FAULTS", "EMCY_ROWS", "FAULT",
           "TOLERABLE", "fault_message"]


@dataclass(frozen=True)
class FaultRow:
    """One fault: ``kind`` (its name in the log and the telemetry),
    ``message`` (a ``str.format`` template of what the user reads),
    ``meaning``, ``action`` (what to do), ``tolerate`` (the ``--tolerate``
    name, or None where the fault always stops), ``exit`` (``aiko run``'s
    exit status)."""

    kind: str
    message: str
    meaning: str
    action: str
    tolerate: str | None = None
    exit: int = 1


@dataclass(frozen=True)
class EmcyRow:
    """One EMCY error code: what the module means by it, whether the
    supervisor stops the trial (``stops``: the fault kind it raises) or only
    logs it, and what to do."""

    code: int
    name: str
    meaning: str
    action: str
    stops: str | None = None


TRIAL_FAULTS: tuple[FaultRow, ...] = (
    FaultRow("lost_node", "joint node {node} lost: no heartbeat for {age:.2f} s",
             "the module stopped sending its 100 ms heartbeat for longer than the watch's "
             "timeout (0.3 s)",
             "its power and the CAN cable to it; `candump can0` shows `0x700 + N` every "
             "100 ms from a live module"),
    FaultRow("encoder_fault", "joint node {node}: encoder fault on motor {motor}",
             "the module's encoder reading is implausible (EMCY 0x5000); its motor goes limp",
             "the encoder's connector; tolerate it only to finish a trial",
             tolerate="encoder-fault"),
    FaultRow("current_limit", "joint node {node}: motor current limit held for over 200 ms",
             "a motor stayed at full duty for over 200 ms (EMCY 0x2310): the joint is blocked "
             "or overloaded",
             "free the joint; tolerate it where a blocked joint is part of the experiment",
             tolerate="current-limit"),
    FaultRow("node_reset", "joint node {node} restarted",
             "the module sent a boot-up heartbeat during the trial: it lost power or its "
             "watchdog reset it, and it forgot its state",
             "its power supply and connector; the trial cannot go on with it"),
)
"""The conditions that stop a running trial."""

START_FAULTS: tuple[FaultRow, ...] = (
    FaultRow("nodes_missing", "no heartbeat from joint {nodes} within {timeout:g} s",
             "some modules sent no heartbeat within `--startup-timeout` before the trial",
             "power, termination (120 ohm at both ends), bit rate (1 Mbit/s) and the node "
             "ids 1..10; `aiko doctor` names each module's state", exit=2),
)
"""What refuses to start a trial."""

FAULT: dict[str, FaultRow] = {row.kind: row for row in TRIAL_FAULTS + START_FAULTS}
"""Every fault's row by its kind."""

TOLERABLE: tuple[str, ...] = tuple(row.tolerate for row in TRIAL_FAULTS
                                   if row.tolerate is not None)
"""The names ``--tolerate`` takes (every other fault always stops a trial)."""

EMCY_ROWS: tuple[EmcyRow, ...] = (
    EmcyRow(EmcyCode.ERROR_RESET, "error reset",
            "the condition the module last reported has cleared", "nothing"),
    EmcyRow(EmcyCode.GENERIC, "generic error",
            "an error the module has no code for", "the module's own diagnostics"),
    EmcyRow(EmcyCode.CURRENT_LIMIT, "current limit",
            "a motor at full duty for over 200 ms", "see `current_limit`",
            stops="current_limit"),
    EmcyRow(EmcyCode.ENCODER_FAULT, "encoder fault",
            "the encoder's reading is implausible", "see `encoder_fault`",
            stops="encoder_fault"),
    EmcyRow(EmcyCode.RX_OVERRUN, "CAN receive overrun",
            "the module's receive buffer overflowed: frames were lost",
            "bus load or a babbling node: `candump` the bus"),
    EmcyRow(EmcyCode.SYNC_TIMEOUT, "SYNC timeout",
            "the module saw no SYNC for 300 ms and holds its angles until the next one",
            "the PC or the bus was overloaded: close other programs, read `period jitter` "
            "in the trial's summary"),
    EmcyRow(EmcyCode.JOINT_LIMIT, "joint limit",
            "a reference beyond +-45 deg was clamped (the status bit stays set while it is)",
            "the gait's amplitude: `aiko run --check` shows which joint"),
)
"""Every EMCY error code of the protocol, in code order."""


def fault_message(kind: str, **values: object) -> str:
    """The message of fault ``kind`` with its values (``node``, ``age``,
    ``motor``; ``nodes`` as "node 3" or "nodes 2, 3", ``timeout``)."""
    return FAULT[kind].message.format(**values)
