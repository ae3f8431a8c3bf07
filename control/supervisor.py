"""The supervisor: brings the joints up, watches them, decides when to stop.

Takes a CAN driver (``send(ident, data)``, ``await receive(timeout)``), a clock and
an event sink; knows the protocol through the codec. Its decisions are plain
methods (``on_frame``, ``check``) so they are tested without a bus.

The safe state: on a stop the PC stops streaming and sends NMT "enter
pre-operational" to every node. The firmware then ignores REF and SYNC and its
motors hold the angles they have: the robot freezes where it is instead of going
limp (NMT stop) or being reset.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from aiko.firmware_interface.codec import (
    Emcy,
    Frame,
    FrameError,
    Heartbeat,
    JointState,
    Nmt,
    decode,
    encode,
)
from aiko.firmware_interface.protocol import EmcyCode, NmtCommand, NodeState, Status
from aiko.model.errors import AikoError

from .faults import fault_message

__all__ = ["FaultPolicy", "Supervisor", "TrialFault", "NodesMissingError", "SAFE_STATE_COMMAND"]

log = logging.getLogger(__name__)

SAFE_STATE_COMMAND = NmtCommand.ENTER_PRE_OPERATIONAL
SAFE_STATE_HEARTBEAT = NodeState.PRE_OPERATIONAL


class TrialFault(AikoError):
    """A condition that stops the trial."""

    def __init__(self, kind: str, node: int | None, reason: str) -> None:
        self.kind = kind
        self.node = node
        self.reason = reason
        super().__init__(reason)


class NodesMissingError(AikoError):
    """Expected joint modules did not send a heartbeat in time."""

    def __init__(self, missing: list[int], timeout: float) -> None:
        self.missing = missing
        self.timeout = timeout
        nodes = ("nodes " if len(missing) > 1 else "node ") + ", ".join(str(n) for n in missing)
        super().__init__(fault_message("nodes_missing", nodes=nodes, timeout=timeout))


@dataclass(frozen=True)
class FaultPolicy:
    """Which conditions stop a trial (defaults: the safe choices)."""

    heartbeat_timeout: float = 0.3
    stop_on_lost_node: bool = True
    stop_on_encoder_fault: bool = True
    stop_on_current_limit: bool = True
    stop_on_node_not_operational: bool = True


@dataclass
class NodeHealth:
    last_heartbeat: float | None = None
    state: int | None = None
    status: Status = Status(0)
    emcy: list[int] = field(default_factory=list)


class Supervisor:
    """Bring-up, heartbeat watch, EMCY and status watch, safe stop."""

    def __init__(self, can_io, nodes: list[int], clock, policy: FaultPolicy = FaultPolicy(),
                 on_event: Callable[[float, str, dict], None] | None = None) -> None:
        self.can_io = can_io
        self.nodes = list(nodes)
        self.clock = clock
        self.policy = policy
        self.on_event = on_event or (lambda t, kind, data: None)
        self.health = {n: NodeHealth() for n in self.nodes}
        self.fault: TrialFault | None = None
        self.started_at: float | None = None
        self._stalls: list[tuple[float, float]] = []   # (end, duration) s, see note_stall

    # ----------------------------------------------------------------- events
    def _event(self, kind: str, **data) -> None:
        self.on_event(self.clock.now(), kind, data)

    def _raise_fault(self, kind: str, node: int | None, reason: str) -> None:
        if self.fault is None:
            self.fault = TrialFault(kind, node, reason)
            self._event("fault", fault=kind, node=node, reason=reason)
            log.error("fault: %s", reason)

    async def _receive_decoded(self, timeout: float,
                               on_frame: Callable | None) -> tuple[float, Frame] | None:
        """(time, frame) of the next frame within ``timeout`` s, handed raw to
        ``on_frame`` first; None on timeout or for a frame outside the protocol."""
        rx = await self.can_io.receive(timeout=timeout)
        if rx is None:
            return None
        if on_frame is not None:
            on_frame(rx)
        try:
            return rx.t, decode(rx.arbitration_id, rx.data)
        except FrameError:
            return None

    # -------------------------------------------------------------- bring-up
    async def bring_up(self, timeout: float = 2.0, on_frame: Callable | None = None) -> None:
        """Wait for every node's heartbeat, then NMT start them all."""
        deadline = self.clock.now() + timeout
        self._event("waiting_for_nodes", nodes=self.nodes, timeout=timeout)
        while True:
            missing = [n for n in self.nodes if self.health[n].last_heartbeat is None]
            if not missing:
                break
            left = deadline - self.clock.now()
            if left <= 0:
                self._event("nodes_missing", missing=missing)
                raise NodesMissingError(missing, timeout)
            got = await self._receive_decoded(min(left, 0.05), on_frame)
            if got is not None:
                self.on_frame(*got)
        self.send_nmt(NmtCommand.START)
        self.started_at = self.clock.now()
        self._event("nodes_started", nodes=self.nodes)

    def send_nmt(self, command: int, node: int = 0, timeout: float | None = None) -> bool:
        return self.can_io.send(*encode(Nmt(int(command), node)), timeout=timeout)

    # ---------------------------------------------------------------- watching
    def on_frame(self, t: float, frame: Frame) -> None:
        """Take a decoded frame from the bus (dispatcher)."""
        node = getattr(frame, "node", None)
        if node not in self.health:
            return
        h = self.health[node]
        if isinstance(frame, Heartbeat):
            h.last_heartbeat = t
            h.state = frame.state
            if (self.started_at is not None and self.policy.stop_on_node_not_operational
                    and frame.state == NodeState.BOOT_UP):
                self._raise_fault("node_reset", node, fault_message("node_reset", node=node))
        elif isinstance(frame, Emcy):
            h.emcy.append(frame.error_code)
            self._event("emcy", node=node, error_code=frame.error_code,
                        error_register=int(frame.error_register), motor=frame.motor)
            if frame.error_code == EmcyCode.ENCODER_FAULT and self.policy.stop_on_encoder_fault:
                motor = "HV"[frame.motor] if frame.motor in (0, 1) else "?"
                self._raise_fault("encoder_fault", node,
                                  fault_message("encoder_fault", node=node, motor=motor))
            if frame.error_code == EmcyCode.CURRENT_LIMIT and self.policy.stop_on_current_limit:
                self._raise_fault("current_limit", node,
                                  fault_message("current_limit", node=node))
        elif isinstance(frame, JointState):
            h.status = frame.status

    def note_stall(self, end: float, duration: float) -> None:
        """This process did not run for ``duration`` s before ``end`` (a late
        wake-up): that time does not count toward a heartbeat's age."""
        self._stalls = (self._stalls + [(end, duration)])[-64:]

    def heartbeat_age(self, n: int, now: float) -> float:
        """Seconds since node ``n`` was last heard (since the nodes were
        started, at the most), not counting the time this process stood still
        meanwhile: a heartbeat cannot be read while the PC is stalled, nor in
        the moment after, as it crosses the bus threads."""
        h = self.health[n]
        if self.started_at is None:
            return math.inf
        # the watch starts with the nodes: a heartbeat heard at bring-up counts
        # as heard then (the PC may have stood still between the two)
        last = max(h.last_heartbeat if h.last_heartbeat is not None else self.started_at,
                   self.started_at)
        stalled = sum(min(d, end - last) for end, d in self._stalls if end > last)
        return now - last - stalled

    def check(self) -> TrialFault | None:
        """Apply the heartbeat watch at the current time; the fault, if any."""
        now = self.clock.now()
        if self.policy.stop_on_lost_node and self.started_at is not None:
            for n, h in self.health.items():
                age = self.heartbeat_age(n, now)
                if age > self.policy.heartbeat_timeout:
                    last = h.last_heartbeat if h.last_heartbeat is not None else self.started_at
                    self._raise_fault("lost_node", n,
                                      fault_message("lost_node", node=n, age=now - last))
        return self.fault

    def nodes_ok(self) -> int:
        now = self.clock.now()
        return sum(1 for n, h in self.health.items() if h.last_heartbeat is not None
                   and self.heartbeat_age(n, now) <= self.policy.heartbeat_timeout)

    async def watch(self, period: float = 0.02) -> None:
        """Raise TrialFault as soon as a stopping condition appears.

        A wake-up more than a period late means this process was not running
        (a loaded machine): the heartbeats sent meanwhile are unread, so that
        round does not judge, and the stall does not count toward any node's
        silence (:meth:`heartbeat_age`). A node silent for good is found once
        it has been silent for the timeout of time the PC was running; a
        stalled PC does not call every node lost. The first round is due one
        period after the nodes were started (or now, before that): a stall
        before the watch first runs, as the trial's other tasks start, counts
        as one too."""
        t = self.clock.now()
        if self.started_at is not None:
            t = min(t, self.started_at + period)
        while True:
            now = self.clock.now()
            late = now - t > period
            if late:
                self.note_stall(now, now - t)
            fault = self.fault if late else self.check()
            if fault is not None:
                raise fault
            t = (now if late else t) + period
            await self.clock.sleep_until(t)

    async def confirm_safe_state(self, timeout: float = 0.3,
                                 on_frame: Callable | None = None) -> list[int]:
        """After :meth:`safe_stop`, keep reading for up to ``timeout`` s until every
        node's heartbeat reports pre-operational; record which did. Reading on
        also lets the NMT leave before the bus is closed (a TCP link closed with
        unread data is reset, and the reset can destroy the last frames sent)."""
        confirmed: set[int] = set()
        end = self.clock.now() + timeout
        while len(confirmed) < len(self.nodes):
            left = end - self.clock.now()
            if left <= 0:
                break
            got = await self._receive_decoded(left, on_frame)
            if got is None:
                continue
            frame = got[1]
            if isinstance(frame, Heartbeat) and frame.state == SAFE_STATE_HEARTBEAT:
                confirmed.add(frame.node)
        missing = [n for n in self.nodes if n not in confirmed]
        self._event("safe_state", confirmed=sorted(confirmed), missing=missing)
        return sorted(confirmed)

    def safe_stop(self, reason: str) -> None:
        """Put every node in the safe state (NMT enter pre-operational)."""
        ok = False
        for _ in range(3):  # the one frame that must go out: a longer timeout, retries
            ok = self.send_nmt(SAFE_STATE_COMMAND, timeout=0.1)
            if ok:
                break
        self._event("safe_stop", reason=reason, nmt=int(SAFE_STATE_COMMAND), sent=ok)
        log.info("safe stop (%s): NMT 0x%02X to all nodes%s", reason, SAFE_STATE_COMMAND,
                 "" if ok else " FAILED")
