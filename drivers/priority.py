"""Scheduling priority for the processes that keep time.

A joint module answers a SYNC within milliseconds because its control loop
has a processor of its own. On a shared PC the processes that stand in for
that loop (the emulated modules) and the one that streams the references (the
trial runner) get the same guarantee from the kernel's real-time class:
:func:`request_realtime` asks for ``SCHED_FIFO`` at a modest priority with
``SCHED_RESET_ON_FORK`` (children, such as the physics process, start in the
normal class again). Linux grants it to root, to a process with
``CAP_SYS_NICE`` or within an ``rtprio`` limit (``ulimit -r``,
``/etc/security/limits.conf``); elsewhere the process keeps its normal
priority and the answer says so. The kernel's real-time throttling (by
default 95 % of each second) still leaves the rest of the machine a share.
:func:`freeze_heap` keeps the garbage collector's full passes out of their
timing.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Priority", "request_realtime", "request_normal", "freeze_heap",
           "RealtimeGovernor", "REALTIME_PRIORITY"]

REALTIME_PRIORITY = 10
"""SCHED_FIFO priority asked for (1..99): above every normal process, below
the kernel's own real-time threads (50) and any audio or control loops a lab
may run higher."""


@dataclass(frozen=True)
class Priority:
    """What the process got: ``realtime`` True with the FIFO priority, or
    False with the reason."""

    realtime: bool
    priority: int = 0
    reason: str = ""

    def __str__(self) -> str:
        if self.realtime:
            return f"real-time (SCHED_FIFO {self.priority})"
        return f"normal ({self.reason})"


def request_realtime(priority: int = REALTIME_PRIORITY) -> Priority:
    """Move the calling process (all its threads made from now on) into
    SCHED_FIFO at ``priority``; never raises."""
    if not hasattr(os, "sched_setscheduler"):
        return Priority(False, reason="no real-time scheduling on this system")
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK,
                              os.sched_param(priority))
    except PermissionError:
        return Priority(False, reason="not permitted: needs CAP_SYS_NICE or an rtprio limit")
    except OSError as exc:
        return Priority(False, reason=f"refused: {exc.strerror}")
    return Priority(True, priority)


def request_normal() -> None:
    """Back to the normal class (SCHED_OTHER, nice unchanged); never raises."""
    if hasattr(os, "sched_setscheduler"):
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass


class RealtimeGovernor:
    """A compute-bound process's place in the real-time class (the simulated
    Aiko's physics, the parallel model): asked for by :meth:`request` at
    ``priority`` (None: never), left after ``limit`` s of work without once
    catching up (:meth:`stepped` after each piece of work, :meth:`caught_up`
    when there is none left), counted in ``demoted``, asked for again once
    caught up. A machine too slow for the process never loses a core to it
    for long: the process falls behind, honestly, in the normal class.
    ``request`` and ``normal`` change the calling process's class (tests
    give stand-ins)."""

    def __init__(self, priority: int | None, limit: float,
                 request: Callable[[int], Priority] = request_realtime,
                 normal: Callable[[], None] = request_normal) -> None:
        self.priority = priority
        self.limit = limit
        self._request, self._normal = request, normal
        self.granted = Priority(False, reason="not asked for")
        self.active = False
        self.demoted = 0
        self._busy_since: float | None = None

    def request(self) -> Priority:
        if self.priority is not None:
            self.granted = self._request(self.priority)
        self.active = self.granted.realtime
        return self.granted

    def stepped(self, now: float) -> None:
        """A piece of work was done at ``now`` (monotonic s)."""
        if self._busy_since is None:
            self._busy_since = now
        elif self.active and now - self._busy_since > self.limit:
            self._normal()
            self.active = False
            self.demoted += 1

    def caught_up(self) -> None:
        """Nothing left to do: the process waits for more."""
        self._busy_since = None
        if self.granted.realtime and not self.active:
            self.request()


def freeze_heap(collect: bool = True) -> None:
    """Collect the heap once and freeze it: call when a process has imported
    and loaded what it needs, before it starts keeping time. A full pass of
    the garbage collector over a process that loaded the model's kernels,
    numpy and cantools takes tens of ms (75 ms in the simulated Aiko's
    modules' process; a process that also ran matplotlib and dask: several
    100 ms), enough to make a period late, an answer miss its SYNC or a node
    look lost; frozen, the collector scans only what is made afterwards.
    ``collect=False`` freezes without that first pass (where the pass would
    cost as much as the one the freeze may save: a trial in virtual time);
    cyclic garbage frozen with the heap waits for ``gc.unfreeze``."""
    if collect:
        gc.collect()
    gc.freeze()
