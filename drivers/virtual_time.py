"""Virtual time for asyncio: an event loop whose clock is the simulation's.

:class:`VirtualTimeLoop` is a selector event loop whose ``time()`` starts at 0
and moves only when nothing is left to do now: every callback that is ready
has run and no descriptor is readable (a frame waiting on a
:class:`~aiko.firmware_interface.loop_bus.LoopBus`, say). Then the clock jumps
to the next timer (``asyncio.sleep``, ``asyncio.timeout``, ``call_later``)
and the loop goes on. A discrete-event simulation, in lockstep: every party
on the loop has done its work up to now before time moves, nothing waits on
the wall, nothing can be late, and a run takes as long as its computation.
The same program gives the same sequence of events on any machine, loaded or
idle.

What runs in virtual time must run on the loop: a thread's or another
process's work is not waited for while timers are pending (a loop with no
timer and nothing ready does wait for the world, as a thread's result or a
signal). :class:`LoopClock` is the trial clock on the running loop's time.

    result = run_virtual(main())      # as asyncio.run(main()), in virtual time

The idea is that of looptime (a fast-forwarded loop time for tests) and of
SimPy's discrete-event clock; here it runs a whole hardware-in-the-loop stack.
"""

from __future__ import annotations

import asyncio
import math
import selectors
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["VirtualTimeLoop", "LoopClock", "run_virtual", "in_virtual_time"]

T = TypeVar("T")


class _VirtualSelector(selectors.BaseSelector):
    """A selector that polls its descriptors without waiting and, when none
    is ready and a timer is pending, moves the loop's clock to it."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop
        self._real = selectors.DefaultSelector()

    def register(self, fileobj, events, data=None):
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj):
        return self._real.unregister(fileobj)

    def modify(self, fileobj, events, data=None):
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None):
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:       # nothing scheduled: wait for the world
            return self._real.select(None)
        self._loop.advance(timeout)
        return []

    def readable(self) -> bool:
        """Whether a registered descriptor is ready now (no waiting)."""
        return bool(self._real.select(0))

    def close(self) -> None:
        self._real.close()

    def get_key(self, fileobj):
        return self._real.get_key(fileobj)

    def get_map(self):
        return self._real.get_map()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """See the module docstring. ``advances`` counts the jumps of the clock;
    ``wall_start`` is when the loop was made (metadata, never a time of
    the run)."""

    def __init__(self) -> None:
        self._now = 0.0
        self.advances = 0
        self.wall_start = time.time()
        self._polled = _VirtualSelector(self)
        super().__init__(selector=self._polled)

    def time(self) -> float:
        return self._now

    def advance(self, dt: float) -> None:
        """Move the clock ``dt`` s ahead (the selector does, when idle)."""
        if dt > 0:
            self._now += dt
            self.advances += 1

    def next_event(self) -> float:
        """The loop time of the next thing the loop will do: now if a
        callback is ready or a descriptor readable (a frame waiting on a loop
        bus), else the earliest timer not cancelled (inf: none).
        Until then nothing on the loop runs, so a party whose future no one
        can observe before then may compute up to it at once (the simulated
        Aiko's ticks between two frames). Reads asyncio's own queues of this
        loop (``_ready``, ``_scheduled``)."""
        # asyncio's BaseEventLoop keeps its ready callbacks and timers in these
        if self._ready or self._polled.readable():  # type: ignore[attr-defined]
            return self._now
        timers = self._scheduled  # type: ignore[attr-defined]  # a heap by time
        if timers and not timers[0].cancelled():
            return timers[0].when()
        return min((h.when() for h in timers if not h.cancelled()), default=math.inf)


def in_virtual_time() -> bool:
    """Whether the running loop keeps virtual time."""
    try:
        return isinstance(asyncio.get_running_loop(), VirtualTimeLoop)
    except RuntimeError:
        return False


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to its end on a new :class:`VirtualTimeLoop` (as
    ``asyncio.run`` does on a real one: the loop's async generators and
    executor shut down, the loop closed).

    ``main``'s result is handed back past the runner's task: on its way out
    asyncio's runner looks up the SIGINT handler it set, a partial holding
    that task, and the lookup formats the task with its result (the whole
    result's repr, then cut short: 20-30 ms for a trial's arrays)."""
    if not asyncio.iscoroutine(main):
        raise ValueError(f"a coroutine was expected, got {main!r}")
    box: list[T] = []

    async def kept() -> None:
        box.append(await main)

    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        runner.run(kept())
    return box[0]


class LoopClock:
    """The trial clock on the running loop's time: ``now()`` seconds since the
    clock was made, ``sleep_until(t)`` an ``asyncio.sleep``. On a
    :class:`VirtualTimeLoop` it is virtual time; ``precise`` is accepted and
    needs nothing (a virtual deadline is met exactly)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._t0 = self._loop.time()
        self.wall_start = time.time()

    def now(self) -> float:
        return self._loop.time() - self._t0

    def ns(self) -> int:
        """Integer nanoseconds on the trial clock (log timestamps)."""
        return int(round(self.now() * 1e9))

    def next_event(self) -> float:
        """The trial time of the loop's next event
        (:meth:`VirtualTimeLoop.next_event`); now on a loop that keeps real
        time (anything may happen at any moment)."""
        if isinstance(self._loop, VirtualTimeLoop):
            return self._loop.next_event() - self._t0
        return self.now()

    async def sleep_until(self, t: float, precise: bool = False) -> None:
        delay = t - self.now()
        await asyncio.sleep(delay if delay > 0 else 0)
