"""python-can under asyncio: one Notifier bridge, a bounded receive queue, counters.

:class:`CanDriver` is an async context manager around any python-can bus::

    async with CanDriver.open("slcan", "socket://127.0.0.1:4000", bitrate=1_000_000,
                              clock=clock) as can_io:
        can_io.send(ident, data)
        frame = await can_io.receive(timeout=0.1)

* Buses are created with ``ignore_config=True``: a user's ~/.canrc or CAN_*
  variables cannot change them.
* Received frames are stamped on the trial clock (python-can's own stamps are
  wall-clock) and put into a bounded queue of ``queue_size`` frames. Overflow
  policy: the newest frame is dropped and counted (``rx_dropped``); a full queue
  means the consumer is stuck, and the frames already queued are the older
  evidence.
* ``send`` never blocks the loop for long: it uses a send timeout of
  ``send_timeout`` (a few ms) and counts a failed send as ``tx_errors``.
  Interfaces that write through pyserial (slcan, serial, robotell,
  seeedstudio) are the exception to passing that timeout down: pyserial's
  ``write`` raises its write timeout whenever the call took longer than the
  timeout, even after every byte was written, so a writer descheduled for a
  few ms on a loaded machine was told a sent frame had failed (and the log
  missed a frame that was on the bus). For those the driver waits up to
  ``send_timeout`` for the adapter's descriptor to take data and then writes
  without a timeout; a frame is counted failed only when it was not written.
* Every transmitted frame is handed to ``on_tx`` (the log), since most interfaces
  do not echo own frames.
* A bus with a file descriptor (socketcan, slcan) is read inside the loop
  (:class:`~aiko.firmware_interface.bus_reader.BusReader`: everything waiting
  at each wake-up); python-can's Notifier reads one frame a loop iteration and
  lets a read error escape into the loop's exception handler, again on every
  iteration once the descriptor reports end of file (an slcan adapter that
  went away). Here a failed read is counted (``rx_errors``), kept in
  ``failure`` and stops the reading; the supervisor then sees the nodes fall
  silent. Buses without one (virtual) are read by a Notifier thread.
"""

from __future__ import annotations

import asyncio
import logging
import select
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import can

from aiko.firmware_interface.bus_reader import BusReader, bus_fileno
from aiko.model.errors import AikoError

__all__ = ["CanDriver", "RxFrame", "CanDriverError", "CanCounters", "check_interface"]

log = logging.getLogger(__name__)


class CanDriverError(AikoError):
    """The CAN interface cannot be opened or has failed."""

    def __init__(self, interface: str, channel: str, reason: str) -> None:
        self.interface = interface
        self.channel = channel
        super().__init__(f"CAN {interface} {channel}: {reason}")


def check_interface(interface: str, channel: str = "") -> None:
    """CanDriverError unless ``interface`` is one of python-can's interface
    names (checked before anything is opened or created)."""
    if interface not in can.VALID_INTERFACES:
        raise CanDriverError(interface, channel,
                             "unknown interface; python-can's interfaces: "
                             + ", ".join(sorted(can.VALID_INTERFACES)))


@dataclass(frozen=True)
class RxFrame:
    t: float               # trial clock, s
    arbitration_id: int
    data: bytes
    is_extended: bool = False
    is_remote: bool = False
    is_error: bool = False


@dataclass
class CanCounters:
    tx: int = 0
    rx: int = 0
    tx_errors: int = 0
    rx_errors: int = 0
    rx_dropped: int = 0


class _Bridge(can.Listener):
    """Runs where the Notifier delivers (loop or its thread): stamps and queues."""

    def __init__(self, driver: CanDriver, loop: asyncio.AbstractEventLoop) -> None:
        self.driver = driver
        self.loop = loop

    def on_message_received(self, msg: can.Message) -> None:
        d = self.driver
        frame = RxFrame(d.clock.now(), msg.arbitration_id, bytes(msg.data[:msg.dlc]),
                        msg.is_extended_id, msg.is_remote_frame, msg.is_error_frame)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            d._put(frame)
        else:
            self.loop.call_soon_threadsafe(d._put, frame)

    def on_error(self, exc: Exception) -> None:
        self.driver.counters.rx_errors += 1
        self.driver.failure = exc
        log.error("CAN receive failed: %s", exc)


