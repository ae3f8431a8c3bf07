"""The bus reader hands every waiting frame over at one wake-up of the loop."""

from __future__ import annotations

import asyncio

import can

from aiko.firmware_interface.bus_reader import BusReader
from aiko.firmware_interface.loop_bus import LoopBus


class _Counting(can.Listener):
    """Frames received, and at which of the loop's callbacks."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, int]] = []
        self.errors: list[Exception] = []
        self.wakeup = 0

    def on_message_received(self, msg: can.Message) -> None:
        self.frames.append((self.wakeup, msg.arbitration_id))

    def on_error(self, exc: Exception) -> None:
        self.errors.append(exc)


def test_eleven_frames_sent_at_once_arrive_at_one_wake_up_in_order():
    async def main():
        loop = asyncio.get_running_loop()
        a, b = LoopBus("reader-test"), LoopBus("reader-test")
        got = _Counting()
        reader = BusReader(b, [got], loop)
        try:
            for i in range(11):
                a.send(can.Message(arbitration_id=0x201 + i, data=bytes(8), is_extended_id=False))
            got.wakeup = 1
            for _ in range(5):
                await asyncio.sleep(0)
                got.wakeup += 1
            return got.frames
        finally:
            reader.stop()
            a.shutdown()
            b.shutdown()

    frames = asyncio.run(main())
    assert [f[1] for f in frames] == [0x201 + i for i in range(11)]
    assert len({f[0] for f in frames}) == 1          # one callback took all eleven


def test_a_bus_without_a_descriptor_is_read_by_a_notifier_thread():
    async def main():
        loop = asyncio.get_running_loop()
        a = can.Bus(interface="virtual", channel="reader-virtual", ignore_config=True)
        b = can.Bus(interface="virtual", channel="reader-virtual", ignore_config=True)
        inbox = can.AsyncBufferedReader()
        reader = BusReader(b, [inbox], loop)
        try:
            a.send(can.Message(arbitration_id=0x123, data=b"\x01", is_extended_id=False))
            async with asyncio.timeout(2.0):
                msg = await inbox.get_message()
            return msg.arbitration_id
        finally:
            reader.stop()
            a.shutdown()
            b.shutdown()

    assert asyncio.run(main()) == 0x123


def test_a_failed_read_stops_reading_and_tells_the_listeners():
    """The error goes to the listeners that handle errors; one that does not
    (python-can's AsyncBufferedReader raises NotImplementedError) is passed
    over, and nothing reaches the loop's exception handler."""
    async def main():
        loop = asyncio.get_running_loop()
        escaped: list[dict] = []
        loop.set_exception_handler(lambda _loop, context: escaped.append(context))
        a, b = LoopBus("reader-fail"), LoopBus("reader-fail")
        got = _Counting()
        reader = BusReader(b, [can.AsyncBufferedReader(), got], loop)

        def broken(timeout=None):
            raise can.CanOperationError("the adapter went away")

        b.recv = broken                                   # type: ignore[method-assign]
        try:
            a.send(can.Message(arbitration_id=0x80, data=b"\x00", is_extended_id=False))
            for _ in range(5):
                await asyncio.sleep(0)
            return got.errors, reader._fd, escaped
        finally:
            reader.stop()
            a.shutdown()
            b.shutdown()

    errors, fd, escaped = asyncio.run(main())
    assert len(errors) == 1 and "went away" in str(errors[0])
    assert fd == -1
    assert escaped == []


def test_with_a_bitrate_frames_go_to_the_listeners_at_their_arrival_and_wait_once_stopped():
    """In virtual time at 1 Mbit/s: the reader's listeners get each frame at
    the instant its last bit is sent, from the delivering timer (nothing
    counted on the descriptor); once the reader stops, frames wait for
    ``recv`` again."""
    from aiko.drivers.virtual_time import run_virtual

    class Kept(LoopBus):
        """Counts the frames kept for ``recv`` (on the descriptor)."""
        kept = 0

        def _enqueue(self, msg: can.Message) -> None:
            self.kept += 1
            super()._enqueue(msg)

    async def main():
        loop = asyncio.get_running_loop()
        a, b = LoopBus("reader-wire", 1_000_000), Kept("reader-wire", 1_000_000)
        seen: list[tuple[float, int]] = []

        class Stamping(can.Listener):
            def on_message_received(self, msg: can.Message) -> None:
                seen.append((round(loop.time() * 1e6, 6), msg.arbitration_id))

        reader = BusReader(b, [Stamping()], loop)
        try:
            for k in range(3):
                a.send(can.Message(arbitration_id=0x200 + k, data=bytes(8),
                                   is_extended_id=False))
            await asyncio.sleep(0.001)
            waiting = b.recv(0), b.kept
            reader.stop()
            a.send(can.Message(arbitration_id=0x080, data=b"\x01", is_extended_id=False))
            await asyncio.sleep(0.001)
            return seen, waiting, b.recv(0), b.kept
        finally:
            reader.stop()
            a.shutdown()
            b.shutdown()

    seen, waiting, after, kept = run_virtual(main())
    assert seen == [(111.0, 0x200), (222.0, 0x201), (333.0, 0x202)]
    assert waiting == (None, 0)
    assert after is not None and after.arbitration_id == 0x080 and kept == 1


def test_a_frame_off_the_wire_does_not_overtake_one_waiting_to_be_read():
    """A frame sent without a bitrate waits on the descriptor until the loop
    polls it; a frame whose last bit arrives meanwhile (the wire's timer,
    called here directly) waits behind it instead of going straight to the
    listeners."""
    async def main():
        loop = asyncio.get_running_loop()
        instant, b = LoopBus("reader-order"), LoopBus("reader-order", 1_000_000)
        got = _Counting()
        reader = BusReader(b, [got], loop)
        try:
            instant.send(can.Message(arbitration_id=0x700 + 1, data=b"\x05",
                                     is_extended_id=False))
            b._deliver(can.Message(arbitration_id=0x181, data=bytes(8), is_extended_id=False))
            first = list(got.frames)
            for _ in range(3):
                await asyncio.sleep(0)
            return first, [ident for _, ident in got.frames]
        finally:
            reader.stop()
            for bus in (instant, b):
                bus.shutdown()

    first, order = asyncio.run(main())
    assert first == [] and order == [0x701, 0x181]
