"""The emulated modules on real python-can buses: the virtual bus in-process, and
the slcan adapter over TCP, from this process and from a separate one
(`aiko emulate`). Real time, with tolerances far above what a loaded 2-core
machine needs."""

import asyncio
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import can
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiko.firmware_interface.codec import Heartbeat, JointState, Nmt, Ref, Sync, decode, encode
from aiko.firmware_interface.emulator import JointModule
from aiko.firmware_interface.protocol import NmtCommand, NodeState
from aiko.firmware_interface.service import EmulatedJoints
from aiko.firmware_interface.slcan import SlcanAdapter, SlcanError, format_frame, parse_command
from tests.conftest import AIKO_COMMAND, aiko, emulator_channel


def msg(frame):
    ident, data = encode(frame)
    return can.Message(arbitration_id=ident, data=data, is_extended_id=False)


def collect(bus, seconds):
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        m = bus.recv(timeout=0.05)
        if m is not None:
            out.append(decode(m.arbitration_id, bytes(m.data)))
    return out


def exchange(pc, nodes, timeout=3.0):
    """Boot-up seen, NMT start, one REF per node and a SYNC; the STATE replies."""
    seen = set()
    end = time.monotonic() + timeout
    while seen != set(nodes) and time.monotonic() < end:
        m = pc.recv(timeout=0.1)
        if m is not None:
            f = decode(m.arbitration_id, bytes(m.data))
            if isinstance(f, Heartbeat):
                seen.add(f.node)
    assert seen == set(nodes), f"heartbeats from {sorted(seen)}"
    pc.send(msg(Nmt(NmtCommand.START, 0)))
    for n in nodes:
        pc.send(msg(Ref(n, 0.05 * n, -0.02, 0.0, 0.0)))
    pc.send(msg(Sync(9)))
    frames = collect(pc, 1.0)
    return [f for f in frames if isinstance(f, JointState)]


def test_virtual_bus_in_process():
    channel = f"t-{uuid.uuid4()}"

    async def main():
        node_bus = can.Bus(interface="virtual", channel=channel, ignore_config=True)
        pc = can.Bus(interface="virtual", channel=channel, ignore_config=True)
        joints = EmulatedJoints(node_bus, [JointModule(i) for i in (1, 2, 3)])
        task = asyncio.create_task(joints.run(), name="joints")
        try:
            states = await asyncio.to_thread(exchange, pc, [1, 2, 3])
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            node_bus.shutdown()
            pc.shutdown()
        return states, joints

    states, joints = asyncio.run(main())
    assert sorted(s.node for s in states) == [1, 2, 3]
    assert all(s.sync_echo == 9 and s.status & 1 for s in states)
    assert joints.frames_in >= 5 and joints.send_errors == 0


@given(st.integers(0, 0x7FF), st.binary(max_size=8), st.booleans())
def test_slcan_frame_format_roundtrip(ident, data, remote):
    m = can.Message(arbitration_id=ident, data=b"" if remote else data, is_extended_id=False,
                    is_remote_frame=remote, dlc=len(data))
    line = format_frame(m)
    assert line.endswith(b"\r")
    back = parse_command(line[:-1]).frame
    assert back.arbitration_id == ident and back.is_remote_frame == remote
    assert back.dlc == len(data) and (remote or bytes(back.data) == data)


@pytest.mark.parametrize("line", [b"t12", b"t1234", b"t1231GG", b"t8001AA", b"t12390011223344556677",
                                  b"S9", b"Q", b"\xff", b"T1234567", b"r1231AA"])
def test_slcan_rejects_malformed_commands(line):
    with pytest.raises(SlcanError):
        parse_command(line)


class AdapterThread:
    """The adapter and emulated joints on an event loop in a background thread."""

    def __init__(self, nodes=(1, 2)):
        self.channel = f"t-{uuid.uuid4()}"
        self.nodes = nodes
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self):
        self.node_bus = can.Bus(interface="virtual", channel=self.channel, ignore_config=True)
        self.adapter_bus = can.Bus(interface="virtual", channel=self.channel, ignore_config=True)
        async with SlcanAdapter(self.adapter_bus) as adapter:
            self.adapter = adapter
            self.stop = asyncio.Event()
            joints = asyncio.create_task(
                EmulatedJoints(self.node_bus, [JointModule(i) for i in self.nodes]).run())
            self.ready.set()
            await self.stop.wait()
            joints.cancel()
            await asyncio.gather(joints, return_exceptions=True)
        self.node_bus.shutdown()
        self.adapter_bus.shutdown()

    def __enter__(self):
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def __exit__(self, *exc):
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10)


