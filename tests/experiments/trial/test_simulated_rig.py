"""The simulated rig as a user runs it: `aiko run` with no robot starts the
simulated Aiko and the parallel model as child processes, reaches the plant over
slcan/TCP and Vicon UDP on loopback, and ends with the comparison. Also: killing
either child mid-trial."""

import json
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest
from mcap.reader import make_reader

from aiko.experiments.analysis.compare import METRIC_KEYS
from aiko.experiments.files.triallog import TrialLogError, read_trial
from aiko.firmware_interface.codec import Ref, Sync, decode
from tests.conftest import AIKO_COMMAND

NODES = 10


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is not a process left running
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def child_pids(data) -> dict:
    return {d["data"]["name"]: d["data"]["pid"] for _, d in data.events("process_started")}


def assert_sync_grid(data, syncs):
    """Each period's SYNC goes out at its deadline, on a 100 ms grid that does
    not drift. A loaded machine may hold single sends back by milliseconds
    (seen: 20 ms), never past the middle of the period, where the modules'
    answers to it would meet the next period's REF."""
    deadlines = np.array([r["deadline"] for _, r in data.records["/references"]])
    np.testing.assert_allclose(np.diff(deadlines), 0.1, atol=1e-9)
    after = np.array(syncs) - deadlines
    assert after.min() >= 0 and after.max() < 0.05, after
    assert np.median(np.abs(np.diff(syncs) - 0.1)) < 0.002


def test_aiko_run_on_the_simulated_rig_records_a_whole_experiment(realtime_trial):
    run, out = realtime_trial
    assert run.returncode == 0, run.stderr
    assert "trial completed" in run.stdout and "Traceback" not in run.stderr
    # the official reader reads the file and finds every channel of the experiment
    with open(out, "rb") as f:
        reader = make_reader(f)
        topics = {ch.topic for _, ch, _ in reader.iter_messages()}
        summary = reader.get_summary()
    assert {"/references", "/can/tx", "/can/rx", "/joint_state", "/mocap", "/model",
            "/comparison", "/events"} <= topics
    assert summary is not None and summary.statistics.message_count > 1000
    data = read_trial(out)
    assert data.complete
    # REF to every node, then one SYNC, every 100 ms on the trial clock
    tx = [(t, decode(r["id"], bytes.fromhex(r["data"]))) for t, r in data.records["/can/tx"]]
    syncs = [t for t, f in tx if isinstance(f, Sync)]
    n_ramp = len(data.references("ramp")[0])
    assert len(data.references("gait")[0]) == 51 and n_ramp == 0  # starts straight: no ramp
    assert len(syncs) == 1 + n_ramp + 51  # one SYNC alone reads the angles first
    assert_sync_grid(data, syncs[1:])
    group, groups = [], []
    for _, f in tx:
        if isinstance(f, Ref):
            group.append(f.node)
        elif isinstance(f, Sync):
            groups.append(group)
            group = []
    assert groups[0] == [] and all(g == list(range(1, NODES + 1)) for g in groups[1:])
    # the parallel model starts at the gait's t = 0, after the ramp
    (_, started), = data.events("model_started")
    t_gait0 = data.references("gait")[0][0]
    assert started["data"]["t0"] == pytest.approx(t_gait0, abs=1e-9)
    assert "STATE of 10/10 nodes" in started["data"]["start"]
    # motion capture at 20 Hz with increasing frame numbers, not stale
    mocap = [d for _, d in data.records["/mocap"]]
    t_mocap = data.times("/mocap")
    assert abs(len(mocap) - 2 * len(syncs)) <= 6  # from the ramp to the end
    # every 50 ms on the whole; a loaded machine delays single samples (seen
    # with a CPU-bound process beside the suite: 35-65 ms), not the rate
    dt = np.diff(t_mocap)
    assert np.median(dt) == pytest.approx(0.05, abs=0.003) and dt.max() < 0.15
    assert np.mean(np.abs(dt - 0.05) < 0.02) > 0.9
    # frame numbers never go back; a sample that repeats the one before is
    # logged as stale: no datagram arrived in its 50 ms, because the simulated
    # Aiko held back the frames its physics had not reached (it says how many;
    # it takes 5 held frames in a row, 4.5 at the window's edges, to starve a
    # sample) or because its process was held up (seen on the loaded 2-core
    # machine), and such samples are few
    frames = [d["frame"] for d in mocap]
    assert all(b >= a for a, b in zip(frames, frames[1:], strict=False))
    repeats = [d for a, d in zip(frames, mocap[1:], strict=False) if d["frame"] == a]
    held = re.search(r"(\d+) of \d+ mocap frames held back", run.stdout)
    starved = int(held[1]) / 4 if held else 0
    assert all(d["stale"] for d in repeats)
    assert len(repeats) <= 0.05 * len(mocap) + starved, (len(repeats), held)
    assert not any(d["stale"] for a, d in zip(frames, mocap[1:], strict=False)
                   if d["frame"] > a)
    assert not any(d["occluded"] for d in mocap)
    # the parallel model at 20 Hz of trial time, every link
    model = data.records["/model"]
    t_model = np.array([d["t"] for _, d in model])
    assert 95 <= len(model) <= 106
    assert np.allclose(np.diff(t_model), 0.05, atol=1e-9)
    assert np.array(model[-1][1]["positions"]).shape == (NODES + 1, 3)
    # the comparison: in the log, and beside it as a figure and JSON
    (_, comp), = data.records["/comparison"]
    metrics = json.loads(out.with_suffix(".json").read_text())
    assert set(METRIC_KEYS) <= set(metrics) and metrics == comp["metrics"]
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "figure: " in run.stdout
    assert "net displacement" in run.stdout and "path length" in run.stdout
    # sidewinding moves link 6 about 0.34 m in 5 s, and so does the experiment
    assert 0.2 < metrics["distance_experiment_m"] < 0.6
    assert 0.2 < metrics["distance_model_m"] < 0.6
    # no child process left behind
    pids = child_pids(data)
    assert set(pids) == {"simulated Aiko", "parallel model"}
    assert not any(alive(p) for p in pids.values())


