"""Read a python-can bus on the event loop, every waiting frame at each wake-up.

python-can's :class:`can.Notifier`, given a loop and a bus with a file
descriptor, hands its listeners one frame per loop iteration: a period's ten
REFs and its SYNC reached the emulated modules over eleven iterations of their
loop, and the ten STATE replies the slcan adapter over ten more, each an
``epoll`` call and a task wake-up. :class:`BusReader` watches the descriptor
itself and hands over everything ``recv(0)`` gives before the loop goes on
(the simulated rig's own answer p99 fell from 6-8 to 2.5-3.5 ms with it,
docs/performance.md). A bus without a descriptor (python-can's virtual bus)
is read by a Notifier thread as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import can

__all__ = ["BusReader", "MAX_BATCH"]

log = logging.getLogger(__name__)

MAX_BATCH = 1000
"""Frames handed over at one wake-up at most; the rest wait for the next (the
loop's other work is not held up by a flood)."""


def _fileno(bus: can.BusABC) -> int:
    try:
        return bus.fileno()
    except (NotImplementedError, AttributeError, OSError, ValueError):
        return -1


class BusReader:
    """Hands every frame ``bus`` receives to ``listeners`` on ``loop``; ``stop()``
    ends it (before the bus is shut down)."""

    def __init__(self, bus: can.BusABC, listeners: Sequence[can.Listener],
                 loop: asyncio.AbstractEventLoop) -> None:
        self.bus = bus
        self.listeners = list(listeners)
        self._loop = loop
        self._notifier: can.Notifier | None = None
        self._fd = _fileno(bus)
        if self._fd >= 0:
            loop.add_reader(self._fd, self._readable)
        else:
            self._notifier = can.Notifier(bus, self.listeners, loop=loop)

    def _readable(self) -> None:
        try:
            for _ in range(MAX_BATCH):
                msg = self.bus.recv(0)
                if msg is None:
                    return
                for listener in self.listeners:
                    listener.on_message_received(msg)
        except (can.CanError, OSError, ValueError) as exc:
            log.error("reading %s failed: %s", self.bus.channel_info, exc)
            self._stop_reading()
            for listener in self.listeners:
                listener.on_error(exc)

    def _stop_reading(self) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            self._fd = -1

    def stop(self) -> None:
        self._stop_reading()
        if self._notifier is not None:
            self._notifier.stop()
            self._notifier = None
