"""The trial's parts: small objects that each own their state, wired together
by :func:`aiko.experiments.trial.runner.run_trial`, most running as one named
task of the trial's TaskGroup. Whatever they make goes out as records through
the trial's :class:`~aiko.experiments.trial.fanout.Fanout`.

* :class:`Phases`: which phase the trial is in; each change an event.
* :class:`GaitPeriods`: the gait's first and last periods, and the STATE
  replies to the first (the model's start posture).
* :class:`CanDispatcher` (task ``can-dispatch``): decodes every received frame
  for the supervisor, the streamer and the log.
* :class:`StreamPhases` (task ``streamer``): the ramp to the start posture,
  the gait, the wind-down's ramp; ends the trial by raising :class:`TrialDone`.
* :func:`watch_child` (tasks ``watch-NAME``): a child process's exit is a fault.
* :class:`Reporter` (task ``status``): a status snapshot twice a second.

The mocap sink and the steering are in :mod:`.mocap_sink`, the parallel
model's side in :mod:`.model_service`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from aiko.control.gait import JOINT_LIMIT
from aiko.control.preflight import OMEGA_MAX
from aiko.control.ramp import RAMP_DUTY, RAMP_SKIP, RAMP_TOLERANCE
from aiko.control.streamer import PeriodRecord, ReferenceStreamer
from aiko.control.supervisor import Supervisor, TrialFault
from aiko.firmware_interface.codec import Emcy, FrameError, JointState, decode

from .fanout import EmcyReceived, Event, Fanout, FrameReceived, StateReceived, Status

if TYPE_CHECKING:
    from .runner import TrialConfig

__all__ = ["Phases", "GaitPeriods", "CanDispatcher", "StreamPhases", "TrialDone",
           "watch_child", "blame_exited_child", "Reporter", "SETTLE_TIMEOUT"]

log = logging.getLogger(__name__)

SETTLE_TIMEOUT = 1.0
"""How long after a ramp's end the joints may take to come within tolerance, s."""


class TrialDone(Exception):
    """The streamer has sent its last period."""


class Phases:
    """The trial's current phase; entering one is an event."""

    def __init__(self, clock, fanout: Fanout) -> None:
        self.clock = clock
        self.fanout = fanout
        self.current: str | None = None

    def enter(self, name: str, **data) -> None:
        self.current = name
        self.fanout.emit(Event(self.clock.now(), "phase", {"phase": name, **data}))
        log.info("phase %s", name)


class GaitPeriods:
    """The gait's first and last periods sent, and every node's STATE reply to
    the first period's SYNC."""

    def __init__(self, n_nodes: int, period: float) -> None:
        self.n_nodes = n_nodes
        self.period = period
        self.first: PeriodRecord | None = None
        self.last: PeriodRecord | None = None
        self.first_states: dict[int, JointState] = {}
        self._started = asyncio.Event()
        self._all_states = asyncio.Event()

    def on_period(self, rec: PeriodRecord) -> None:
        if rec.phase != "gait":
            return
        if self.first is None:
            self.first = rec
            self._started.set()
        self.last = rec

    def on_state(self, frame: JointState) -> None:
        if (self.first is not None and frame.sync_echo == self.first.counter
                and frame.node not in self.first_states):
            self.first_states[frame.node] = frame
            if len(self.first_states) == self.n_nodes:
                self._all_states.set()

    async def started(self) -> PeriodRecord:
        """The gait's first period, once it is sent."""
        await self._started.wait()
        assert self.first is not None
        return self.first

    async def first_states_within(self, timeout: float) -> dict[int, JointState]:
        """The STATE replies to the first period, waiting up to ``timeout`` s for all."""
        try:
            await asyncio.wait_for(self._all_states.wait(), timeout)
        except TimeoutError:
            pass
        return self.first_states

    @property
    def t_gait0(self) -> float | None:
        """When the gait's first period was sent (trial clock, s)."""
        return self.first.sent if self.first is not None else None

    @property
    def t_gait_end(self) -> float | None:
        """One period after the gait's last period was sent."""
        return self.last.sent + self.period if self.last is not None else None


class CanDispatcher:
    """Decodes every received frame: to the supervisor, the streamer (STATE),
    the gait's first period's replies, and the fan-out (a frame that does not
    decode is logged with why, and nothing else)."""

    def __init__(self, can_io, fanout: Fanout, supervisor: Supervisor,
                 streamer: ReferenceStreamer, periods: GaitPeriods) -> None:
        self.can_io = can_io
        self.fanout = fanout
        self.supervisor = supervisor
        self.streamer = streamer
        self.periods = periods

    def on_raw(self, rx) -> None:
        """A frame seen outside the dispatch loop (bring-up, safe state):
        logged, with why when it does not decode (as in the loop)."""
        self._logged(rx)

    def _logged(self, rx):
        """The frame, logged with the codec's verdict; None if it does not decode."""
        try:
            frame = decode(rx.arbitration_id, rx.data)
        except FrameError as exc:
            self.fanout.emit(FrameReceived(rx, str(exc)))
            return None
        self.fanout.emit(FrameReceived(rx))
        return frame

    async def run(self) -> None:
        while True:
            self.on_frame(await self.can_io.receive())

    def on_frame(self, rx) -> None:
        frame = self._logged(rx)
        if frame is None:
            return
        self.supervisor.on_frame(rx.t, frame)
        if isinstance(frame, JointState):
            self.streamer.on_state(rx.t, frame)
            self.periods.on_state(frame)
            self.fanout.emit(StateReceived(rx.t, frame))
        elif isinstance(frame, Emcy):
            self.fanout.emit(EmcyReceived(rx.t, frame))


