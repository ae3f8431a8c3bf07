"""The CAN adapter and the joint modules, checked without moving the robot.

1. The adapter opens (python-can, the rig's interface, channel and bit rate).
2. For :attr:`DoctorConfig.heartbeat_window` s every frame is read: each
   module's heartbeats (one each 100 ms, specs/joint-protocol.md) give its NMT
   state; an EMCY says a condition is active; a SYNC or REF that this PC did not
   send means another controller is on the bus. A module not heard by then
   gets up to :attr:`DoctorConfig.heartbeat_grace` s more (a busy PC or bus
   can hold a heartbeat back); only then is it "no heartbeat".
3. SYNC with STATE: a module answers SYNC only when operational. Each module
   found pre-operational or stopped is started on its own (NMT start to its
   node id), :data:`SYNC_ROUNDS` SYNCs are sent, and every STATE echoing a
   counter is timed (judged on the median, :data:`STATE_SLOW`); then each is sent back (NMT enter pre-operational, or stop)
   in a ``finally``, so a cancelled check leaves the bus as it found it, and the
   heartbeats confirm it. Entering operational holds the motors at the angle
   they have and no REF is sent, so nothing moves. A module found operational
   is not sent a SYNC (nor is anyone, SYNC is broadcast): it would apply the
   last reference it stored, which may be a trial's.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from aiko.drivers.can_bus import CanDriver, CanDriverError, RxFrame
from aiko.firmware_interface.codec import (
    Emcy,
    FrameError,
    Heartbeat,
    JointState,
    Nmt,
    Ref,
    Sync,
    decode,
    encode,
)
from aiko.firmware_interface.protocol import EmcyCode, NmtCommand, NodeState

from .report import Check, DoctorConfig, Status

__all__ = ["check_bus", "SYNC_ROUNDS", "STATE_TIMEOUT", "STATE_SLOW"]

SYNC_ROUNDS = 5
"""SYNCs sent to the started modules."""
SYNC_SPACING = 0.05
"""Seconds between those SYNCs (well inside the modules' 300 ms SYNC timeout)."""
STATE_TIMEOUT = 0.1
"""Seconds a STATE may take before it counts as not answered."""
STATE_SLOW = 0.02
"""A module whose median STATE is later than this (s) is slow: the firmware
answers within a few ms, and the ten STATEs of one SYNC follow each other on
the bus (at 1 Mbit/s about 0.13 ms each; through the emulator's slcan link on
loopback about 0.5 ms each, node 10's median 9.5 ms). The median, not the
slowest: one late answer is the PC or an emulator that stood still for a
moment, not the module."""
CONFIRM_TIMEOUT = 0.35
"""Seconds to wait for the heartbeats that confirm a module's state put back."""

_BACK = {NodeState.PRE_OPERATIONAL: NmtCommand.ENTER_PRE_OPERATIONAL,
         NodeState.STOPPED: NmtCommand.STOP}
"""The NMT command that returns a started module to the state it was found in."""


@dataclass
class _Node:
    """What one module said during the check."""

    heartbeats: list[float] = field(default_factory=list)
    state: int | None = None
    found: int | None = None              # state at the end of listening
    emcy: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    answered: int = 0


@dataclass
class _Bus:
    """Everything heard on the bus, by node; frames another controller sent."""

    nodes: dict[int, _Node]
    foreign: list[str] = field(default_factory=list)
    sync_sent: dict[int, float] = field(default_factory=dict)   # counter -> send time

    def take(self, rx: RxFrame) -> None:
        try:
            frame = decode(rx.arbitration_id, rx.data)
        except FrameError:
            return
        if isinstance(frame, (Sync, Ref, Nmt)):
            self.foreign.append(type(frame).__name__.upper())
            return
        node = self.nodes.setdefault(frame.node, _Node())
        if isinstance(frame, Heartbeat):
            node.heartbeats.append(rx.t)
            node.state = frame.state
        elif isinstance(frame, Emcy) and frame.error_code != EmcyCode.ERROR_RESET:
            node.emcy.append(frame.error_code)
        elif isinstance(frame, JointState) and frame.sync_echo in self.sync_sent:
            node.latencies.append(rx.t - self.sync_sent[frame.sync_echo])
            node.answered += 1


async def _read_until(driver: CanDriver, bus: _Bus, clock, end: float, done=None) -> None:
    """Take every frame until trial time ``end`` (or until ``done()``)."""
    while clock.now() < end and not (done is not None and done()):
        rx = await driver.receive(timeout=end - clock.now())
        if rx is not None:
            bus.take(rx)


async def check_bus(cfg: DoctorConfig, clock) -> list[Check]:
    """The adapter's row, then one row per joint module (and one per module
    heard that the rig does not list)."""
    expected = list(range(1, cfg.nodes + 1))
    try:
        driver = CanDriver.open(cfg.can_interface, cfg.can_channel, clock, cfg.bitrate)
    except CanDriverError as exc:
        return [Check("CAN adapter", Status.FAIL, str(exc),
                      "is the adapter plugged in and up (ip link show for socketcan), the "
                      "interface and channel right?")] + [
            Check(f"joint {n}", Status.SKIP, "not checked: no CAN bus") for n in expected]
    async with driver:
        bus = _Bus({n: _Node() for n in expected})
        await _read_until(driver, bus, clock, clock.now() + cfg.heartbeat_window)
        await _read_until(driver, bus, clock, clock.now() + cfg.heartbeat_grace,
                          done=lambda: all(bus.nodes[n].heartbeats for n in expected))
        for node in bus.nodes.values():
            node.found = node.state
        why_not = _sync_refused(bus, expected)
        if why_not is None:
            await _sync_check(driver, bus, clock, expected)
        failure = driver.failure
    rows = [_adapter_row(cfg, bus, failure)]
    rows += [_node_row(n, bus.nodes[n], why_not, cfg) for n in expected]
    rows += [Check(f"joint {n}", Status.WARN, f"heartbeat from node {n}, which the rig does "
                   f"not list (nodes = {cfg.nodes})", "the rig file's [joints] nodes")
             for n in sorted(bus.nodes) if n not in expected and bus.nodes[n].heartbeats]
    return rows


def _sync_refused(bus: _Bus, expected: list[int]) -> str | None:
    """Why no SYNC may be sent, or None."""
    if bus.foreign:
        kinds = ", ".join(sorted(set(bus.foreign)))
        return f"not tried: another controller is on the bus ({kinds} frames seen)"
    running = [n for n, node in bus.nodes.items() if node.found == NodeState.OPERATIONAL]
    if running:
        return (f"not tried: node{'s' if len(running) > 1 else ''} "
                f"{', '.join(map(str, running))} operational (a SYNC would apply the last "
                "reference stored)")
    return None


async def _sync_check(driver: CanDriver, bus: _Bus, clock, expected: list[int]) -> None:
    """Start the idle modules one by one, SYNC them, put them back."""
    idle = [n for n in expected if bus.nodes[n].found in _BACK]
    if not idle:
        return
    started: list[int] = []
    try:
        for n in idle:
            if driver.send(*encode(Nmt(NmtCommand.START, n)), timeout=0.1):
                started.append(n)
        for k in range(SYNC_ROUNDS):
            t0 = clock.now()
            bus.sync_sent[k] = t0
            driver.send(*encode(Sync(k)), timeout=0.1)
            await _read_until(driver, bus, clock, t0 + STATE_TIMEOUT,
                              done=lambda k=k: all(bus.nodes[n].answered > k for n in started))
            await clock.sleep_until(t0 + SYNC_SPACING)
    finally:
        for n in started:
            found = bus.nodes[n].found
            assert found is not None  # idle nodes were heard
            for _ in range(3):
                if driver.send(*encode(Nmt(_BACK[NodeState(found)], n)), timeout=0.1):
                    break
    for n in started:
        bus.nodes[n].state = None      # the next heartbeat says where it went
    await _read_until(driver, bus, clock, clock.now() + CONFIRM_TIMEOUT,
                      done=lambda: all(bus.nodes[n].state == bus.nodes[n].found
                                       for n in started))


def _adapter_row(cfg: DoctorConfig, bus: _Bus, failure: Exception | None) -> Check:
    where = f"{cfg.can_interface} {cfg.can_channel}"
    if cfg.bitrate:
        where += f" at {cfg.bitrate / 1000:g} kbit/s"
    if failure is not None:
        return Check("CAN adapter", Status.FAIL, f"{where}: reading failed ({failure})",
                     "the adapter's connection and power")
    heard = sum(len(n.heartbeats) for n in bus.nodes.values())
    if not heard:
        return Check("CAN adapter", Status.WARN, f"{where} open, but no frame heard in "
                     f"{cfg.heartbeat_limit:g} s", "the bit rate (the robot: 1 Mbit/s), the "
                     "cable, the terminators and the modules' power")
    return Check("CAN adapter", Status.OK, f"{where} open")


def _state_name(state: int | None) -> str:
    if state is None:
        return "no heartbeat since"
    try:
        return NodeState(state).name.lower().replace("_", "-")
    except ValueError:
        return f"state 0x{state:02X}"


def _node_row(n: int, node: _Node, why_not: str | None, cfg: DoctorConfig) -> Check:
    part = f"joint {n}"
    if not node.heartbeats:
        return Check(part, Status.FAIL, f"no heartbeat in {cfg.heartbeat_limit:g} s",
                     f"module {n}'s power, its node id and its CAN cable")
    seen = [_state_name(node.found)]
    beats = node.heartbeats
    if len(beats) > 1:
        seen.append(f"heartbeat every {1e3 * (beats[-1] - beats[0]) / (len(beats) - 1):.0f} ms")
    if node.emcy:
        names = ", ".join(f"0x{c:04X} {_emcy_name(c)}" for c in dict.fromkeys(node.emcy))
        return Check(part, Status.FAIL, "; ".join(seen + [f"EMCY {names}"]),
                     "the condition the EMCY names (docs: the experiment day's faults)")
    if why_not is not None:
        return Check(part, Status.WARN, "; ".join(seen + [f"SYNC {why_not}"]),
                     "stop the other controller, or power-cycle the modules")
    if node.found not in _BACK:
        return Check(part, Status.WARN, "; ".join(seen + ["SYNC not tried"]),
                     "a module still booting: check again")
    return _sync_row(part, node, seen)


def _sync_row(part: str, node: _Node, seen: list[str]) -> Check:
    found = _state_name(node.found)
    if node.answered < SYNC_ROUNDS:
        seen.append(f"STATE to {node.answered} of {SYNC_ROUNDS} SYNCs")
        return Check(part, Status.FAIL, "; ".join(seen),
                     "the module does not answer SYNC once started: its firmware, or frames "
                     "lost on the bus")
    typical = statistics.median(node.latencies)
    seen.append(f"STATE to {SYNC_ROUNDS} SYNCs in {1e3 * typical:.1f} ms (median), slowest "
                f"{1e3 * max(node.latencies):.1f} ms")
    if node.state != node.found:
        seen.append(f"not back to {found} ({_state_name(node.state)})")
        return Check(part, Status.FAIL, "; ".join(seen),
                     "send it NMT enter pre-operational (aiko run does at its end) or "
                     "power-cycle it")
    seen.append(f"back to {found}")
    if typical > STATE_SLOW:
        return Check(part, Status.WARN, "; ".join(seen),
                     f"the firmware answers within a few ms; over {1e3 * STATE_SLOW:g} ms "
                     "points at a loaded bus or PC")
    return Check(part, Status.OK, "; ".join(seen))


def _emcy_name(code: int) -> str:
    try:
        return EmcyCode(code).name.lower().replace("_", " ")
    except ValueError:
        return "unknown"
