"""The virtual-time event loop: time moves only when nothing is left to do
now, jumps to the next timer, costs no wall time, and gives the same events
in the same order every run; readiness on a loop bus is served before time
moves; a thread's result is waited for when nothing else is pending."""

import asyncio
import time

import can
import pytest

from aiko.drivers.virtual_time import LoopClock, VirtualTimeLoop, in_virtual_time, run_virtual
from aiko.firmware_interface.bus_reader import BusReader
from aiko.firmware_interface.loop_bus import LoopBus


def test_an_hour_of_sleeping_takes_no_wall_time_and_lands_exactly():
    async def main():
        clock = LoopClock()
        assert in_virtual_time()
        await clock.sleep_until(3600.0)
        at_hour = clock.now()
        await asyncio.sleep(0.25)
        return at_hour, clock.now(), asyncio.get_running_loop().advances

    w0 = time.perf_counter()
    at_hour, later, advances = run_virtual(main())
    assert time.perf_counter() - w0 < 5.0          # nothing waited on the wall
    assert at_hour == 3600.0 and later == 3600.25 and advances == 2
    assert not in_virtual_time()


def test_timers_fire_in_order_with_timeouts_and_task_groups():
    async def main():
        clock = LoopClock()
        events = []

        async def ticker(name, period, n):
            for k in range(1, n + 1):
                await clock.sleep_until(k * period)
                events.append((round(clock.now(), 9), name))

        async def timed_out():
            try:
                async with asyncio.timeout(0.35):
                    await asyncio.sleep(10)
            except TimeoutError:
                events.append((round(clock.now(), 9), "timeout"))

        async with asyncio.TaskGroup() as tg:
            tg.create_task(ticker("a", 0.1, 5))
            tg.create_task(ticker("b", 0.25, 2))
            tg.create_task(timed_out())
        return events

    first = run_virtual(main())
    assert first[:6] == [(0.1, "a"), (0.2, "a"), (0.25, "b"), (0.3, "a"), (0.35, "timeout"),
                         (0.4, "a")]
    assert sorted(first[6:]) == [(0.5, "a"), (0.5, "b")]   # due at the same instant
    assert run_virtual(main()) == first             # the same, run after run


def test_a_frame_on_a_loop_bus_is_taken_before_time_moves():
    """A module answers a frame 'at once': the answer is read at the same
    virtual instant it was sent, however long the wall took."""
    async def main():
        clock = LoopClock()
        a, b = LoopBus("vt-test"), LoopBus("vt-test")
        got = []

        class Echo(can.Listener):
            def on_message_received(self, msg):
                time.sleep(0.01)                    # a slow handler: wall time only
                got.append((clock.now(), msg.arbitration_id))
                if msg.arbitration_id == 1:
                    b.send(can.Message(arbitration_id=2, is_extended_id=False))

        class Back(can.Listener):
            def on_message_received(self, msg):
                got.append((clock.now(), msg.arbitration_id))

        loop = asyncio.get_running_loop()
        readers = [BusReader(b, [Echo()], loop), BusReader(a, [Back()], loop)]
        await clock.sleep_until(1.0)
        a.send(can.Message(arbitration_id=1, is_extended_id=False))
        await asyncio.sleep(0.5)
        for r in readers:
            r.stop()
        a.shutdown()
        b.shutdown()
        return got

    assert run_virtual(main()) == [(1.0, 1), (1.0, 2)]


def test_a_threads_result_is_waited_for_when_nothing_else_is_pending():
    async def main():
        clock = LoopClock()
        value = await asyncio.to_thread(lambda: time.sleep(0.05) or 7)
        return value, clock.now()

    assert run_virtual(main()) == (7, 0.0)


def test_the_result_comes_back_unformatted_and_errors_come_through():
    """asyncio's runner formats its task on the way out (a trial's result
    with its arrays took 20-30 ms): the result is handed back past it."""
    class Result:
        formatted = 0

        def __repr__(self) -> str:
            Result.formatted += 1
            return "Result()"

    async def main():
        await asyncio.sleep(1.0)
        return Result()

    result = run_virtual(main())
    assert isinstance(result, Result) and Result.formatted == 0

    async def fails():
        await asyncio.sleep(1.0)
        raise KeyError("the error")

    with pytest.raises(KeyError, match="the error"):
        run_virtual(fails())
    with pytest.raises(ValueError, match="a coroutine was expected"):
        run_virtual(asyncio.sleep)             # as asyncio's runner refuses it


def test_the_loop_is_a_real_selector_loop_underneath():
    loop = VirtualTimeLoop()
    try:
        assert loop.time() == 0.0
        loop.advance(2.5)
        assert loop.time() == 2.5 and loop.advances == 1
        loop.advance(0.0)
        assert loop.advances == 1
        assert loop.run_until_complete(asyncio.sleep(1.0, result="done")) == "done"
        assert loop.time() == pytest.approx(3.5)
    finally:
        loop.close()


def test_next_event_is_the_earliest_live_timer_or_now_when_something_waits():
    """What a party may compute ahead of the clock up to: the next timer not
    cancelled; now while a callback is ready or a frame waits on a loop bus."""
    async def main():
        loop = asyncio.get_running_loop()
        clock = LoopClock()
        seen = []
        await clock.sleep_until(2.0)
        later = loop.call_later(0.5, lambda: None)
        early = loop.call_later(0.25, lambda: None)
        seen.append(clock.next_event())            # 2.25: the earliest
        early.cancel()
        seen.append(clock.next_event())            # 2.5: the cancelled one does not count
        loop.call_soon(lambda: None)
        seen.append(clock.next_event())            # 2.0: a callback is ready
        await asyncio.sleep(0)
        a, b = LoopBus("vt-next"), LoopBus("vt-next")
        reader = BusReader(b, [can.BufferedReader()], loop)
        a.send(can.Message(arbitration_id=1, is_extended_id=False))
        seen.append(clock.next_event())            # 2.0: a frame waits on b
        for _ in range(3):                         # the reader's turn comes
            await asyncio.sleep(0)
        seen.append(clock.next_event())            # 2.5: the frame was taken
        reader.stop()
        a.shutdown()
        b.shutdown()
        later.cancel()
        return seen

    assert run_virtual(main()) == [2.25, 2.5, 2.0, 2.0, 2.5]


def test_next_event_on_a_real_loop_is_now():
    async def main():
        clock = LoopClock()
        asyncio.get_running_loop().call_later(10.0, lambda: None)
        before = clock.now()
        return clock.next_event() - before

    assert 0.0 <= asyncio.run(main()) < 0.5
