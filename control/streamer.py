"""The 10 Hz reference streamer: REF for every node, then one SYNC, on absolute
deadlines, through the phases of a trial.

Period k is due at ``t0 + k T`` (t0: the first period of the trial, whatever
its phase); the streamer sleeps until then on the injected clock, so there is
no drift however long the trial. A period whose send starts more than
``late_tolerance`` after its deadline is counted late; if whole periods have
passed (the loop was blocked), they are counted missed and skipped, never sent
in a burst. STATE replies are matched to their SYNC by the echoed counter.

Phases (each an ``async`` method, run one after the other by the trial):

* :meth:`read_angles`: SYNCs without REF (the modules keep the angles they
  hold, nothing moves) until every node has answered with its angles;
* :meth:`ramp_to`: the references of :mod:`aiko.control.ramp` from those
  angles (or given ones) to a goal, then the goal until every joint's STATE is
  within the tolerance; a :class:`~aiko.control.supervisor.TrialFault` names
  the joints that did not get there;
* :meth:`run`: the gait, its references at the period's gait time (clamped to
  the joint limits by the gait code).

A phase that decides at a deadline that it is done leaves that deadline to
the next phase, so phases follow each other without a gap in the 10 Hz
schedule.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from aiko.firmware_interface.codec import JointState, Ref, Sync, encode
from aiko.firmware_interface.delays import DelayHistogram

from .gait import JOINT_LIMIT, Gait, references, soft_start_times
from .ramp import RAMP_TOLERANCE, ramp_duration, ramp_peak_speed, ramp_references
from .supervisor import TrialFault

__all__ = ["ReferenceStreamer", "StreamStats", "PeriodRecord", "RampReport", "TIMING_BIN",
           "TIMING_BINS"]

TIMING_BIN = 50e-6
TIMING_BINS = 20_000
"""The period jitter and the SYNC->STATE round trips go into histograms of
0.05 ms bins up to 1 s (the last bin holds anything longer; the maximum is
kept exactly): a trial of any length keeps 160 kB each, not every value."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PeriodRecord:
    """What one period sent: its index since streaming began, the gait time
    (None outside the gait), deadline and actual send time on the trial clock,
    the SYNC counter, the references (n, 4), the phase (``ramp``, ``gait``,
    ``wind-down``) and the steering offset they include."""

    k: int
    t_gait: float | None
    deadline: float
    sent: float
    counter: int
    refs: np.ndarray
    phase: str = "gait"
    offset: float = 0.0      # the steering offset phi_0 in refs' horizontal column, rad


@dataclass
class StreamStats:
    periods: int = 0
    late: int = 0
    missed: int = 0
    send_failures: int = 0
    states_matched: int = 0
    states_unmatched: int = 0
    # send - deadline of every period, s
    jitter: DelayHistogram = field(default_factory=lambda: DelayHistogram(TIMING_BIN, TIMING_BINS))
    # SYNC to STATE of every matched reply, s
    round_trips: DelayHistogram = field(
        default_factory=lambda: DelayHistogram(TIMING_BIN, TIMING_BINS))


@dataclass(frozen=True)
class RampReport:
    """A ramp as it went: angles (n, 2) rad, durations s, speed rad/s."""

    start: np.ndarray
    goal: np.ndarray
    duration: float
    periods: int
    peak_speed: float
    settle_periods: int
    max_error: float         # largest |STATE - goal| when it was declared reached

    def to_dict(self) -> dict:
        return {"start_deg": np.degrees(self.start).round(3).tolist(),
                "goal_deg": np.degrees(self.goal).round(3).tolist(),
                "duration": self.duration, "periods": self.periods,
                "peak_speed": self.peak_speed, "settle_periods": self.settle_periods,
                "max_error_deg": math.degrees(self.max_error)}


