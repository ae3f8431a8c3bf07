"""The in-process bus is read on the event loop: no reader thread, every
other end gets each frame in order, nobody its own."""

import asyncio
import threading

import can
import pytest

from aiko.firmware_interface.loop_bus import LoopBus


def test_frames_reach_every_other_end_in_order_on_the_loop():
    async def main():
        a, b, c = LoopBus("t1"), LoopBus("t1"), LoopBus("t1")
        other = LoopBus("t2")
        readers = {name: can.AsyncBufferedReader() for name in "abc"}
        loop = asyncio.get_running_loop()
        threads = threading.active_count()
        notifiers = [can.Notifier(bus, [readers[name]], loop=loop)
                     for name, bus in zip("abc", (a, b, c), strict=True)]
        assert threading.active_count() == threads          # no reader thread
        try:
            for k in range(5):
                a.send(can.Message(arbitration_id=0x180 + k, data=bytes([k] * 8),
                                   is_extended_id=False))
            c.send(can.Message(arbitration_id=0x080, data=b"\x07", is_extended_id=False))
            got = {}
            for name, want in (("a", 1), ("b", 6), ("c", 5)):
                got[name] = [await asyncio.wait_for(readers[name].get_message(), 1.0)
                             for _ in range(want)]
            await asyncio.sleep(0.01)
            assert all(readers[n].buffer.empty() for n in "abc")     # nothing more
            assert other.recv(0) is None                              # another channel
            return got
        finally:
            for n in notifiers:
                n.stop()
            for bus in (a, b, c, other):
                bus.shutdown()

    got = asyncio.run(main())
    assert [m.arbitration_id for m in got["b"]] == [0x180, 0x181, 0x182, 0x183, 0x184, 0x080]
    assert [m.arbitration_id for m in got["c"]] == [0x180, 0x181, 0x182, 0x183, 0x184]
    assert [m.arbitration_id for m in got["a"]] == [0x080]
    assert got["b"][3].data == bytes([3] * 8) and got["b"][3].is_rx


def test_recv_waits_for_its_timeout_and_a_shut_end_refuses_to_send():
    a, b = LoopBus("t3"), LoopBus("t3")
    assert b.recv(0.01) is None
    a.send(can.Message(arbitration_id=0x701, data=b"\x05", is_extended_id=False))
    assert b.recv(0.01).arbitration_id == 0x701
    a.shutdown()
    with pytest.raises(can.CanOperationError):
        a.send(can.Message(arbitration_id=0x701, data=b"\x05", is_extended_id=False))
    b.shutdown()
    assert "t3" not in LoopBus._channels


def test_with_a_bitrate_a_frame_arrives_when_its_last_bit_is_sent():
    """At 1 Mbit/s in virtual time: an 8-byte frame takes 111 us (47 + 64
    bits), a 1-byte one 55 us; frames sent together queue on the wire, each
    end sees them in order at the same times; a frame on the wire when its
    receiver shuts down is dropped; a later frame on a free bus starts at
    once. Without a bitrate a frame is there when it is sent."""
    from aiko.drivers.virtual_time import run_virtual

    async def main():
        loop = asyncio.get_running_loop()
        errors = []
        loop.set_exception_handler(lambda _, context: errors.append(context))
        a, b = LoopBus("w1", 1_000_000), LoopBus("w1", 1_000_000)
        seen = []
        loop.add_reader(b.fileno(), lambda: seen.append((loop.time(), b.recv(0))))
        for k in range(3):
            a.send(can.Message(arbitration_id=0x200 + k, data=bytes(8), is_extended_id=False))
        a.send(can.Message(arbitration_id=0x080, data=b"\x01", is_extended_id=False))
        assert b.recv(0) is None                      # nothing yet: on the wire
        await asyncio.sleep(0.001)
        await asyncio.sleep(0.01)
        b.send(can.Message(arbitration_id=0x181, data=bytes(8), is_extended_id=False))
        reply = a.recv(0)
        await asyncio.sleep(0.001)
        late = a.recv(0)
        loop.remove_reader(b.fileno())
        c = LoopBus("w1", 1_000_000)
        a.send(can.Message(arbitration_id=0x202, data=bytes(8), is_extended_id=False))
        c.shutdown()                                  # its copy still on the wire
        await asyncio.sleep(0.001)
        instant_a, instant_b = LoopBus("w2"), LoopBus("w2")
        instant_a.send(can.Message(arbitration_id=0x080, data=b"\x02", is_extended_id=False))
        instant = instant_b.recv(0)
        for bus in (a, b, instant_a, instant_b):
            bus.shutdown()
        return seen, reply, late, instant, errors

    seen, reply, late, instant, errors = run_virtual(main())
    assert errors == []                               # the shut end's frame dropped quietly
    assert [m.arbitration_id for _, m in seen] == [0x200, 0x201, 0x202, 0x080]
    assert [round(t * 1e6, 6) for t, _ in seen] == [111.0, 222.0, 333.0, 388.0]
    assert reply is None and late.arbitration_id == 0x181
    assert instant is not None and instant.arbitration_id == 0x080