def test_the_simulated_aiko_keeps_time_within_loose_bounds(realtime_trial):
    run, out = realtime_trial
    data = read_trial(out)
    # with bounds loose enough for a loaded 2-core machine, three times the
    # worst single 15 s run measured with nothing else running: the runner's
    # SYNC->STATE p99 4-24 ms, the simulated Aiko's own answer p99 2-8 ms
    # (docs/performance.md, "The runner's reads, and the machine's floor")
    rtt = re.search(r"SYNC->STATE p50 ([\d.]+) ms, p99 ([\d.]+) ms", run.stdout)
    rig = re.search(r"SYNC->STATE on its bus p50 ([\d.]+) ms, p99 ([\d.]+) ms", run.stdout)
    assert rtt and rig, run.stdout
    assert float(rtt[2]) < 75.0 and float(rig[2]) < 25.0, (rtt[0], rig[0])
    (_, prio), = data.events("priority")
    assert prio["data"]["runner"].startswith(("real-time", "normal"))


def test_ideal_plant_agrees_with_the_parallel_model(ideal_trial, realistic_trial):
    """Sidewinding is insensitive (notes: mirrored gaits stay mirrored to 1e-6 m
    over 5 s); what differs between plant and model with every imperfection off
    is when a period's references take effect (the modules' SYNC vs the
    model's send time, the frames' time on the wire), the plant's 2 ms ticks
    and the 20 Hz sampling. In virtual time (both fixtures) nothing of the
    machine enters: measured a final error of 3.0-3.1 mm and an RMS of
    3.5-3.6 mm over 5 s, the heading 0.08-0.09 deg apart, since the frames
    take their time on the wire (1.5 and 3.0 mm before); the bounds leave 2x
    (in real time: 1-4 mm and 2-4 mm, once 12 mm RMS on a loaded machine)."""
    run, out = ideal_trial
    assert run.returncode == 0, run.stderr
    m = json.loads(out.with_suffix(".json").read_text())
    assert m["final_error_m"] < 0.0065 and m["rms_error_m"] < 0.0075, m
    assert 0.99 < m["distance_ratio"] < 1.01 and abs(m["heading_difference_deg"]) < 0.2
    # the realistic plant (free play, servo limits, noise) differs visibly more
    real = json.loads(realistic_trial[1].with_suffix(".json").read_text())
    assert real["rms_error_m"] > 2 * m["rms_error_m"] and real["rms_error_m"] > 0.005


