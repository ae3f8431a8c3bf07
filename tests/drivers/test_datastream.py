"""Vicon DataStream: the wire format (round trips and bad bytes, by
hypothesis), the server read by the DataStream SDK's own client
(libmotioncapture's, in a process of its own, not through our source), and
the source that reads a server through that client."""

import asyncio
import json
import math
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from aiko.drivers.clock import TrialClock
from aiko.drivers.datastream import (
    FRAME_INFO,
    GLOBAL_SEGMENTS,
    SERVED,
    STREAM_INFO,
    SUBJECT_INFO,
    DataStreamError,
    DataStreamFrame,
    Pose,
    frame_packet,
    packet,
    parse_frame,
    read_packets,
    rotation_xyz,
    split_packet,
    tracker_poses,
)
from aiko.drivers.datastream_server import DataStreamServer
from aiko.drivers.vendor_mocap import VendorMocapSource, split_address
from tests.conftest import free_port
from tests.drivers.served import lockstep, publish, unreachable_error

finite = st.floats(-1e6, 1e6, allow_nan=False)
pose = st.builds(Pose, st.tuples(finite, finite, finite),
                 st.tuples(*[st.floats(-1, 1, allow_nan=False)] * 9))
names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                max_size=24)
frames = st.builds(DataStreamFrame, st.integers(0, 2**32 - 1),
                   st.sampled_from([0.01, 0.005, 1 / 120, 1 / 30]),
                   st.dictionaries(names, st.none() | pose, max_size=12),
                   st.floats(0, 1, allow_nan=False))


@given(frames)
def test_a_frame_reads_back_as_served(frame):
    back = parse_frame(frame_packet(frame))
    assert back.frame_id == frame.frame_id and dict(back.subjects) == dict(frame.subjects)
    assert back.period == pytest.approx(frame.period, rel=1e-8)   # whole 135 MHz ticks
    assert back.latency == frame.latency


@given(frames, st.sets(st.sampled_from(sorted(SERVED))))
def test_a_client_gets_only_the_items_it_asked_for(frame, wanted):
    kinds = {kind for kind, _ in split_packet(frame_packet(frame, wanted))}
    assert kinds <= wanted
    if frame.subjects:
        assert kinds == wanted


@given(st.binary(max_size=200))
@example(packet([]))
@example(b"\x01\x00\x2b\x1a\x08\x00\x00\x00\x05\x00\x00\x00\x04\x00\x00\x00")
def test_any_bytes_read_as_a_frame_or_a_datastream_error(data):
    try:
        parse_frame(data)
    except DataStreamError:
        pass


@given(frames, st.integers(0, 3), st.data())
def test_a_frame_cut_anywhere_is_an_error_not_a_crash(frame, flips, data):
    raw = bytearray(frame_packet(frame))
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(DataStreamError):
        parse_frame(bytes(raw[:cut]))
    for _ in range(flips):
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= 0xFF
    try:
        parse_frame(bytes(raw))
    except DataStreamError:
        pass


@given(st.lists(frames, min_size=1, max_size=4), st.data())
def test_a_stream_splits_into_its_packets_wherever_it_is_cut(sent, data):
    stream = b"".join(frame_packet(f) for f in sent)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    buffer, got = bytearray(), []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        buffer += stream[a:b]
        got += read_packets(buffer)
    assert [parse_frame(p) for p in got] == [parse_frame(frame_packet(f)) for f in sent]
    assert not buffer


@given(finite, finite, finite)
def test_the_rotation_is_rx_ry_rz_in_that_order(rx, ry, rz):
    def rot(axis, a):
        c, s = math.cos(a), math.sin(a)
        return {"x": [[1, 0, 0], [0, c, -s], [0, s, c]], "y": [[c, 0, s], [0, 1, 0], [-s, 0, c]],
                "z": [[c, -s, 0], [s, c, 0], [0, 0, 1]]}[axis]

    def mul(a, b):
        return [[sum(a[i][k] * b[k][j] for k in range(3)) for j in range(3)] for i in range(3)]

    want = mul(mul(rot("x", rx), rot("y", ry)), rot("z", rz))
    assert rotation_xyz(rx, ry, rz) == pytest.approx([v for row in want for v in row], abs=1e-12)


def test_a_tracker_object_is_a_pose():
    poses = tracker_poses({"link6": (1.0, 2.0, 3.0, 0.0, 0.0, 0.3)})
    assert poses["link6"] == Pose((1.0, 2.0, 3.0), rotation_xyz(0.0, 0.0, 0.3))
    f = DataStreamFrame(6, 0.01, poses, 0.002)
    kinds = [k for k, _ in split_packet(frame_packet(f))]
    assert kinds == [STREAM_INFO, SUBJECT_INFO, FRAME_INFO, GLOBAL_SEGMENTS, 26]


def test_addresses():
    assert split_address("vicon.lab", 801) == ("vicon.lab", 801)
    assert split_address("127.0.0.1:8801", 801) == ("127.0.0.1", 8801)
    for bad in ("host:x", "host:0", ":801", "host:70000"):
        with pytest.raises(ValueError):
            split_address(bad, 801)


