"""Reading a trial log back, streamed: every channel counted, only the asked
channels parsed and kept (what `aiko info` does with a long trial), a
truncated file read to where it ends."""

import pytest

from aiko.experiments.files.triallog import TrialLog, TrialLogError, read_trial


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
