"""``--out DIR`` of the commands that write a folder makes it with its parents;
``--out FILE`` of the commands that write a file keeps a missing folder a
one-line error."""

import json

import pytest

from tests.conftest import aiko


def test_export_makes_its_folder(ideal_trial, tmp_path):
    out = tmp_path / "exports" / "day1"
    r = aiko("export", str(ideal_trial[1]), "--format", "csv", "--out", str(out))
    assert r.returncode == 0, r.stderr
    stem = ideal_trial[1].stem
    assert {p.name for p in out.iterdir()} == {
        f"{stem}-{part}.csv" for part in ("references", "joint_state", "mocap", "model", "events")}


def test_replay_makes_its_folder(ideal_trial, tmp_path):
    out = tmp_path / "replays" / "mu-0.2"
    r = aiko("replay", str(ideal_trial[1]), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert any(out.glob("*.png")) and any(out.glob("*.json"))


def test_fit_makes_its_folder(ideal_trial, tmp_path):
    out = tmp_path / "fits" / "delay"
    r = aiko("fit", str(ideal_trial[1]), "--params", "delay", "--budget", "20", "--workers", "1",
             "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "fit.json").read_text())["evaluations"] >= 1


def test_sweep_makes_its_folder(tmp_path):
    out = tmp_path / "sweeps" / "mu"
    r = aiko("sweep", "sidewinding", "--grid", "mu=0.2", "--duration", "0.2", "--workers", "1",
             "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert (out / "sweep-sidewinding.csv").is_file()


def test_optimize_makes_its_folder(tmp_path):
    out = tmp_path / "runs" / "speed"
    r = aiko("optimize", "sidewinding", "--vary", "A_h,delta_h", "--duration", "0.5", "--popsize", "2",
             "--budget", "2", "--seed", "1", "--workers", "1", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert {"history.csv", "best.toml", "optimize.json"} <= {p.name for p in out.iterdir()}


def test_bad_input_makes_no_folder(tmp_path):
    out = tmp_path / "never"
    r = aiko("sweep", "sidewinding", "--grid", "speed=1", "--out", str(out))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert not out.exists()


def test_a_file_where_the_folder_should_be_is_one_line(ideal_trial, tmp_path):
    blocker = tmp_path / "taken"
    blocker.write_text("a file")
    for args in (["export", str(ideal_trial[1]), "--format", "csv"],
                 ["sweep", "sidewinding", "--grid", "mu=0.2", "--duration", "0.2"]):
        r = aiko(*args, "--out", str(blocker / "sub"))
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "cannot make the folder" in r.stderr and "Traceback" not in r.stderr
        r = aiko(*args, "--out", str(blocker))
        assert r.returncode == 2 and r.stderr.strip().endswith("not a folder"), r.stderr
    assert blocker.read_text() == "a file"


@pytest.mark.parametrize("args", [
    ["simulate", "sidewinding", "--duration", "0.1", "--out", "nowhere/samples.csv"],
    ["simulate", "sidewinding", "--duration", "0.1", "--figure", "nowhere/link6.png"],
])
def test_a_file_in_a_missing_folder_stays_an_error(args, tmp_path):
    r = aiko(*args, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "nowhere" in r.stderr and not (tmp_path / "nowhere").exists()
