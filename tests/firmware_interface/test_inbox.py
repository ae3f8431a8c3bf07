"""The emulated modules' inbox: a wait ends when a frame arrives or at its
deadline, on the loop's clock, and a cancelled wait leaves no timer behind.
In virtual time, so the instants are exact."""

import asyncio

import can
import pytest

from aiko.drivers.virtual_time import run_virtual
from aiko.firmware_interface.inbox import FrameInbox


def frame(ident: int) -> can.Message:
    return can.Message(arbitration_id=ident, data=b"\x01", is_extended_id=False)


def test_a_wait_ends_at_the_first_frame_or_at_its_deadline():
    async def main():
        loop = asyncio.get_running_loop()
        inbox = FrameInbox(loop)
        loop.call_at(0.003, inbox.on_message_received, frame(0x201))
        loop.call_at(0.003, inbox.on_message_received, frame(0x202))
        await inbox.wait(0.010)
        woke = loop.time()
        got = [m.arbitration_id for m in inbox.take()]
        await inbox.wait(0.002)                 # nothing comes: the deadline
        timed_out = loop.time()
        inbox.on_message_received(frame(0x080))
        await inbox.wait(5.0)                   # a frame waits already: at once
        return woke, got, timed_out, loop.time(), [m.arbitration_id for m in inbox.take()]

    woke, got, timed_out, at_once, last = run_virtual(main())
    assert woke == 0.003 and got == [0x201, 0x202]
    assert timed_out == 0.005 and at_once == 0.005 and last == [0x080]


def test_a_cancelled_wait_raises_and_cancels_its_timer():
    async def main():
        loop = asyncio.get_running_loop()
        inbox = FrameInbox(loop)
        waiting = asyncio.create_task(inbox.wait(1.0))
        await asyncio.sleep(0.1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        pending = [h for h in loop._scheduled if not h.cancelled()]
        inbox.on_message_received(frame(0x181))  # no one waits: kept, nothing woken
        return pending, len(inbox.frames)

    pending, kept = run_virtual(main())
    assert pending == [] and kept == 1
