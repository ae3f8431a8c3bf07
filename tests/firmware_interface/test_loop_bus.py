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
