"""Qualisys QTM RT: the 6D data packets (read back by Qualisys' own parser
and ours, by hypothesis), the server read by Qualisys' Python SDK (qtm-rt)
directly, and the source that reads a server through it."""

import asyncio
import logging
import math
import socket

import pytest
import qtm_rt
from hypothesis import given
from hypothesis import strategies as st
from qtm_rt.packet import QRTPacket

from aiko.drivers.clock import TrialClock
from aiko.drivers.datastream import rotation_xyz
from aiko.drivers.qtm import (
    COMMAND,
    DATA,
    QtmError,
    data_packet,
    parameters_xml,
    parse_data,
    split,
    text_packet,
)
from aiko.drivers.qtm_server import QtmServer
from aiko.drivers.qualisys_source import QualisysSource, body_names
from tests.conftest import free_port
from tests.drivers.served import lockstep, publish, subjects, unreachable_error

f32 = st.floats(-1e5, 1e5, allow_nan=False, width=32)
bodies = st.lists(st.none() | st.tuples(st.tuples(f32, f32, f32),
                                        st.tuples(*[st.floats(-1, 1, width=32)] * 9)),
                  max_size=12)


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**62), bodies)
def test_a_data_packet_reads_back_in_qualisys_parser_and_ours(frame, stamp, sent):
    raw = data_packet(frame, stamp, sent)
    buffer = bytearray(raw)
    (kind, payload), = split(buffer)
    assert kind == DATA and not buffer
    assert parse_data(payload) == (stamp, frame, sent)
    theirs = QRTPacket(payload)
    assert (theirs.timestamp, theirs.framenumber) == (stamp, frame)
    info, got = theirs.get_6d()
    assert info.body_count == len(sent)
    for body, (pos, rot) in zip(sent, got, strict=True):
        if body is None:
            assert math.isnan(pos.x) and math.isnan(rot.matrix[0])
        else:
            assert (pos.x, pos.y, pos.z) == body[0]
            r = body[1]      # column after column on the wire
            assert rot.matrix == (r[0], r[3], r[6], r[1], r[4], r[7], r[2], r[5], r[8])


@given(st.binary(max_size=120))
def test_any_bytes_read_as_data_or_a_qtm_error(data):
    try:
        parse_data(data)
    except QtmError:
        pass


def test_the_settings_name_the_bodies_in_order():
    xml = parameters_xml(["link6", "peg<1>"], 100.0)
    assert body_names(xml) == ["link6", "peg<1>"]
    with pytest.raises(ValueError, match="not XML"):
        body_names("<unclosed")
    assert split(bytearray(text_packet(1, "hi"))) == [(1, b"hi\0")]


def test_qualisys_own_sdk_reads_the_server():
    """QTM's frame numbers one after another, none missed by a client that
    keeps up, every body where it was served, an untracked one NaN; a
    divisor thins the stream; a component not served is QTM's error."""
    async def main():
        async with QtmServer("127.0.0.1", 0, 100.0, subjects(0)) as server:
            conn = await qtm_rt.connect("127.0.0.1", server.port, version="1.25")
            xml = (await conn.get_parameters(["6d"])).decode()    # before any frame
            got = []
            # qtm-rt's stream_frames returns with the first frame
            pub = asyncio.create_task(lockstep(server, lambda: got[-1][0] if got else 0,
                                               lambda: len(got) >= 100))
            await conn.stream_frames(components=["6d"], on_packet=lambda p: got.append(
                (p.framenumber, p.get_6d()[1])))
            locked = await pub
            await conn.stream_frames_stop()
            await asyncio.sleep(0.05)
            thin = []
            stop = asyncio.Event()
            pub = asyncio.create_task(publish(server, 100.0, stop.is_set))
            await conn.stream_frames(frames="frequencydivisor:4", components=["6d"],
                                     on_packet=lambda p: thin.append(p.framenumber))
            for _ in range(3000):
                if len(thin) >= 3:
                    break
                await asyncio.sleep(0.001)
            stop.set()
            await pub
            await conn.stream_frames_stop()
            with pytest.raises(qtm_rt.QRTCommandException, match="not served"):
                await conn.get_current_frame(components=["3d"])
            conn.disconnect()
        return xml, got, thin, locked

    xml, got, thin, locked = asyncio.run(main())
    assert body_names(xml) == ["clock", "link6", "hidden"]
    frames = [f for f, _ in got]
    assert frames == sorted(set(frames)) and 0 < locked <= frames[-1] - 50
    assert [f for f in frames if f >= locked] == list(range(locked, frames[-1] + 1))
    for k, (clock, link6, hidden) in got:
        assert clock[0].x == k and (link6[0].x, link6[0].y, link6[0].z) == (2 * k, -k, 52.5)
        assert math.isnan(hidden[0].x) == (k % 10 < 3)
    assert len(thin) >= 3 and all(k % 4 == 0 for k in thin)


