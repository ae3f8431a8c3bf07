"""python-can's slcan interface, reading the serial line in bulk.

python-can 4.6.1's ``slcanBus._read`` takes the serial line one byte per
``read(1)`` call (upstream issue #2027, fixed on its main branch by #2028 and
not released yet). Each byte costs several system calls, and over
``socket://`` even a loop on ``in_waiting`` reads byte by byte: pyserial's
socket port reports 1 while anything is waiting (it selects, it cannot
count). The ten STATE replies to a SYNC and the adapter's acknowledgements
(about 300 bytes) then took 6-17 ms of the trial runner's loop, which the
runner counted in its SYNC->STATE times.

:class:`BulkSlcanBus` opens the port non-blocking (pyserial's ``timeout=0``:
a read returns at once with what the line holds, up to the size asked),
waits for data itself with ``select`` on the port's descriptor, and takes
everything waiting in one read; it hands out one message per call, the rest
of python-can's slcan (commands, parsing, sending) unchanged. A ``recv(0)``
with nothing waiting returns at once. Drop it once a python-can release reads
in bulk.
"""

from __future__ import annotations

import select
from typing import Any

import can
import serial
from can.exceptions import error_check
from can.interfaces.slcan import slcanBus

__all__ = ["BulkSlcanBus", "READ_SIZE"]

_TERMINATORS = (0x0D, 0x07)     # CR ends a message, BEL an error answer

READ_SIZE = 65536
"""Bytes asked of one read: more than a line holds between two reads."""


class BulkSlcanBus(slcanBus):
    """``slcanBus`` with a ``_read`` that takes all waiting bytes at once."""

    def __init__(self, channel: str, **kwargs: Any) -> None:
        kwargs["timeout"] = 0.0     # non-blocking reads; _read waits on the descriptor
        super().__init__(channel, **kwargs)

    def _has_line(self) -> bool:
        buf = self._buffer
        return any(buf.find(t) >= 0 for t in _TERMINATORS)

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        """python-can's, but an answer that is no frame (the adapter's ``z``
        acknowledging a sent frame) does not end the call while a whole line
        waits in the buffer: a reader that stops at the first None once the
        descriptor is drained would leave the frames read with the
        acknowledgement in the buffer until the line's next bytes (the next
        period's acknowledgements, 100 ms later)."""
        while True:
            msg, filtered = super()._recv_internal(timeout)
            if msg is not None or not self._has_line():
                return msg, filtered
            timeout = 0.0

    def _take(self) -> str | None:
        """The first complete message in the buffer, with its terminator."""
        buf = self._buffer
        ends = [i for i in (buf.find(t) for t in _TERMINATORS) if i >= 0]
        if not ends:
            return None
        i = min(ends) + 1
        out = buf[:i].decode("ascii", errors="replace")
        del buf[:i]
        return out

    def _read(self, timeout: float | None) -> str | None:
        done = self._take()
        if done is not None:
            return done
        deadline = serial.Timeout(timeout)
        port = self.serialPortOrig
        with error_check("Could not read from serial device"):
            while True:
                chunk = port.read(READ_SIZE)     # what the line holds, at once
                if chunk:
                    self._buffer.extend(chunk)
                    done = self._take()
                    if done is not None:
                        return done
                    continue                     # part of a message: more may be there
                if deadline.expired():
                    return None                  # recv(0): nothing more now
                select.select([port.fileno()], [], [], deadline.time_left())
