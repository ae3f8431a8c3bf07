"""An in-process CAN bus whose ends are read on the event loop, not by threads.

python-can's virtual bus is read by one Notifier thread per end: a frame from
the slcan adapter to the emulated modules and their reply back cross two
threads, and each crossing waits for the GIL. :class:`LoopBus` has a file
descriptor per end (an eventfd counting the frames waiting), so a reader on
the loop (:class:`~aiko.firmware_interface.bus_reader.BusReader`, or
python-can's :class:`can.Notifier` given the loop) watches it with
``add_reader`` and the whole path runs on the loop. Every end of a channel
receives what the others send (not its own frames), in order, as on a bus.

Registered with python-can as the interface ``aiko-loop`` (an entry point of
the package): ``can.Bus(interface="aiko-loop", channel="rig")``, or
``--can-interface aiko-loop`` where both ends live in one process, as in
tests in virtual time.

Given a ``bitrate`` (bit/s), a channel takes a frame's time on the wire as a
CAN bus does, on the running event loop's clock: one frame at a time, each
``47 + 8 * dlc`` bits (a standard frame with its interframe space; stuff bits
not counted), delivered when its last bit is sent. In virtual time this is
the bus's whole latency (a period's ten REFs and SYNC take 1.3 ms at
1 Mbit/s); without a bitrate a frame arrives at once. A reader on the loop
may take such frames straight from the delivering timer (:meth:`LoopBus.hand_to`,
which :class:`~aiko.firmware_interface.bus_reader.BusReader` uses): no
descriptor written and polled, no loop iteration between a frame's arrival
and its listeners (about 5300 frames and as many iterations in a 15 s trial).

Linux only (eventfd), like the simulated rig's other parts.
"""

from __future__ import annotations

import asyncio
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar

import can

__all__ = ["LoopBus"]


class LoopBus(can.BusABC):
    """One end of the in-process channel ``channel`` (python-can's interface
    ``aiko-loop``, or constructed directly)."""

    _channels: ClassVar[dict[str, list[LoopBus]]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()
    _busy_until: ClassVar[dict[str, float]] = {}
    """Per channel, the loop time its last frame ends (with a bitrate)."""

    def __init__(self, channel: str, bitrate: int | None = None, **kwargs: Any) -> None:
        self.channel_info = f"loop bus {channel}"
        self._name = channel
        self.bitrate = bitrate
        self._rx: deque[can.Message] = deque()
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_SEMAPHORE | os.EFD_CLOEXEC)
        self._open = True
        self._receiver: Callable[[can.Message], None] | None = None
        self._receiver_loop: asyncio.AbstractEventLoop | None = None
        with self._lock:
            self._channels.setdefault(channel, []).append(self)
        super().__init__(channel, **kwargs)

    def fileno(self) -> int:
        return self._efd

    def hand_to(self, receiver: Callable[[can.Message], None] | None,
                loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Frames whose last bit reaches this end on ``loop`` (sent with a
        bitrate) go straight to ``receiver`` there, called from the loop's
        timer at that instant, instead of waiting to be read (``recv``, the
        descriptor, one loop iteration later); None: read as before. A frame
        sent without a bitrate, and any frame while others wait unread, still
        waits to be read, so none overtakes another."""
        self._receiver = receiver
        self._receiver_loop = loop if receiver is not None else None

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        if not self._open:
            raise can.CanOperationError("the loop bus is shut down")
        stamp = time.time()
        loop, at = self._on_wire(msg.dlc)
        for end in self._channels.get(self._name, ()):
            if end is not self:
                copy = can.Message(
                    timestamp=stamp, arbitration_id=msg.arbitration_id,
                    is_extended_id=msg.is_extended_id, is_remote_frame=msg.is_remote_frame,
                    is_error_frame=msg.is_error_frame, dlc=msg.dlc, data=bytes(msg.data),
                    is_rx=True, channel=self._name)
                if loop is None:
                    end._enqueue(copy)
                else:
                    loop.call_at(at, end._deliver, copy)

    def _on_wire(self, dlc: int) -> tuple[asyncio.AbstractEventLoop | None, float]:
        """(the running loop, the loop time the frame's last bit is sent), or
        (None, 0.0) to deliver at once (no bitrate, or no running loop)."""
        if self.bitrate is None:
            return None, 0.0
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None, 0.0
        start = max(loop.time(), self._busy_until.get(self._name, 0.0))
        end = start + (47 + 8 * dlc) / self.bitrate
        self._busy_until[self._name] = end
        return loop, end

    def _deliver(self, msg: can.Message) -> None:
        if not self._open:       # shut down while the frame was on the wire
            return
        receiver = self._receiver
        if receiver is not None and not self._rx and self._receiver_loop is asyncio.get_running_loop():
            if not self._filters or self._matches_filters(msg):
                receiver(msg)
            return
        self._enqueue(msg)

    def _enqueue(self, msg: can.Message) -> None:
        """Keep ``msg`` for ``recv`` and count it on the descriptor."""
        self._rx.append(msg)
        os.eventfd_write(self._efd, 1)

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        if not self._rx and timeout != 0:
            select.select([self._efd], [], [], timeout)
        if not self._rx:
            return None, False
        try:
            os.eventfd_read(self._efd)       # one frame fewer waiting
        except BlockingIOError:
            pass
        return self._rx.popleft(), False

    def shutdown(self) -> None:
        if self._open:
            self._open = False
            with self._lock:
                ends = self._channels.get(self._name, [])
                if self in ends:
                    ends.remove(self)
                if not ends:
                    self._channels.pop(self._name, None)
                    self._busy_until.pop(self._name, None)
            os.close(self._efd)
        super().shutdown()
