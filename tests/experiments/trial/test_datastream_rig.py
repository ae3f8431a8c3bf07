"""The simulated Aiko's Vicon DataStream and Qualisys QTM RT servers, in real
time: `aiko run` reads link 6 through each vendor's own client at 20 Hz, an
occlusion injected in the simulated Aiko is logged as occluded samples and the
trial goes on; and the rig's DataStream carries the very frames of its Tracker
UDP stream."""

import asyncio
import re

import pytest

from aiko.drivers.clock import TrialClock
from aiko.drivers.mocap import ViconUdpSource
from aiko.drivers.vendor_mocap import VendorMocapSource
from aiko.experiments.files.triallog import read_trial
from tests.conftest import aiko, aiko_process, free_port, spawn, stop


@pytest.mark.parametrize("kind", ["vicon-datastream", "qualisys"])
def test_aiko_run_reads_the_simulated_aiko_through_a_vendors_client(tmp_path, kind):
    out = tmp_path / "ds.mcap"
    r = aiko_process("run", "sidewinding", "--mocap", f"{kind}:127.0.0.1",
                     "--duration", "4", "--no-model", "--mocap-occlusion", "1.5:2.1",
                     "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    data = read_trial(out)
    assert data.complete
    samples = [s for _, s in data.records["/mocap"]]
    assert 4 * 20 - 2 <= len(samples) <= 4 * 20 + 6         # 20 Hz, the whole trial
    # the simulated Aiko's 0.6 s out of view (its clock starts a moment before
    # the trial's first sample): one run of occluded samples, 12 +- 2 at 20 Hz,
    # with the robot in view before and after it: the trial went on
    # (a sample before the client's first frame is logged empty: frame None)
    marks = "".join("e" if s["frame"] is None else "o" if s["occluded"] else "v"
                    for s in samples)
    assert re.fullmatch(r"e{0,3}v{3,}o{10,14}v{20,}", marks), marks
    seen = [s for s in samples if not s["occluded"]]
    assert sum(s["stale"] for s in seen) <= len(seen) // 10  # a loaded client lags a little
    assert all(0.04 < s["z"] < 0.2 for s in seen), seen    # on the floor or lifted
    assert abs(seen[-1]["x"] - seen[0]["x"]) + abs(seen[-1]["y"] - seen[0]["y"]) > 0.05
    frames = [s["frame"] for s in seen]
    assert frames == sorted(frames)                      # never an older frame
    if kind == "qualisys":      # QTM's own frame numbers: the rig's at 100 Hz, 5 a sample
        steps = [b - a for a, b in zip(frames, frames[1:], strict=False)]
        assert sorted(steps)[len(steps) // 2] == 5, steps
    assert "'occluded': " in r.stdout and "'errors': 0" in r.stdout


def test_the_rigs_datastream_carries_the_udp_streams_frames():
    """Every link-6 position the SDK's client reads off the DataStream is one
    the Tracker UDP stream sent (the same frames, noise and all), to the
    client's single precision."""
    udp = free_port()
    proc = spawn("emulate", "--nodes", "3", "--port", "0", "--plant", "--udp-target",
                 f"127.0.0.1:{udp}", "--datastream-port", "0", "--mocap-noise-mm", "0.5")
    try:
        port = None
        for _ in range(60):
            m = re.match(r"motion capture: Vicon DataStream server on 127\.0\.0\.1:(\d+)",
                         proc.stdout.readline())
            if m:
                port = int(m.group(1))
                break
        assert port is not None, "no DataStream server line"
        udp_seen, ds_seen = asyncio.run(_both(udp, port))
    finally:
        stop(proc)
    assert len(ds_seen) >= 20 and len(udp_seen) >= 50
    udp_positions = set(udp_seen)
    for p in ds_seen:
        assert any(all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(p, q, strict=True))
                   for q in udp_positions), p
    assert len(set(ds_seen)) > 10          # the noise: frames differ, each one matched


async def _both(udp: int, port: int) -> tuple[list, list]:
    """Link 6 of every frame each source takes in a second (each source's
    frames recorded as it takes them: polling for the newest would miss
    datagrams that arrive together on a loaded machine)."""
    clock = TrialClock()
    udp_seen: list = []
    ds_seen: list = []
    async with ViconUdpSource("link2", clock, "127.0.0.1", udp) as u, \
            VendorMocapSource("vicon-datastream", f"127.0.0.1:{port}", "link2", clock) as d:
        for source, seen in ((u, udp_seen), (d, ds_seen)):
            take = source.take

            def recording(t, frame, objects, take=take, seen=seen):
                seen.append(objects.get("link2"))
                take(t, frame, objects)

            source.take = recording
        await asyncio.sleep(1.0)
    return udp_seen, ds_seen


@pytest.mark.parametrize("args, words", [
    (["--mocap", "vicon-datastream:192.168.10.2"], "serves motion capture on loopback"),
    (["--mocap", "qualisys:qtm.lab"], "serves motion capture on loopback"),
    (["--mocap", "vicon-datastream:127.0.0.1:x"], "the port must be an integer"),
    (["--mocap", "vicon-datastream:127.0.0.1", "--mocap-segment", "root"],
     "reads the segment named as its subject"),
    (["--mocap-occlusion", "2:1"], "0 <= T0 < T1"),
])
def test_bad_datastream_settings_are_one_line(args, words, tmp_path):
    r = aiko("run", "sidewinding", *args, "--out", str(tmp_path / "x.mcap"))
    assert r.returncode == 2 and words in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "x.mcap").exists()