_PYSERIAL_MODULES = ("can.interfaces.slcan", "aiko.drivers.slcan_bulk",
                     "can.interfaces.serial.serial_can",
                     "can.interfaces.robotell", "can.interfaces.seeedstudio.seeedstudio")


class CanDriver:
    """An asyncio face of one python-can bus (see the module docstring)."""

    def __init__(self, bus: can.BusABC, clock, *, queue_size: int = 10000,
                 send_timeout: float = 0.005, on_tx: Callable[[float, int, bytes], None] | None = None,
                 owns_bus: bool = False) -> None:
        self.bus = bus
        self.clock = clock
        self.queue: asyncio.Queue[RxFrame] = asyncio.Queue(maxsize=queue_size)
        self.send_timeout = send_timeout
        self.on_tx = on_tx
        self.counters = CanCounters()
        self.failure: Exception | None = None
        self._owns_bus = owns_bus
        self._reader: BusReader | None = None
        # pyserial-based: wait for the descriptor ourselves, write untimed
        self._write_fd = (bus_fileno(bus) if type(bus).__module__ in _PYSERIAL_MODULES else -1)

    @classmethod
    def open(cls, interface: str, channel: str, clock, bitrate: int | None = None,
             **kwargs) -> CanDriver:
        """Create the bus (config files ignored) and a driver that owns it."""
        check_interface(interface, channel)
        extra: dict[str, Any] = {}
        if bitrate is not None:
            extra["bitrate"] = bitrate
        if interface == "slcan":
            extra.setdefault("sleep_after_open", 0)
        try:
            bus: can.BusABC
            if interface == "slcan":
                from .slcan_bulk import BulkSlcanBus
                bus = BulkSlcanBus(channel, **extra)
            else:
                bus = can.Bus(interface=interface, channel=channel, ignore_config=True, **extra)
        except (can.CanError, OSError, ValueError, ImportError, NotImplementedError) as exc:
            raise CanDriverError(interface, channel, str(exc) or type(exc).__name__) from exc
        return cls(bus, clock, owns_bus=True, **kwargs)

    async def __aenter__(self) -> CanDriver:
        loop = asyncio.get_running_loop()
        self._reader = BusReader(self.bus, [_Bridge(self, loop)], loop, timeout=0.05)
        return self

    async def __aexit__(self, *exc) -> None:
        if self._reader is not None:
            self._reader.stop()  # before the bus goes
        if self._owns_bus:
            try:  # in a thread: pyserial's socket:// close sleeps 0.3 s, the loop must not
                await asyncio.to_thread(self.bus.shutdown)
            except (can.CanError, OSError) as err:  # the adapter is gone already
                log.warning("CAN shutdown: %s", err)

    def _put(self, frame: RxFrame) -> None:
        self.counters.rx += 1
        try:
            self.queue.put_nowait(frame)
        except asyncio.QueueFull:
            self.counters.rx_dropped += 1

    def send(self, arbitration_id: int, data: bytes, timeout: float | None = None) -> bool:
        """Transmit one standard frame; False (counted) if the interface refused.
        ``timeout`` overrides the driver's short send timeout (safety frames)."""
        msg = can.Message(arbitration_id=arbitration_id, data=data, is_extended_id=False)
        t = self.clock.now()
        wait = self.send_timeout if timeout is None else timeout
        try:
            if self._write_fd >= 0:
                if not select.select([], [self._write_fd], [], wait)[1]:
                    raise can.CanOperationError(f"the adapter took no data within "
                                                f"{1e3 * wait:g} ms")
                self.bus.send(msg, timeout=None)
            else:
                self.bus.send(msg, timeout=wait)
        except (can.CanError, OSError, ValueError) as exc:
            self.counters.tx_errors += 1
            log.warning("CAN send 0x%03X failed: %s", arbitration_id, exc)
            return False
        self.counters.tx += 1
        if self.on_tx is not None:
            self.on_tx(t, arbitration_id, data)
        return True

    async def receive(self, timeout: float | None = None) -> RxFrame | None:
        """The next received frame, or None after ``timeout`` seconds."""
        if timeout is None:
            return await self.queue.get()
        try:  # asyncio.timeout: 3.11's wait_for can drop a cancellation
            async with asyncio.timeout(timeout):
                return await self.queue.get()
        except TimeoutError:
            return None