def test_slcan_adapter_answers_the_lawicel_commands():
    with AdapterThread() as a:
        with socket.create_connection(("127.0.0.1", a.adapter.port), timeout=5) as s:
            forwarded = []

            def ask(cmd):
                """The adapter's answer to cmd. Once the channel is open, frames
                from the bus (the nodes' heartbeats, every 100 ms) come in
                between: they are collected, not taken for the answer."""
                s.sendall(cmd + b"\r")
                while True:
                    buf = b""
                    while not buf.endswith((b"\r", b"\a")):
                        buf += s.recv(1)
                    if buf[:1] not in (b"t", b"T", b"r", b"R"):
                        return buf
                    forwarded.append(buf)
            assert ask(b"V").startswith(b"V") and ask(b"N").startswith(b"N")
            assert ask(b"t0801") == b"\a"          # not open yet
            assert ask(b"S8") == b"\r" and ask(b"O") == b"\r"
            assert ask(b"O") == b"\a"              # already open
            assert ask(b"S6") == b"\a"             # bit rate only while closed
            assert ask(b"t00020100") == b"z\r"     # NMT start, forwarded
            assert ask(b"bogus") == b"\a"
            assert ask(b"C") == b"\r"
        assert a.adapter.frames_in == 1 and a.adapter.errors == 4
        # whatever came from the bus in between: heartbeats of nodes 1 and 2
        assert all(f[:4] in (b"t701", b"t702") and len(f) == 8 for f in forwarded), forwarded


def test_python_can_slcan_client_in_process():
    with AdapterThread(nodes=(1, 2)) as a:
        pc = can.Bus(interface="slcan", channel=a.adapter.channel, bitrate=1_000_000,
                     sleep_after_open=0, ignore_config=True)
        try:
            states = exchange(pc, [1, 2])
        finally:
            pc.shutdown()
    assert sorted(s.node for s in states) == [1, 2]
    assert states[0].alpha_v == 0.0 and all(s.sync_echo == 9 for s in states)


def test_aiko_emulate_from_a_separate_process():
    """`aiko emulate` in its own process; python-can's slcan interface over
    socket://; a node made silent by --fault stays unheard; SIGINT stops it,
    and the processors' spinners (--keep-awake spin) with it."""
    proc = subprocess.Popen([*AIKO_COMMAND, "emulate", "--nodes",
                             "3", "--port", "0", "--fault", "3:silent", "--keep-awake", "spin"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        channel = emulator_channel(proc)
        assert channel and channel.startswith("socket://127.0.0.1:")
        line = proc.stdout.readline()
        processors = len(os.sched_getaffinity(0))
        assert line.startswith("processors: ") and f"{processors} processor" in line, line
        spinners = _children(proc.pid)
        assert len(spinners) == processors
        pc = can.Bus(interface="slcan", channel=channel, bitrate=1_000_000, sleep_after_open=0,
                     ignore_config=True)
        try:
            states = exchange(pc, [1, 2])
            heard = {f.node for f in collect(pc, 0.5) if isinstance(f, Heartbeat)}
            pc.send(msg(Nmt(NmtCommand.STOP, 0)))
            stopped = [f for f in collect(pc, 0.5) if isinstance(f, Heartbeat)]
        finally:
            pc.shutdown()
        assert sorted(s.node for s in states) == [1, 2]
        assert heard == {1, 2}
        last = {f.node: f.state for f in stopped}  # a heartbeat may cross the NMT
        assert last == {1: NodeState.STOPPED, 2: NodeState.STOPPED}
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        assert "stopped" in out and "Traceback" not in err
        assert not any(Path(f"/proc/{pid}").exists() for pid in spinners)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _children(parent: int) -> list[int]:
    """The processes whose parent is ``parent``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def test_aiko_emulate_reports_a_taken_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = aiko("emulate", "--port", port)
    assert r.returncode == 2 and "cannot listen" in r.stderr and "Traceback" not in r.stderr
