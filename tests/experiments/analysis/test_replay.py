"""Replays of logged trials: trial files made by the simulated rig during the
test run, and hand-made files for the bad inputs."""

import csv
import json
import math

import numpy as np
import pytest

from aiko.control import PRESETS
from aiko.experiments.analysis.compare import Paths, compare_paths
from aiko.experiments.analysis.delay import estimate_delay
from aiko.experiments.analysis.replay import ReplayError, load_replay, replay_model
from aiko.experiments.analysis.replay_files import replay_trial
from aiko.experiments.files.triallog import TrialLog, read_trial
from aiko.experiments.trial.runner import TrialConfig, trial_metadata
from tests.conftest import aiko


def test_replay_of_the_ideal_trial_reproduces_its_parallel_model(ideal_trial):
    """The same model, references, send times and start as the parallel model
    had: the replay gives its samples again (tolerance 1 um; measured: equal
    to the last bit)."""
    run, path = ideal_trial
    assert run.returncode == 0, run.stderr
    inp = load_replay(path)
    assert inp.start_source == "the parallel model's start (logged)" and not inp.truncated
    assert inp.refs.shape == (51, 10, 4) and inp.duration == pytest.approx(5.1, abs=0.01)
    paths, stats = replay_model(inp)
    logged = inp.experiment
    assert paths.t_model.size == logged.t_model.size
    np.testing.assert_allclose(paths.t_model, logged.t_model, atol=1e-9)
    assert np.abs(paths.p_model - logged.p_model).max() < 1e-6
    # and so the comparison the trial ended with
    stored = json.loads(path.with_suffix(".json").read_text())
    again = compare_paths(paths)
    assert again["final_error_m"] == pytest.approx(stored["final_error_m"], abs=1e-6)
    assert again["rms_error_m"] == pytest.approx(stored["rms_error_m"], abs=1e-6)