def start_run(out, duration):
    return subprocess.Popen([*AIKO_COMMAND, "run", "sidewinding",
                             "--duration", str(duration), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_children(out, timeout=60.0) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:   # the file may be just created, its first bytes not yet written
            data = read_trial(out) if out.exists() else None
        except TrialLogError:
            data = None
        if data is not None:
            pids = child_pids(data)
            if len(pids) == 2 and data.records.get("/model"):
                return pids
        time.sleep(0.2)
    raise AssertionError("the trial did not start its children")


def test_killing_the_simulated_aiko_stops_the_trial_safely(tmp_path):
    out = tmp_path / "t.mcap"
    run = start_run(out, 20)
    try:
        pids = wait_for_children(out)
        time.sleep(1.0)
        os.kill(pids["simulated Aiko"], signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, (stdout, stderr)
    assert "simulated Aiko" in stderr and "SIGKILL" in stderr and "Traceback" not in stderr
    data = read_trial(out)
    (_, end), = data.events("trial_end")
    assert end["data"]["reason"] == "fault" and "simulated Aiko" in end["data"]["fault"]
    assert data.events("safe_stop")
    assert not any(alive(p) for p in pids.values())


def test_killing_the_parallel_model_leaves_the_trial_running(tmp_path):
    out = tmp_path / "t.mcap"
    run = start_run(out, 3)
    try:
        pids = wait_for_children(out)
        os.kill(pids["parallel model"], signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, (stdout, stderr)
    assert "trial completed" in stdout
    assert "parallel model: stopped during the trial" in stdout and "SIGKILL" in stdout
    data = read_trial(out)
    (_, stopped), = data.events("model_stopped")
    assert "SIGKILL" in stopped["data"]["reason"]
    assert len(data.references("gait")[0]) == 31      # the trial ran to its end
    assert not any(alive(p) for p in pids.values())


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_no_child_outlives_aiko_run(tmp_path, how):
    """SIGTERM: the safe stop, exit 130, children ended by their owner; SIGKILL
    of `aiko run` itself (2 s into the gait): the children see their stdin
    close and end, and the log, never closed, reads to within a second of the
    kill (flushed every 0.5 s of trial time)."""
    out = tmp_path / "t.mcap"
    run = start_run(out, 30)
    try:
        pids = wait_for_children(out)
        if how == "SIGKILL":
            time.sleep(2.0)
        killed_at = time.time()
        run.send_signal(getattr(signal, how))
        stdout, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    data = read_trial(out)
    if how == "SIGTERM":
        assert run.returncode == 130 and "interrupted" in stdout, (stdout, stderr)
        assert data.complete and data.events("safe_stop")
    else:
        assert data.truncated and not data.complete
        (_, start), = data.events("trial_start")
        elapsed = killed_at - start["data"]["wall_start"]
        last = max(t for recs in data.records.values() for t, _ in recs)
        assert elapsed > 2.0 and last >= elapsed - 1.0, (last, elapsed)
        t_first = data.times("/references")[0]   # streaming starts after the ramp
        assert len(data.records["/references"]) >= int((elapsed - t_first - 1.0) / 0.1) - 5
    end = time.monotonic() + 10
    while time.monotonic() < end and any(alive(p) for p in pids.values()):
        time.sleep(0.1)
    assert not any(alive(p) for p in pids.values())
