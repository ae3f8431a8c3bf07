"""Clocks for services: one monotonic trial clock, injectable.

A clock has ``now()`` (seconds since the trial's start) and ``await
sleep_until(t)``. :class:`TrialClock` runs on ``time.monotonic``;
:class:`VirtualClock` jumps to each deadline at once, so services that only wait
on the clock run in virtual time in tests.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["TrialClock", "VirtualClock"]


class TrialClock:
    """Seconds since construction on the monotonic clock."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self.wall_start = time.time()

    def now(self) -> float:
        return time.monotonic() - self._t0

    def ns(self) -> int:
        """Integer nanoseconds on the trial clock (log timestamps)."""
        return int(round(self.now() * 1e9))

    async def sleep_until(self, t: float, precise: bool = False) -> None:
        """Sleep until trial time t. ``precise``: sleep to SPIN_MARGIN before t,
        then yield to the loop until t (sub-millisecond wake-up, costs a little
        CPU each time; for the streamer's deadlines)."""
        delay = t - self.now() - (SPIN_MARGIN if precise else 0.0)
        if delay > 0:
            await asyncio.sleep(delay)
        if precise:
            while self.now() < t:
                await asyncio.sleep(0)
        elif delay <= 0:
            await asyncio.sleep(0)


SPIN_MARGIN = 0.002
"""How long before a precise deadline the clock stops sleeping and spins."""


class VirtualClock:
    """A clock that only moves when someone sleeps: sleeping until t sets now to
    t (and yields to the loop). Deterministic and instant."""

    def __init__(self, t0: float = 0.0) -> None:
        self._t = t0
        self.wall_start = 0.0

    def now(self) -> float:
        return self._t

    def ns(self) -> int:
        return int(round(self._t * 1e9))

    def advance(self, dt: float) -> None:
        self._t += dt

    async def sleep_until(self, t: float, precise: bool = False) -> None:
        if t > self._t:
            self._t = t
        await asyncio.sleep(0)
