"""Read a python-can bus on the event loop, every waiting frame at each wake-up.

python-can's :class:`can.Notifier`, given a loop and a bus with a file
descriptor, hands its listeners one frame per loop iteration: a period's ten
REFs and its SYNC reached the emulated modules over eleven iterations of their
loop, and the ten STATE replies the slcan adapter over ten more, each an
``epoll`` call and a task wake-up. :class:`BusReader` watches the descriptor
itself and hands over everything the bus holds before the loop goes on (the
simulated rig's own answer p99 fell from 6-8 to 2.5-3.5 ms with it,
docs/performance.md). The trial runner's CAN driver reads its bus with it too.

A ``recv(0)`` that returns None does not mean nothing is left: an interface
may return after part of a frame (python-can's own slcan reads one byte a
call) or after an answer that is no frame. Reading goes on while the
descriptor is readable, at most :data:`MAX_READS` calls at one wake-up, so no
loop iteration waits long. A failed read stops the reading and goes to the
listeners' ``on_error``. A bus without a descriptor (python-can's virtual bus)
is read by a Notifier thread. A bus that can hand frames over as they
arrive (:meth:`~aiko.firmware_interface.loop_bus.LoopBus.hand_to`, on a
bitrate's wire in virtual time) hands them straight to the listeners.
"""

from __future__ import annotations

import asyncio
import logging
import select
from collections.abc import Sequence

import can

__all__ = ["BusReader", "MAX_READS", "bus_fileno"]

log = logging.getLogger(__name__)

MAX_READS = 10_000
"""``recv`` calls at one wake-up at most (a few hundred frames over slcan read
byte by byte); the rest wait for the next, so the loop's other work is not
held up by a flood."""


def bus_fileno(bus: can.BusABC) -> int:
    """The bus's file descriptor, or -1 when it has none."""
    try:
        return bus.fileno()
    except (NotImplementedError, AttributeError, OSError, ValueError):
        return -1


class BusReader:
    """Hands every frame ``bus`` receives to ``listeners`` on ``loop``; ``stop()``
    ends it (before the bus is shut down). ``timeout``: the Notifier thread's
    receive timeout (s), for a bus without a descriptor."""

    def __init__(self, bus: can.BusABC, listeners: Sequence[can.Listener],
                 loop: asyncio.AbstractEventLoop, timeout: float = 1.0) -> None:
        self.bus = bus
        self.listeners = list(listeners)
        self._loop = loop
        self._notifier: can.Notifier | None = None
        self._fd = bus_fileno(bus)
        if self._fd >= 0:
            loop.add_reader(self._fd, self._readable)
            hand_to = getattr(bus, "hand_to", None)
            if hand_to is not None:
                hand_to(self._received, loop)
        else:
            self._notifier = can.Notifier(bus, self.listeners, timeout=timeout, loop=loop)

    def _readable(self) -> None:
        fd = self._fd
        try:
            for _ in range(MAX_READS):
                msg = self.bus.recv(0)
                if msg is not None:
                    self._received(msg)
                elif not select.select([fd], [], [], 0)[0]:
                    return
        except (can.CanError, OSError, ValueError) as exc:
            self._stop_reading()
            self._on_error(exc)

    def _received(self, msg: can.Message) -> None:
        """One frame to every listener (read here, or handed over by the bus)."""
        for listener in self.listeners:
            listener.on_message_received(msg)

    def _on_error(self, exc: Exception) -> None:
        """To every listener that handles errors (python-can's ``Listener``
        raises NotImplementedError by default); logged if none does."""
        handled = False
        for listener in self.listeners:
            try:
                listener.on_error(exc)
            except NotImplementedError:
                continue
            handled = True
        if not handled:
            log.error("reading %s failed: %s", self.bus.channel_info, exc)

    def _stop_reading(self) -> None:
        if self._fd >= 0:
            hand_to = getattr(self.bus, "hand_to", None)
            if hand_to is not None:
                hand_to(None)
            self._loop.remove_reader(self._fd)
            self._fd = -1

    def stop(self) -> None:
        self._stop_reading()
        if self._notifier is not None:
            self._notifier.stop()
            self._notifier = None