# --------------------------------------------------- the SDK's own client
SDK_CLIENT = textwrap.dedent("""\
    import json, sys
    import motioncapture
    mc = motioncapture.connect("vicon", {"hostname": sys.argv[1]})
    for _ in range(int(sys.argv[2])):
        mc.waitForNextFrame()
        bodies = {name: [float(v) for v in b.position] + [float(b.rotation.w)]
                  for name, b in mc.rigidBodies.items()}
        print(json.dumps({"bodies": bodies}), flush=True)
""")


def test_the_sdks_own_client_reads_the_server():
    """Frames in order, none missed by a client that keeps up, each subject
    where it was served (the client's floats are single precision),
    occluded subjects left out as the SDK leaves them out."""
    async def main():
        async with DataStreamServer("127.0.0.1", 0) as server:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", SDK_CLIENT, f"127.0.0.1:{server.port}", "150",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            lines = []

            async def read():
                async for line in proc.stdout:
                    lines.append(json.loads(line))

            def seen() -> int:
                clock = lines[-1]["bodies"].get("clock") if lines else None
                return 0 if clock is None else round(clock[0] * 1000)

            reader = asyncio.create_task(read())
            locked = await asyncio.wait_for(lockstep(server, seen, reader.done), 60)
            await proc.wait()
            return lines, await proc.stderr.read(), proc.returncode, locked

    lines, err, rc, locked = asyncio.run(main())
    assert rc == 0, err.decode()
    assert len(lines) == 150
    # the client's first frames may come before its wishes reached the server
    # (it asks for segments once connected): they carry no subjects
    first = next(i for i, x in enumerate(lines) if x["bodies"])
    assert first <= 5 and all(x["bodies"] for x in lines[first:])
    lines = lines[first:]
    ks = [round(x["bodies"]["clock"][0] * 1000) for x in lines]
    assert ks == sorted(set(ks)) and 0 < locked <= ks[-1] - 100
    assert [k for k in ks if k >= locked] == list(range(locked, ks[-1] + 1))  # none missed
    for x, k in zip(lines, ks, strict=True):
        assert x["bodies"]["link6"][:3] == pytest.approx([0.002 * k, -0.001 * k, 0.0525],
                                                         rel=1e-6, abs=1e-9)
        assert x["bodies"]["link6"][3] == pytest.approx(math.cos(0.15), abs=1e-6)
        assert ("hidden" in x["bodies"]) == (k % 10 >= 3)


def test_the_source_reads_the_server_and_ends_its_client():
    async def main():
        clock = TrialClock()
        async with DataStreamServer("127.0.0.1", 0) as server:
            stop = asyncio.Event()
            pub = asyncio.create_task(publish(server, 100.0, stop.is_set))
            async with VendorMocapSource("vicon-datastream", f"127.0.0.1:{server.port}",
                                         "link6", clock) as src:
                child = src._proc.pid
                await asyncio.sleep(0.5)
                s = src.latest()
                _, n, objects = src.latest_objects()
                hidden = []
                for _ in range(30):                  # 'hidden' comes and goes
                    await asyncio.sleep(0.01)
                    hidden.append("hidden" in src.latest_objects()[2])
            stop.set()
            await pub
        return s, n, objects, hidden, src, child

    s, n, objects, hidden, src, child = asyncio.run(main())
    k = round(objects["clock"][0] * 1000)
    assert s.frame == n and s.frame > 10 and s.latency is None
    assert s.position == pytest.approx((0.002 * k, -0.001 * k, 0.0525), rel=1e-6)
    assert any(hidden) and not all(hidden)
    assert src.errors == 0 and src.malformed == 0
    assert subprocess.run(["ps", "-p", str(child)], capture_output=True).returncode == 1


def test_an_unreachable_server_is_a_one_line_error():
    source = VendorMocapSource("vicon-datastream", f"127.0.0.1:{free_port()}", "link6",
                               TrialClock())
    assert "vicon-datastream 127.0.0.1" in unreachable_error(source)


async def _settled(src, quiet: float = 0.3, limit: float = 10.0):
    """The source's latest sample once it has not changed for ``quiet`` s
    (the frames a loaded machine still had on their way have arrived)."""
    last, since, t_end = src.latest(), time.monotonic(), time.monotonic() + limit
    while time.monotonic() - since < quiet and time.monotonic() < t_end:
        await asyncio.sleep(0.05)
        now = src.latest()
        if now != last:
            last, since = now, time.monotonic()
    return last


def test_a_server_gone_leaves_the_last_sample_and_ends_cleanly():
    """The vendor's client spins once its server is gone; the source keeps
    its last frame (stale from then on) and still ends the client at once."""
    async def main():
        clock = TrialClock()
        server = DataStreamServer("127.0.0.1", 0)
        await server.__aenter__()
        stop = asyncio.Event()
        pub = asyncio.create_task(publish(server, 100.0, stop.is_set))
        async with VendorMocapSource("vicon-datastream", f"127.0.0.1:{server.port}", "link6",
                                     clock) as src:
            await asyncio.sleep(0.3)
            stop.set()
            published = await pub
            await server.__aexit__(None, None, None)
            before = await _settled(src)
            await asyncio.sleep(0.3)
            after = src.latest()
            t0 = time.monotonic()
        return published, before, after, time.monotonic() - t0

    published, before, after, ending = asyncio.run(main())
    assert before is not None and 0 < before.frame <= published
    assert after == before
    assert ending < 3.0