class ReferenceStreamer:
    """Streams to joints ``nodes`` (node i drives joint i) through ``can_io``."""

    def __init__(self, can_io, gait: Gait, nodes: list[int], clock, period: float = 0.1,
                 late_tolerance: float = 0.01,
                 on_period: Callable[[PeriodRecord], None] | None = None,
                 steer: Callable[[float, float], float] | None = None) -> None:
        self.can_io = can_io
        self.gait = gait
        self.nodes = list(nodes)
        self.clock = clock
        self.period = period
        self.late_tolerance = late_tolerance
        self.on_period = on_period or (lambda rec: None)
        self.steer = steer
        self.stats = StreamStats()
        self._n_joints = max(self.nodes) if self.nodes else 0
        self._t_start = soft_start_times(gait, self._n_joints)
        self._pending: dict[int, tuple[float, set[int]]] = {}
        self._replies: dict[int, dict[int, JointState]] = {}
        self._k = 0
        self._held: tuple[int, float] | None = None
        self.t0: float | None = None
        self.counter = 0
        self.last: PeriodRecord | None = None

    # ------------------------------------------------------------ schedule
    async def _tick(self) -> tuple[int, float]:
        """Wait for the next period's deadline, skipping whole periods missed:
        (period index, deadline). A deadline left by the previous phase comes
        back at once."""
        if self._held is not None:
            held, self._held = self._held, None
            return held
        if self.t0 is None:
            self.t0 = self.clock.now()
        deadline = self.t0 + self._k * self.period
        await self.clock.sleep_until(deadline, precise=True)
        now = self.clock.now()
        behind = int(math.floor((now - deadline) / self.period + 1e-9))
        if behind >= 1:  # whole periods lost: skip them, do not burst
            self.stats.missed += behind
            log.warning("streamer %d period(s) behind: skipped", behind)
            self._k += behind
            deadline = self.t0 + self._k * self.period
        if now - deadline > self.late_tolerance:
            self.stats.late += 1
        k = self._k
        self._k += 1
        return k, deadline

    def _leave(self, tick: tuple[int, float]) -> None:
        """Hand a deadline this phase did not use to the next phase."""
        self._held = tick

    # -------------------------------------------------------------- sending
    def refs_at(self, t_gait: float, offset: float = 0.0) -> np.ndarray:
        """(len(nodes), 4) gait references for the streamed nodes at gait time
        t, with a steering offset (rad) added to the horizontal joints (clamped
        to the joint limits like the gait, zero rate where clamped)."""
        r = references(self.gait, t_gait, self._n_joints, t_start=self._t_start)
        r = r[[n - 1 for n in self.nodes]]
        if offset:
            h = r[:, 0] + offset
            r[:, 0] = np.clip(h, -JOINT_LIMIT, JOINT_LIMIT)
            r[:, 2] = np.where(np.abs(h) > JOINT_LIMIT, 0.0, r[:, 2])
        return r

    def send_period(self, k: int, deadline: float, refs: np.ndarray | None = None,
                    phase: str = "gait", t_gait: float | None = None) -> PeriodRecord:
        """Send REF for every node then one SYNC; record and return the period.
        Without ``refs``, the gait's at t_gait (default k periods), steered by
        the offset ``steer(now, t_gait)`` gives, if a steering loop is set."""
        sent = self.clock.now()
        offset = 0.0
        if refs is None:
            t_gait = k * self.period if t_gait is None else t_gait
            if self.steer is not None:
                offset = float(self.steer(sent, t_gait))
            refs = self.refs_at(t_gait, offset)
        ok = True
        for node, r in zip(self.nodes, refs, strict=True):
            ok &= self.can_io.send(*encode(Ref(node, float(r[0]), float(r[1]), float(r[2]),
                                               float(r[3]))))
        counter = self._sync(ok)
        self.stats.jitter.add(sent - deadline)
        rec = PeriodRecord(k, t_gait, deadline, sent, counter, np.asarray(refs), phase, offset)
        self.last = rec
        self.on_period(rec)
        return rec

    def _sync(self, ok: bool = True) -> int:
        counter = self.counter
        old = (counter - 8) % 256  # replies older than 8 periods: lost
        self._pending.pop(old, None)
        self._replies.pop(old, None)
        self._replies[counter] = {}
        self.counter = (counter + 1) % 256
        # the round trip starts with the SYNC itself, after the period's REFs
        # (before a reply can come)
        self._pending[counter] = (self.clock.now(), set(self.nodes))
        ok &= self.can_io.send(*encode(Sync(counter)))
        if not ok:
            self.stats.send_failures += 1
        self.stats.periods += 1
        return counter

    def on_state(self, t: float, frame: JointState) -> None:
        """Match a STATE reply to the SYNC whose counter it echoes."""
        pend = self._pending.get(frame.sync_echo)
        if pend is None or frame.node not in pend[1]:
            self.stats.states_unmatched += 1
            return
        pend[1].discard(frame.node)
        self._replies[frame.sync_echo][frame.node] = frame
        self.stats.states_matched += 1
        self.stats.round_trips.add(t - pend[0])

    def replies(self, counter: int) -> dict[int, JointState]:
        """The STATE replies received so far to the SYNC with ``counter``."""
        return dict(self._replies.get(counter, {}))

    @staticmethod
    def _angles(replies: dict[int, JointState], nodes: list[int]) -> np.ndarray:
        out = np.full((len(nodes), 2), np.nan)
        for i, n in enumerate(nodes):
            st = replies.get(n)
            if st is not None:
                out[i] = st.alpha_h, st.alpha_v
        return out

    # --------------------------------------------------------------- phases
    async def read_angles(self, timeout: float = 1.0) -> np.ndarray:
        """Every node's (alpha_h, alpha_v) from STATE, (len(nodes), 2) rad: one
        SYNC without REF per period until one SYNC has been answered by all.
        TrialFault ``no_state`` naming the silent nodes after ``timeout`` s."""
        counter = None
        t_end = None
        while True:
            tick = await self._tick()
            if t_end is None:
                t_end = tick[1] + timeout
            if counter is not None:
                replies = self.replies(counter)
                if len(replies) == len(self.nodes):
                    self._leave(tick)
                    return self._angles(replies, self.nodes)
                if tick[1] >= t_end - 1e-9:
                    missing = [n for n in self.nodes if n not in replies]
                    raise TrialFault("no_state", missing[0],
                                     f"joint node{'s' if len(missing) > 1 else ''} "
                                     f"{', '.join(map(str, missing))} did not answer SYNC with "
                                     f"STATE within {timeout:g} s")
            counter = self._sync()
            self.stats.jitter.add(self.clock.now() - tick[1])

    async def ramp_to(self, goal: np.ndarray, *, start: np.ndarray | None = None,
                      duration: float | None = None, speed: float,
                      max_speed: float | None = None, tolerance: float = RAMP_TOLERANCE,
                      skip: float | None = None, settle_timeout: float = 1.0,
                      phase: str = "ramp", read_timeout: float = 1.0) -> RampReport:
        """Move every joint from ``start`` (default: read from STATE) to
        ``goal`` ((len(nodes), 2) rad) along the ramp profile, the fastest joint
        at ``speed`` rad/s (or in ``duration`` s), then hold ``goal`` until every
        joint's STATE is within ``tolerance``; no ramp at all (an empty report)
        when every joint starts within ``skip`` (default ``tolerance``) of the
        goal and no duration is given. TrialFault ``ramp_too_fast`` if
        the ramp would need more than ``max_speed``, ``ramp_incomplete`` naming
        the joints not there ``settle_timeout`` s after the ramp's end."""
        goal = np.clip(np.asarray(goal, dtype=float), -JOINT_LIMIT, JOINT_LIMIT)
        if start is None:
            start = await self.read_angles(read_timeout)
        start = np.asarray(start, dtype=float)
        if duration is None:
            duration = ramp_duration(start, goal, speed, self.period,
                                     tolerance if skip is None else max(skip, tolerance))
        plan = ramp_references(start, goal, duration, self.period)
        peak = ramp_peak_speed(plan)
        if max_speed is not None and peak > max_speed:
            raise TrialFault("ramp_too_fast", None,
                             f"a {duration:g} s ramp would need {math.degrees(peak):.0f} deg/s, "
                             f"more than the motors' {math.degrees(max_speed):.0f} deg/s")
        if len(plan) == 0:
            return RampReport(start, goal, 0.0, 0, 0.0, 0,
                              float(np.max(np.abs(goal - start), initial=0.0)))
        k0 = None
        last: PeriodRecord | None = None
        done = 0
        while done < len(plan):  # row by row in time (rows of missed periods skipped)
            tick = await self._tick()
            k0 = tick[0] if k0 is None else k0
            i = tick[0] - k0
            if i >= len(plan):
                self._leave(tick)
                break
            last = self.send_period(tick[0], tick[1], plan[i], phase)
            done = i + 1
        if done < len(plan):  # the loop stalled past the ramp's end: send its goal
            tick = await self._tick()
            last = self.send_period(tick[0], tick[1], plan[-1], phase)
        hold = plan[-1].copy()
        settle_end = None
        settle = 0
        while True:
            tick = await self._tick()
            settle_end = tick[1] + settle_timeout if settle_end is None else settle_end
            assert last is not None  # the plan sent one period at least
            err = np.abs(self._angles(self.replies(last.counter), self.nodes) - goal)
            err = np.where(np.isnan(err), np.inf, err)
            if np.all(err <= tolerance):
                self._leave(tick)
                return RampReport(start, goal, duration, len(plan), peak, settle,
                                  float(err.max(initial=0.0)))
            if tick[1] >= settle_end - 1e-9:
                raise TrialFault("ramp_incomplete", self._worst(err),
                                 self._not_reached(err, tolerance, phase))
            last = self.send_period(tick[0], tick[1], hold, phase)
            settle += 1

    def _worst(self, err: np.ndarray) -> int:
        return self.nodes[int(np.argmax(err.max(axis=1)))]

    def _not_reached(self, err: np.ndarray, tolerance: float, phase: str) -> str:
        bad = [f"{n} {'HV'[m]}" for i, n in enumerate(self.nodes) for m in (0, 1)
               if err[i, m] > tolerance]
        worst = np.unravel_index(int(np.argmax(err)), err.shape)
        far = ("no STATE" if not np.isfinite(err[worst])
               else f"{math.degrees(err[worst]):.1f} deg off")
        what = "the start posture" if phase == "ramp" else "the end posture"
        return (f"joint{'s' if len(bad) > 1 else ''} {', '.join(bad)} did not reach {what} "
                f"within {math.degrees(tolerance):g} deg (joint {self.nodes[worst[0]]} "
                f"{'HV'[worst[1]]}: {far})")

    async def run(self, duration: float | None = None) -> None:
        """Stream the gait until ``duration`` seconds of it have been sent
        (forever if None); its t = 0 is the first deadline this phase gets."""
        n_periods = (math.inf if duration is None
                     else int(math.floor(duration / self.period + 1e-9)) + 1)
        k0 = None
        done = 0
        while done < n_periods:
            tick = await self._tick()
            k0 = tick[0] if k0 is None else k0
            j = tick[0] - k0
            if j >= n_periods:
                self._leave(tick)
                break
            self.send_period(tick[0], tick[1], phase="gait", t_gait=j * self.period)
            done = j + 1