def test_aiko_replay_of_two_trials_writes_figures_and_a_summary(ideal_trial, realistic_trial,
                                                                 tmp_path):
    r = aiko("replay", str(ideal_trial[1]), str(realistic_trial[1]), "--mu", "0.3",
             "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("model replay") == 2 and "summary: " in r.stdout
    for stem, trial in (("ideal", ideal_trial[1]), ("trial", realistic_trial[1])):
        png = tmp_path / f"{stem}-replay.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        doc = json.loads((tmp_path / f"{stem}-replay.json").read_text())
        # every motion-capture sample of the gait (the simulated Aiko holds back
        # the frames its physics has not reached: fewer of them when it lags)
        data = read_trial(trial, topics=("/mocap", "/references"))
        t0 = data.references("gait")[0][0]
        in_gait = sum(1 for t, _ in data.tracked() if t >= t0)
        assert doc["parameters"]["mu_x"] == 0.3 and in_gait > 50
        assert in_gait - 2 <= doc["metrics"]["samples"] <= in_gait, (doc["metrics"], in_gait)
    rows = list(csv.DictReader(open(tmp_path / "replay-summary.csv")))
    assert [row["trial"] for row in rows] == ["ideal.mcap", "trial.mcap"]
    # more friction than the trial had: the replay leaves the trial's own
    # parallel model (which it reproduces with the trial's parameters, above)
    doc = json.loads((tmp_path / "ideal-replay.json").read_text())
    assert doc["against_logged_model"]["rms_error_m"] > 1e-3


def test_delay_estimate_finds_the_injected_motion_capture_latency(late_mocap_trial):
    log, physics_lag_p99 = late_mocap_trial
    inp = load_replay(log)
    assert inp.start_source.startswith("rebuilt")   # no parallel model in this trial
    paths, _ = replay_model(inp)
    est = estimate_delay(paths)
    # the samples' age: the injected 150 ms, or the physics' lag where longer
    assert 0.150 - 0.03 <= est.delay <= max(0.150, physics_lag_p99) + 0.03, \
        (est, physics_lag_p99)
    assert est.uncertainty < 0.03 and est.correlation > 0.9
    res = replay_trial(log, out=log.parent, delay="auto")
    assert res.error is None and res.delay == pytest.approx(est.delay)
    # taking the delay out improves the comparison
    plain = compare_paths(paths)
    assert res.metrics["rms_error_m"] < plain["rms_error_m"]


def write_still_trial(path, mocap, nodes=3, periods=21, states=()):
    """A hand-made trial log: the still gait's references, and ``mocap`` as
    (x, y, z) or None (occluded) at 20 Hz; ``states``: /joint_state records."""
    config = TrialConfig(gait="still", nodes=nodes, duration=2.0)
    with TrialLog(path, trial_metadata(config, PRESETS["still"])) as log:
        for s in states:
            log.write("/joint_state", 0.45, s)
        for k in range(periods):
            t = 0.5 + 0.1 * k
            log.write("/references", t, {
                "k": k, "phase": "gait", "t_gait": 0.1 * k, "deadline": t, "sent": t,
                "counter": k, "nodes": list(range(1, nodes + 1)), "alpha_h": [0.0] * nodes,
                "alpha_v": [0.0] * nodes, "omega_h": [0.0] * nodes, "omega_v": [0.0] * nodes})
        for i, p in enumerate(mocap):
            t = 0.5 + 0.05 * i
            x, y, z = p if p is not None else (None, None, None)
            log.write("/mocap", t, {"frame": i, "x": x, "y": y, "z": z, "occluded": p is None,
                                    "stale": False, "latency": None, "t_receive": t})


def test_occlusions_and_nans_in_motion_capture_are_left_out(tmp_path):
    mocap = [(0.0, 0.0, 0.05)] * 42
    mocap[5] = None
    mocap[9] = (math.nan, 0.0, 0.05)
    path = tmp_path / "still.mcap"
    write_still_trial(path, mocap)
    inp = load_replay(path)
    assert inp.start_source.startswith("rebuilt") and inp.nodes == 3
    paths, _ = replay_model(inp)
    m = compare_paths(paths)
    assert m["samples"] == 40 - 1 or m["samples"] == 40   # 2 left out, the span clipped
    assert m["final_error_m"] < 0.01   # a still snake placed on its one marker stays there


def test_a_start_rebuilt_from_the_first_periods_state_replies(tmp_path):
    """A log without the parallel model's start: the joints of the first gait
    period's STATE replies (read from the log only then) place the snake."""
    states = [{"node": n, "alpha_h": 0.1 * n, "alpha_v": 0.0, "duty_h": 0, "duty_v": 0,
               "status": 1, "sync_echo": 0} for n in (1, 2, 3)]
    path = tmp_path / "bent.mcap"
    write_still_trial(path, [(0.0, 0.0, 0.05)] * 42, states=states)
    inp = load_replay(path)
    assert inp.start_source.startswith("rebuilt: STATE of 3/3 nodes"), inp.start_source
    straight = tmp_path / "straight.mcap"
    write_still_trial(straight, [(0.0, 0.0, 0.05)] * 42)
    assert load_replay(straight).start_source.startswith("rebuilt: STATE of 0/3 nodes")
    assert not np.allclose(inp.q0, load_replay(straight).q0)


def test_a_truncated_trial_replays_what_it_holds(ideal_trial, tmp_path):
    raw = ideal_trial[1].read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(raw[:int(len(raw) * 0.6)])
    res = replay_trial(cut, out=tmp_path)
    assert res.error is None and res.truncated
    assert 1.0 < res.duration < 4.5 and res.metrics["duration_s"] < 4.5
    r = aiko("replay", str(cut), "--out", str(tmp_path))
    assert r.returncode == 0 and "the file ends early" in r.stdout


@pytest.mark.parametrize("case", ["text", "not-a-trial", "no-mocap", "no-references"])
def test_files_that_cannot_be_replayed_are_one_line_errors(tmp_path, case):
    path = tmp_path / f"{case}.mcap"
    if case == "text":
        path.write_text("time,x,y\n0,1,2\n")
        needle = "not an MCAP file"
    elif case == "not-a-trial":
        from mcap.writer import Writer
        with open(path, "wb") as f:
            w = Writer(f)
            w.start()
            w.finish()
        needle = "not a trial log (no 'trial' metadata)"
    elif case == "no-mocap":
        write_still_trial(path, [])
        needle = "no motion capture of link 6 (/mocap)"
    else:
        write_still_trial(path, [(0.0, 0.0, 0.05)] * 10, periods=0)
        needle = "no gait references (/references)"
    with pytest.raises(ReplayError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        load_replay(path)
    r = aiko("replay", str(path), "--out", str(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(path) in r.stderr and needle in r.stderr


def test_paths_keep_the_experiment_from_the_gait_start(ideal_trial):
    inp = load_replay(ideal_trial[1])
    paths, _ = replay_model(inp)
    assert paths.t_experiment.min() >= inp.t0 - 1e-9
    assert isinstance(paths, Paths)
