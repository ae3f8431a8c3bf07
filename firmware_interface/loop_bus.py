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

Linux only (eventfd), like the simulated rig's other parts.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections import deque
from typing import Any, ClassVar

import can

__all__ = ["LoopBus"]


class LoopBus(can.BusABC):
    """One end of the in-process channel ``channel`` (python-can's interface
    ``aiko-loop``, or constructed directly)."""

    _channels: ClassVar[dict[str, list[LoopBus]]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, channel: str, **kwargs: Any) -> None:
        self.channel_info = f"loop bus {channel}"
        self._name = channel
        self._rx: deque[can.Message] = deque()
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_SEMAPHORE | os.EFD_CLOEXEC)
        self._open = True
        with self._lock:
            self._channels.setdefault(channel, []).append(self)
        super().__init__(channel, **kwargs)

    def fileno(self) -> int:
        return self._efd

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        if not self._open:
            raise can.CanOperationError("the loop bus is shut down")
        stamp = time.time()
        for end in self._channels.get(self._name, ()):
            if end is not self:
                end._deliver(can.Message(
                    timestamp=stamp, arbitration_id=msg.arbitration_id,
                    is_extended_id=msg.is_extended_id, is_remote_frame=msg.is_remote_frame,
                    is_error_frame=msg.is_error_frame, dlc=msg.dlc, data=bytes(msg.data),
                    is_rx=True, channel=self._name))

    def _deliver(self, msg: can.Message) -> None:
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
            os.close(self._efd)
        super().shutdown()
