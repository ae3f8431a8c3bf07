"""The CAN driver reads everything a readable descriptor holds in one go.

python-can's slcan reads pyserial byte by byte, as many bytes a call as
``in_waiting`` says, and pyserial's ``socket://`` says 0 or 1: before the fix
one ``recv(0)`` took one byte, and a burst of frames (the ten STATEs of a
SYNC) trickled in over hundreds of loop iterations."""

import asyncio
import time

from aiko.drivers.can_bus import CanDriver
from aiko.drivers.clock import TrialClock
from aiko.firmware_interface.codec import JointState, decode, encode
from aiko.firmware_interface.protocol import Status
from aiko.firmware_interface.slcan import format_frame


def test_a_burst_of_slcan_frames_arrives_within_one_loop_iteration():
    import can

    frames = [encode(JointState(n, 0.01 * n, -0.01 * n, 5, -5, Status.OPERATIONAL, 7))
              for n in range(1, 11)]
    burst = b"".join(format_frame(can.Message(arbitration_id=i, data=d, is_extended_id=False))
                     for i, d in frames)

    async def main():
        sent = asyncio.Event()
        writers = []

        async def serve(reader, writer):
            writers.append(writer)
            sent.set()
            await reader.read(1 << 16)     # the client's open commands; nothing answered

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with CanDriver.open("slcan", f"socket://127.0.0.1:{port}",
                                      TrialClock()) as drv:
                await sent.wait()
                writers[0].write(burst)    # the server's socket sends it at once
                time.sleep(0.05)            # the loop stands still while it arrives
                before = drv.queue.qsize()
                for _ in range(3):          # a few loop iterations, not hundreds
                    await asyncio.sleep(0)
                got = []
                while not drv.queue.empty():
                    rx = drv.queue.get_nowait()
                    got.append(decode(rx.arbitration_id, rx.data))
                return before, got
        finally:
            for w in writers:
                w.close()
            server.close()
            await server.wait_closed()

    before, got = asyncio.run(main())
    assert [f.node for f in got] == list(range(1, 11)), (before, got)
    assert all(isinstance(f, JointState) and f.sync_echo == 7 for f in got)


def test_bulk_slcan_reads_frames_split_anywhere_and_answers_in_order():
    """What the line holds is read at once; a frame cut across two reads is
    kept until its CR; BEL (an error answer) ends a message too."""
    import socket
    import threading

    import can

    from aiko.drivers.slcan_bulk import BulkSlcanBus

    frames = [can.Message(arbitration_id=0x180 + n, data=bytes([n] * 8), is_extended_id=False)
              for n in range(1, 6)]
    stream = b"".join(format_frame(m) for m in frames)
    cut = [7, 30, 31, 60, len(stream)]
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    done = threading.Event()

    def serve():
        conn, _ = server.accept()
        with conn:
            conn.recv(1 << 16)                    # the bus's opening commands
            start = 0
            for end in cut:
                conn.sendall(stream[start:end])
                start = end
                time.sleep(0.02)
            conn.sendall(b"\x07")
            done.wait(5)

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    bus = BulkSlcanBus(f"socket://127.0.0.1:{port}", sleep_after_open=0)
    try:
        got = [bus.recv(1.0) for _ in frames]
        assert [m.arbitration_id for m in got] == [m.arbitration_id for m in frames]
        assert [bytes(m.data) for m in got] == [bytes(m.data) for m in frames]
        assert bus._read(1.0) == "\x07"
    finally:
        done.set()
        bus.shutdown()
        server.close()



def _states(n: int) -> list:
    import can
    return [can.Message(arbitration_id=0x180 + k, data=bytes([k] * 8), is_extended_id=False)
            for k in range(1, n + 1)]


def _bulk_bus_receiving(payload: bytes):
    """A BulkSlcanBus on socket:// whose line holds ``payload`` (arrived in
    full): (bus, closer)."""
    import select
    import socket

    from aiko.drivers.slcan_bulk import BulkSlcanBus

    server = socket.create_server(("127.0.0.1", 0))
    bus = BulkSlcanBus(f"socket://127.0.0.1:{server.getsockname()[1]}", sleep_after_open=0)
    conn, _ = server.accept()

    def close() -> None:
        conn.close()
        bus.shutdown()
        server.close()

    try:
        conn.settimeout(1.0)
        conn.recv(1 << 16)                         # the bus's opening commands
        conn.sendall(payload)
        assert select.select([bus.fileno()], [], [], 1.0)[0]
        time.sleep(0.05)                           # all of it has arrived
    except BaseException:
        close()
        raise
    return bus, close


def test_bulk_slcan_takes_a_burst_in_one_read():
    """Ten STATE replies waiting on a socket:// line are taken by the first
    recv (the line is empty after it), not a byte a call; the other nine come
    from the bus's buffer; recv(0) with nothing waiting returns None at once."""
    import select

    bus, close = _bulk_bus_receiving(b"".join(format_frame(m) for m in _states(10)))
    try:
        first = bus.recv(0)
        assert first is not None and first.arbitration_id == 0x181
        assert not select.select([bus.fileno()], [], [], 0)[0]   # nothing left on the line
        rest = [bus.recv(0) for _ in range(9)]
        assert [m.arbitration_id for m in rest if m is not None] == list(range(0x182, 0x18B))
        t0 = time.perf_counter()
        assert bus.recv(0) is None
        assert time.perf_counter() - t0 < 0.5
    finally:
        close()


def test_bulk_slcan_hands_out_frames_read_with_an_acknowledgement():
    """The adapter's ``z`` acknowledgements and the STATE replies arrive in one
    read: recv(0) gives the frames (not None for the acknowledgement, which
    left them in the buffer until the line's next bytes, a period later)."""
    frames = _states(3)
    bus, close = _bulk_bus_receiving(b"z\rz\r" + b"".join(format_frame(m) for m in frames))
    try:
        got = [bus.recv(0) for _ in frames]
        assert [m.arbitration_id if m is not None else None for m in got] == [0x181, 0x182, 0x183]
        assert bus.recv(0) is None
    finally:
        close()
