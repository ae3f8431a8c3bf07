"""python-can's slcan interface, reading the serial line in bulk.

python-can 4.6.1's ``slcanBus._read`` takes the serial line one byte per
``read(1)`` call (upstream issue #2027, fixed on its main branch by #2028 and
not released yet). Over ``socket://`` each byte costs several system calls,
so the ten STATE replies to a SYNC (22 bytes each) and the adapter's
acknowledgements took about 5 ms to read: half the simulated rig's measured
SYNC->STATE time. :class:`BulkSlcanBus` reads everything the line holds at
once and hands out one message per call, the rest of python-can's slcan
(commands, parsing, sending) unchanged; a ``recv(0)`` with nothing waiting
returns at once instead of waiting out the port's 1 ms read timeout (which
every read of a burst ended with). Drop it once a release has the fix.
"""

from __future__ import annotations

import serial
from can.exceptions import error_check
from can.interfaces.slcan import slcanBus

__all__ = ["BulkSlcanBus"]

_TERMINATORS = (0x0D, 0x07)     # CR ends a message, BEL an error answer


class BulkSlcanBus(slcanBus):
    """``slcanBus`` with a ``_read`` that takes all waiting bytes at once."""

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
                waiting = port.in_waiting
                if waiting == 0 and deadline.expired():
                    return None      # recv(0): nothing more now, no 1 ms read to wait
                chunk = port.read(waiting if waiting > 0 else 1)
                if chunk:
                    self._buffer.extend(chunk)
                    done = self._take()
                    if done is not None:
                        return done
                if deadline.expired():
                    return None