class StreamPhases:
    """The streaming phases: the ramp to the gait's start posture, the gait for
    the trial's duration (``on_gait_end()`` after its last period), with
    ``end="straight"`` the wind-down's ramp to 0; then :class:`TrialDone`.
    ``ramps`` holds each ramp's report by phase."""

    def __init__(self, streamer: ReferenceStreamer, config: TrialConfig, clock,
                 phases: Phases, fanout: Fanout,
                 on_gait_end: Callable[[], None] = lambda: None) -> None:
        self.streamer = streamer
        self.config = config
        self.clock = clock
        self.phases = phases
        self.fanout = fanout
        self.on_gait_end = on_gait_end
        self.ramps: dict[str, dict] = {}

    async def run(self) -> None:
        cfg = self.config
        self.phases.enter("ramp", ramp_time=cfg.ramp_time, duty=RAMP_DUTY,
                          tolerance_deg=math.degrees(RAMP_TOLERANCE))
        goal = self.streamer.refs_at(0.0)[:, :2]
        rep = await self.streamer.ramp_to(goal, duration=cfg.ramp_time,
                                          speed=RAMP_DUTY * OMEGA_MAX, max_speed=OMEGA_MAX,
                                          skip=RAMP_SKIP, settle_timeout=SETTLE_TIMEOUT,
                                          phase="ramp", read_timeout=cfg.startup_timeout)
        self._ramp_done("ramp", rep)
        self.phases.enter("gait", duration=cfg.duration)
        await self.streamer.run(cfg.duration)
        self.on_gait_end()  # the model need not wait for the wind-down
        if cfg.end == "straight" and self.streamer.last is not None:
            await self._ramp_to_straight(self.streamer.last.refs)
        else:
            # the last SYNC's replies are on their way: give them one period
            await self.clock.sleep_until(self.clock.now() + cfg.period)
        raise TrialDone

    async def _ramp_to_straight(self, last: np.ndarray) -> None:
        self.phases.enter("wind-down", end="straight")
        start = np.clip(last[:, :2] + last[:, 2:] * self.config.period,
                        -JOINT_LIMIT, JOINT_LIMIT)
        rep = await self.streamer.ramp_to(np.zeros_like(start), start=start,
                                          speed=RAMP_DUTY * OMEGA_MAX,
                                          settle_timeout=SETTLE_TIMEOUT, phase="wind-down")
        self._ramp_done("wind-down", rep)

    def _ramp_done(self, phase: str, rep) -> None:
        self.ramps[phase] = rep.to_dict()
        self.fanout.emit(Event(self.clock.now(), "ramp_done", self.ramps[phase]))


CHILD_POLL = 0.02
"""Seconds between looks at a child's exit status."""


async def watch_child(child) -> None:
    """Wait for a child process (:class:`aiko.experiments.trial.processes.Child`)
    to end: that is a fault. Its exit status is watched, not ``wait()``: on
    Python 3.11 that also waits for every holder of its output pipes to close
    them, and the simulated Aiko's helpers (its physics process,
    multiprocessing's resource tracker) hold them a few tenths of a second
    longer, while the joint modules' heartbeats are missed after 0.3 s."""
    while child.proc.returncode is None:
        await asyncio.sleep(CHILD_POLL)
    raise _exit_fault(child)


def _exit_fault(child, seen_first: str = "") -> TrialFault:
    """The fault of a child's exit (and what the trial saw before it)."""
    tail = f"; seen first: {seen_first}" if seen_first else ""
    return TrialFault("process_exited", None,
                      f"the {child.name} (pid {child.pid}) stopped: {child.describe_exit()}{tail}")


def blame_exited_child(fault: TrialFault | None, children) -> TrialFault | None:
    """The fault a trial ends with, named by its cause: if a child whose exit
    stops the trial (``children``) has ended and the fault is not that exit,
    the exit, with the fault seen first after it. A dead simulated Aiko's
    modules miss their heartbeats 0.3 s later, and a trial process short of
    processor time may see them missed before it looks at the child again
    (:data:`CHILD_POLL`); asked after the safe stop, the child's status is
    known by then."""
    if fault is None or fault.kind == "process_exited":
        return fault
    for child in children:
        if child.proc.returncode is not None:
            return _exit_fault(child, fault.reason)
    return fault


class Reporter:
    """Twice a second: a :class:`~.fanout.Status` record (the log flushes on it)
    and the snapshot to ``status`` (the command line's status line)."""

    INTERVAL = 0.5

    def __init__(self, clock, fanout: Fanout, snapshot: Callable[[], dict],
                 status: Callable[[dict], None] | None = None) -> None:
        self.clock = clock
        self.fanout = fanout
        self.snapshot = snapshot
        self.status = status

    async def run(self) -> None:
        k = 0
        t0 = self.clock.now()
        while True:
            k += 1
            await self.clock.sleep_until(t0 + self.INTERVAL * k)
            snap = self.snapshot()
            self.fanout.emit(Status(snap["t"], snap, k))
            if self.status is not None:
                self.status(snap)
