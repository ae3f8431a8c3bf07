"""Frames received on the event loop, and a wait for the next one or a deadline.

python-can's :class:`can.AsyncBufferedReader` keeps frames in an
:class:`asyncio.Queue`; waiting for one with a deadline then takes
``asyncio.timeout``, which ends a wait that reaches its deadline by
cancelling the waiting task (the emulated modules' service waited about 4800
times in a 15 s virtual trial, 3000 of them to their deadline). :class:`FrameInbox` keeps the frames
in a deque and ends a wait by resolving a future, from the listener or from
a timer: the same wake-ups in the same loop iterations, no cancellation.
"""

from __future__ import annotations

import asyncio
from collections import deque

import can

__all__ = ["FrameInbox"]


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class FrameInbox(can.Listener):
    """A listener (for :class:`~aiko.firmware_interface.bus_reader.BusReader`
    on ``loop``) that keeps what it receives in :attr:`frames`, oldest first."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.frames: deque[can.Message] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def on_message_received(self, msg: can.Message) -> None:
        self.frames.append(msg)
        if self._waiter is not None:
            _wake(self._waiter)

    async def wait(self, delay: float) -> None:
        """Return once a frame is waiting, or ``delay`` s on the loop's clock
        have passed (at once when a frame is waiting already)."""
        if self.frames:
            return
        waiter = self._loop.create_future()
        timer = self._loop.call_at(self._loop.time() + delay, _wake, waiter)
        self._waiter = waiter
        try:
            await waiter
        finally:
            self._waiter = None
            timer.cancel()

    def take(self) -> list[can.Message]:
        """Every frame waiting, oldest first; the inbox is then empty."""
        frames = list(self.frames)
        self.frames.clear()
        return frames