def test_a_client_that_never_reads_skips_frames_and_holds_nobody_up(caplog):
    """A stalled client is owed the newest frame only: the server's buffers
    for it stay bounded while a client that keeps up gets every frame."""
    many = {f"peg{i}": None for i in range(300)}        # about 10 kB a frame

    async def main():
        async with QtmServer("127.0.0.1", 0, 100.0, [*subjects(0), *many]) as server:
            stalled = socket.socket()
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.connect(("127.0.0.1", server.port))
            stalled.sendall(text_packet(COMMAND, "StreamFrames AllFrames 6D"))
            conn = await qtm_rt.connect("127.0.0.1", server.port, version="1.25")
            got = []
            pub = asyncio.create_task(lockstep(server, lambda: got[-1] if got else 0,
                                               lambda: len(got) >= 2000))
            await conn.stream_frames(components=["6d"],
                                     on_packet=lambda p: got.append(p.framenumber))
            locked = await pub
            await conn.stream_frames_stop()
            conn.disconnect()
            stalled.close()
        return got, locked

    with caplog.at_level(logging.INFO, logger="aiko.drivers.frame_server"):
        got, locked = asyncio.run(main())
    assert [k for k in got if k >= locked] == list(range(locked, got[-1] + 1))
    gone = [r.args[2:] for r in caplog.records if "gone" in r.msg]  # (sent, skipped)
    sent, skipped = min(gone)
    assert skipped > 0 and sent + skipped <= got[-1] and sent < 1000


def test_the_source_reads_the_server():
    async def main():
        clock = TrialClock()
        async with QtmServer("127.0.0.1", 0, 100.0) as server:
            stop = asyncio.Event()
            pub = asyncio.create_task(publish(server, 100.0, stop.is_set))
            await asyncio.sleep(0.05)
            async with QualisysSource(f"127.0.0.1:{server.port}", "link6", clock) as src:
                await asyncio.sleep(0.4)
                s = src.latest()
                _, n, objects = src.latest_objects()
                seen = set()
                for _ in range(30):
                    await asyncio.sleep(0.01)
                    seen.add("hidden" in src.latest_objects()[2])
            stop.set()
            await pub
        return s, n, objects, seen, src

    s, n, objects, seen, src = asyncio.run(main())
    assert s.frame == n and s.latency is None
    assert s.position == pytest.approx((0.002 * n, -0.001 * n, 0.0525), rel=1e-6)
    assert objects["clock"][0] == pytest.approx(n / 1000.0)
    assert seen == {True, False}
    assert src.errors == 0 and src.malformed == 0 and src.frames > 20


def test_no_qtm_is_a_one_line_error():
    source = QualisysSource(f"127.0.0.1:{free_port()}", "link6", TrialClock())
    assert "qualisys 127.0.0.1" in unreachable_error(source)


def test_the_bodies_are_named_before_the_first_frame():
    """QTM's project defines its bodies before it streams: a client that asks
    at once gets them (the simulated Aiko names its links and pegs so)."""
    async def main():
        async with QtmServer("127.0.0.1", 0, 100.0, bodies=["link1", "link2"]) as server:
            conn = await qtm_rt.connect("127.0.0.1", server.port, version="1.25")
            names = body_names((await conn.get_parameters(["6d"])).decode())
            server.publish(1, 0.0, {"link2": ((1.0, 2.0, 3.0), rotation_xyz(0, 0, 0))})
            frame = await conn.get_current_frame(components=["6d"])
            conn.disconnect()
        return names, frame.get_6d()[1]

    names, bodies = asyncio.run(main())
    assert names == ["link1", "link2"]
    assert math.isnan(bodies[0][0].x) and (bodies[1][0].x, bodies[1][0].z) == (1.0, 3.0)
