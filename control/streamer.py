"""The 10 Hz reference streamer: REF for every node, then one SYNC, on absolute
deadlines.

Period k is due at ``t0 + k T``; the streamer sleeps until then on the injected
clock, so there is no drift however long the trial. A period whose send starts
more than ``late_tolerance`` after its deadline is counted late; if whole periods
have passed (the loop was blocked), they are counted missed and skipped, never
sent in a burst. The references are the gait's at the period's nominal time
(clamped to the joint limits by the gait code). STATE replies are matched to
their SYNC by the echoed counter.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from aiko.firmware_interface.codec import JointState, Ref, Sync, encode

from .gait import Gait, references, soft_start_times

__all__ = ["ReferenceStreamer", "StreamStats", "PeriodRecord"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PeriodRecord:
    """What one period sent: its index, nominal gait time, deadline and actual
    send time on the trial clock, the SYNC counter and the references (n, 4)."""

    k: int
    t_gait: float
    deadline: float
    sent: float
    counter: int
    refs: np.ndarray


@dataclass
class StreamStats:
    periods: int = 0
    late: int = 0
    missed: int = 0
    send_failures: int = 0
    states_matched: int = 0
    states_unmatched: int = 0
    jitter: list[float] = field(default_factory=list)       # send - deadline, s
    round_trips: list[float] = field(default_factory=list)  # SYNC to STATE, s


class ReferenceStreamer:
    """Streams a gait to joints ``nodes`` (node i drives joint i) through ``can_io``."""

    def __init__(self, can_io, gait: Gait, nodes: list[int], clock, period: float = 0.1,
                 late_tolerance: float = 0.01,
                 on_period: Callable[[PeriodRecord], None] | None = None) -> None:
        self.can_io = can_io
        self.gait = gait
        self.nodes = list(nodes)
        self.clock = clock
        self.period = period
        self.late_tolerance = late_tolerance
        self.on_period = on_period or (lambda rec: None)
        self.stats = StreamStats()
        self._n_joints = max(self.nodes) if self.nodes else 0
        self._t_start = soft_start_times(gait, self._n_joints)
        self._pending: dict[int, tuple[float, set[int]]] = {}
        self.t0: float | None = None
        self.counter = 0

    def refs_at(self, t_gait: float) -> np.ndarray:
        """(len(nodes), 4) references for the streamed nodes at gait time t."""
        r = references(self.gait, t_gait, self._n_joints, t_start=self._t_start)
        return r[[n - 1 for n in self.nodes]]

    def send_period(self, k: int, deadline: float) -> PeriodRecord:
        """Send REF for every node then one SYNC; record and return the period."""
        sent = self.clock.now()
        t_gait = k * self.period
        refs = self.refs_at(t_gait)
        ok = True
        for node, r in zip(self.nodes, refs, strict=True):
            ok &= self.can_io.send(*encode(Ref(node, float(r[0]), float(r[1]), float(r[2]),
                                               float(r[3]))))
        counter = self.counter
        ok &= self.can_io.send(*encode(Sync(counter)))
        if not ok:
            self.stats.send_failures += 1
        self._pending[counter] = (sent, set(self.nodes))
        self._pending.pop((counter - 8) % 256, None)  # replies older than 8 periods: lost
        self.counter = (counter + 1) % 256
        self.stats.periods += 1
        self.stats.jitter.append(sent - deadline)
        rec = PeriodRecord(k, t_gait, deadline, sent, counter, refs)
        self.on_period(rec)
        return rec

    def on_state(self, t: float, frame: JointState) -> None:
        """Match a STATE reply to the SYNC whose counter it echoes."""
        pend = self._pending.get(frame.sync_echo)
        if pend is None or frame.node not in pend[1]:
            self.stats.states_unmatched += 1
            return
        pend[1].discard(frame.node)
        self.stats.states_matched += 1
        self.stats.round_trips.append(t - pend[0])

    async def run(self, duration: float | None = None) -> None:
        """Stream until ``duration`` seconds of gait have been sent (forever if None)."""
        self.t0 = self.clock.now()
        n_periods = math.inf if duration is None else int(math.floor(duration / self.period + 1e-9)) + 1
        k = 0
        while k < n_periods:
            deadline = self.t0 + k * self.period
            await self.clock.sleep_until(deadline, precise=True)
            now = self.clock.now()
            behind = int(math.floor((now - deadline) / self.period + 1e-9))
            if behind >= 1:  # whole periods lost: skip them, do not burst
                self.stats.missed += behind
                log.warning("streamer %d period(s) behind: skipped", behind)
                k += behind
                if k >= n_periods:
                    break
                deadline = self.t0 + k * self.period
            if now - deadline > self.late_tolerance:
                self.stats.late += 1
            self.send_period(k, deadline)
            k += 1
