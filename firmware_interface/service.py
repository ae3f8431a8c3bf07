"""Run emulated joint modules on a python-can bus, in real time.

:class:`EmulatedJoints` is an asyncio service: ``await joints.run()`` powers the
modules up and serves the bus until it is cancelled. The clock is injected
(``time.monotonic`` by default); frames a module schedules for later (reply
delays) wait in a heap until due.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import time
from collections.abc import Callable, Sequence

import can

from .bus_reader import BusReader
from .codec import encode
from .delays import DelayHistogram
from .emulator import JointModule, Outgoing
from .group import JointModules
from .inbox import FrameInbox
from .protocol import MAX_NODE_ID, STATE_BASE, SYNC_ID

__all__ = ["EmulatedJoints", "ANSWER_BIN"]

log = logging.getLogger(__name__)

ANSWER_BIN = 0.0005
ANSWER_BINS = 2000
"""The modules' answer times (a SYNC's arrival on the bus to each STATE put
on it) go into a histogram of 0.5 ms bins up to 1 s."""


class EmulatedJoints:
    """Joint modules sharing one python-can bus (any interface): a list, ticked
    one by one, or a group (a :class:`~aiko.firmware_interface.bank.ModuleBank`
    ticks all in one compiled call)."""

    def __init__(self, bus: can.BusABC, modules: Sequence[JointModule] | JointModules,
                 clock: Callable[[], float] = time.monotonic, tick: float = 0.002,
                 after_tick: Callable[[float], None] | None = None) -> None:
        self.bus = bus
        self.after_tick = after_tick
        self.group = modules if isinstance(modules, JointModules) else JointModules(modules)
        self.clock = clock
        self.tick_period = tick
        self.frames_in = 0
        self.frames_out = 0
        self.send_errors = 0
        self._heap: list[tuple[float, int, Outgoing]] = []
        self._seq = itertools.count()
        self.answers = DelayHistogram(ANSWER_BIN, ANSWER_BINS)
        self._sync_stamp: float | None = None    # bus timestamp of the last SYNC

    @property
    def modules(self) -> list[JointModule]:
        """The modules, as of now."""
        return self.group.modules

    def _answered(self, stamp: float) -> None:
        if self._sync_stamp is not None:
            self.answers.add(stamp - self._sync_stamp)

    def module(self, node: int) -> JointModule:
        return self.group.module(node)

    def queue(self, items: list[Outgoing]) -> None:
        """Frames to send, each at its time (``Outgoing.at``)."""
        for o in items:
            heapq.heappush(self._heap, (o.at, next(self._seq), o))

    def next_due(self) -> float:
        """When the earliest frame waiting to go out is due (inf: none)."""
        return self._heap[0][0] if self._heap else math.inf

    def _flush(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now + 1e-9:
            _, _, o = heapq.heappop(self._heap)
            ident, data = encode(o.frame)
            try:
                self.bus.send(can.Message(arbitration_id=ident, data=data, is_extended_id=False),
                              timeout=0.05)
                self.frames_out += 1
                if STATE_BASE < ident <= STATE_BASE + MAX_NODE_ID:
                    self._answered(time.time())
            except can.CanError as exc:
                self.send_errors += 1
                log.warning("emulated joint could not send 0x%03X: %s", ident, exc)

    async def run(self) -> None:
        """Power the modules up and serve the bus until cancelled."""
        loop = asyncio.get_running_loop()
        inbox = FrameInbox(loop)
        notifier = BusReader(self.bus, [inbox], loop)
        try:
            now = self.clock()
            self.queue(self.group.power_up(now))
            self._flush(now)
            next_tick = wake = now + self.tick_period
            while True:
                wait = wake - self.clock()
                if wait > 0:
                    await inbox.wait(wait)
                else:  # a tick is due: let the loop deliver, but do not wait
                    await asyncio.sleep(0)
                # everything that arrived meanwhile, also when ticks are always
                # due (a busy after_tick must not starve the bus)
                received = inbox.take()
                now = self.clock()
                for msg in received:
                    self.frames_in += 1
                    if msg.arbitration_id == SYNC_ID and not msg.is_extended_id:
                        self._sync_stamp = msg.timestamp
                    self.queue(self.group.receive(now, msg.arbitration_id, bytes(msg.data),
                                                   is_extended=msg.is_extended_id,
                                                   is_remote=msg.is_remote_frame))
                if received:
                    self._flush(now)   # the answers first: a tick due now waits for them
                if now >= next_tick:
                    next_tick = self._serve_tick(now, next_tick)
                self._flush(now)
                next_tick, wake = self._ahead(now, next_tick)
        finally:
            notifier.stop()

    def _serve_tick(self, now: float, next_tick: float) -> float:
        """The modules' tick due at ``next_tick``, served at ``now``: its
        frames queued, ``after_tick`` called. Returns the next tick's time."""
        self.queue(self.group.tick(now))
        if self.after_tick is not None:
            self.after_tick(now)
        return max(next_tick + self.tick_period, now)

    def _ahead(self, now: float, next_tick: float) -> tuple[float, float]:
        """After serving at ``now``, with the next tick due at ``next_tick``:
        (the next tick, when to wake next). Here: (next_tick, next_tick). A
        service in virtual time may tick ahead of the clock where no one can
        tell (:class:`~aiko.experiments.rig.virtual_rig.VirtualRig`), the
        tick due now too if :meth:`_serve_tick` left it."""
        return next_tick, next_tick
