"""Reading a trial log back, streamed: every channel counted, only the asked
channels parsed and kept (what `aiko info` does with a long trial), a
truncated file read to where it ends; the CAN frames streamed in time order
(what `aiko export --format blf` does with a long trial)."""

import pytest

from aiko.experiments.files.triallog import (
    REORDER_WINDOW,
    TrialLog,
    TrialLogError,
    read_trial,
    stream_frames,
)


def _log(path, n=200):
    with TrialLog(path, {"gait": "sidewinding"}) as log:
        for k in range(n):
            t = 1.0 + 0.1 * k
            log.write("/can/tx", t, {"id": 0x80, "data": f"{k % 256:02x}"})
            log.write("/mocap", t + 0.05, {"frame": k, "x": 0.01 * k, "y": 0.0, "z": 0.06})
            if k % 50 == 0:
                log.write("/events", t, {"kind": "phase", "data": {"phase": "gait"}})
    return path


def test_only_the_asked_channels_are_kept_every_one_is_counted(tmp_path):
    path = _log(tmp_path / "t.mcap")
    whole = read_trial(path)
    part = read_trial(path, topics=("/events",))
    assert whole.complete and part.complete
    assert whole.counts == part.counts == {"/can/tx": 200, "/mocap": 200, "/events": 4}
    assert {k: len(v) for k, v in whole.records.items()} == whole.counts
    assert set(part.records) == {"/events"} and part.records["/events"] == whole.records["/events"]
    assert part.span == pytest.approx((1.0, 1.0 + 0.1 * 199 + 0.05))
    assert part.metadata == whole.metadata


def test_a_truncated_log_is_read_to_where_it_ends(tmp_path):
    path = _log(tmp_path / "t.mcap", n=2000)
    raw = path.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(raw[: len(raw) // 2])
    data = read_trial(cut, topics=("/mocap",))
    assert data.truncated and not data.complete
    assert 0 < data.counts.get("/mocap", 0) < 2000
    assert len(data.records["/mocap"]) == data.counts["/mocap"]


@pytest.mark.parametrize("content", [b"", b"not an mcap file at all", b"\x89MCAP0\r"])
def test_not_a_log(tmp_path, content):
    p = tmp_path / "x.mcap"
    p.write_bytes(content)
    with pytest.raises(TrialLogError, match="not an MCAP file"):
        read_trial(p)


def test_frames_are_streamed_in_time_order_as_the_loaded_trial_gives_them(tmp_path):
    path = tmp_path / "t.mcap"
    with TrialLog(path, {"gait": "sidewinding"}) as log:
        for k in range(300):
            t = 1.0 + 0.01 * k
            log.write("/can/tx", t, {"id": 0x200 + k % 10, "data": f"{k % 256:02x}00"})
            # an answer logged before the request it answers, within the window
            log.write("/can/rx", t - 0.4 * REORDER_WINDOW, {"id": 0x180, "data": "ff"})
        log.write("/can/rx", 5.0, {"id": 0x1FFFFFFF, "data": "00"})     # extended: left out
        log.write("/can/rx", 5.0, {"id": 0x181, "data": "zz"})          # not hex: left out
        log.write("/can/rx", 5.0, {"id": 0x181, "oops": 1})             # no data: left out
    data = read_trial(path)
    streamed = list(stream_frames(path))
    assert len(streamed) == 600
    assert [f[0] for f in streamed] == sorted(f[0] for f in streamed)
    expected = sorted(((t, ch, i, p) for ch in ("/can/tx", "/can/rx")
                       for t, i, p in data.frames(ch)), key=lambda f: f[0])
    assert streamed == expected
    assert [f for f in streamed if f[1] == "/can/tx"][5] == (1.05, "/can/tx", 0x205, b"\x05\x00")
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    part = list(stream_frames(cut))
    assert 0 < len(part) < 600 and [f[0] for f in part] == sorted(f[0] for f in part)
    assert set(part) <= set(streamed)
    text = tmp_path / "x.mcap"
    text.write_text("not a log")
    with pytest.raises(TrialLogError, match="not an MCAP file"):
        list(stream_frames(text))
