"""Obstacles everywhere a user looks: the simulated rig runs among pegs and
streams them as motion-capture objects, the trial log keeps the scene, the
replay takes it from there, `aiko simulate --scene` writes it beside its CSV."""

import json
import socket
import subprocess

import numpy as np
import pytest

from aiko.drivers.mocap import decode_object_stream
from aiko.experiments.analysis.export import trial_info
from aiko.experiments.analysis.replay import load_replay
from aiko.experiments.analysis.replay_files import replay_trial, simulate_replay
from aiko.experiments.files.scene_file import load_scene, scene_toml
from aiko.experiments.files.triallog import read_trial
from aiko.model.scene import SCENE_PRESETS, Peg, Scene, SceneError, Step
from tests.conftest import AIKO_COMMAND, aiko, aiko_run

PEGS = """\
# two pegs beside the straight snake's middle, touching it within a second of sidewinding
[[peg]]
x = 0.0
y = -0.14
radius = 0.05

[[peg]]
x = 0.3
y = 0.16
radius = 0.04
mu = 0.5
"""


def test_scene_files_round_trip_and_fail_in_one_line(tmp_path):
    f = tmp_path / "pegs.toml"
    f.write_text(PEGS)
    scene = load_scene(f)
    assert scene.pegs == (Peg(0.0, -0.14, 0.05), Peg(0.3, 0.16, 0.04, 0.5))
    g = tmp_path / "again.toml"
    g.write_text(scene_toml(scene))
    assert load_scene(g) == scene
    assert load_scene("pegs-grid") is SCENE_PRESETS["pegs-grid"]
    bad = tmp_path / "bad.toml"
    bad.write_text("[[peg]]\nx = 0\ny = 0\nradius = 0.05\n[[peg]]\nx = 0.05\ny = 0\n"
                   "radius = 0.05\n")
    with pytest.raises(SceneError, match=r"bad.toml: peg 2: overlaps peg 1"):
        load_scene(bad)
    bad.write_text("[[peg]\n")
    with pytest.raises(SceneError, match="not valid TOML"):
        load_scene(bad)
    with pytest.raises(SceneError, match="no such scene file"):
        load_scene(tmp_path / "missing.toml")
    run = aiko("simulate", "still", "--scene", str(tmp_path / "missing.toml"))
    assert run.returncode != 0 and len(run.stderr.strip().splitlines()) == 1


def test_simulate_writes_the_scene_beside_its_csv(tmp_path):
    scene = tmp_path / "step.toml"
    scene.write_text("[[step]]\nx0 = 0.8\nheight = 0.02\n")
    out = tmp_path / "run.csv"
    run = aiko("simulate", "sidewinding", "--duration", "0.5", "--scene", str(scene),
              "--out", str(out), "--figure", str(tmp_path / "run.png"))
    assert run.returncode == 0, run.stderr
    header = out.read_text().splitlines()[0].split(",")
    assert header[:4] == ["t", "x1", "y1", "z1"] and header[-1] == "work_J"
    beside = tmp_path / "run.scene.toml"
    assert load_scene(beside).steps == (Step(0.8, 0.02),)
    assert "1 step (rising 2 cm)" in run.stdout
    assert (tmp_path / "run.png").stat().st_size > 10_000


def test_a_trial_among_pegs_keeps_its_scene_and_replays_with_it(pegs_trial, tmp_path):
    run, out, scene = pegs_trial
    assert run.returncode == 0, run.stderr
    data = read_trial(out)
    logged = json.loads(data.metadata["scene"])
    assert logged["name"] == "pegs-grid" and len(logged["peg"]) == 75
    assert trial_info(data)["scene"] == "pegs-grid: 75 pegs"
    assert logged["peg"][0] == {"x": -1.45, "y": -0.575, "radius": 0.02}
    inp = load_replay(out)
    assert inp.scene == scene
    # the snake went forward among the pegs (on the bare floor it slips back)
    metrics = json.loads(out.with_suffix(".json").read_text())
    assert metrics["distance_experiment_m"] > 0.4
    # the replay with the logged scene follows the trial's own parallel model
    # (the same model among the same pegs); without the pegs it does not
    res = replay_trial(out, out=tmp_path)
    assert res.error is None, res.error
    assert res.against_logged["rms_error_m"] < 1e-3
    with_pegs, _, _ = simulate_replay(inp)
    flat = tmp_path / "flat.toml"
    flat.write_text("# no obstacles\n")
    without, _, _ = simulate_replay(inp, scene=load_scene(flat))
    gap = np.abs(with_pegs.p_model[:, :2] - without.p_model[:, :2]).max()
    assert gap > 0.01, "the pegs did not touch the snake: the test proves nothing"
    # the figure beside the trial is there
    assert out.with_suffix(".png").stat().st_size > 10_000


def test_the_simulated_rig_streams_pegs_as_fixed_objects(tmp_path):
    scene = tmp_path / "pegs.toml"
    scene.write_text(PEGS)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(60)
    port = rx.getsockname()[1]
    proc = subprocess.Popen([*AIKO_COMMAND, "emulate", "--plant",
                             "--scene", str(scene), "--udp-target", f"127.0.0.1:{port}",
                             "--mocap-noise-mm", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        data, _ = rx.recvfrom(65536)
        _, objects = decode_object_stream(data)
    finally:
        proc.terminate()
        proc.wait(30)
        rx.close()
    assert {f"link{i}" for i in range(1, 12)} <= set(objects)
    assert objects["peg1"][:3] == pytest.approx((0.0, -140.0, 0.0))
    assert objects["peg2"][:3] == pytest.approx((300.0, 160.0, 0.0))


def test_emulate_refuses_a_scene_without_the_plant(tmp_path):
    run = aiko("emulate", "--scene", "pegs-grid")
    assert run.returncode == 2 and "needs --plant" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_flat_scene_files_are_the_flat_floor(tmp_path):
    f = tmp_path / "none.toml"
    f.write_text("")
    assert load_scene(f) == Scene()


def test_a_start_inside_a_peg_is_refused_before_anything_starts(tmp_path):
    out = tmp_path / "trial.mcap"
    run = aiko_run("sidewinding", "--scene", "pegs-grid", "--out", str(out))
    assert run.returncode == 2
    assert "overlaps the peg at (-0.4, 0.025) m" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_more_pegs_than_a_tracker_datagram_carries_is_a_clear_error():
    from aiko.experiments.rig.plant import PlantParams
    from aiko.experiments.rig.simrig import RigConfig, RigStartError, SimulatedRig

    many = Scene(tuple(Peg(0.2 * i, 5.0, 0.05) for i in range(250)))
    with pytest.raises(RigStartError, match="at most 255 objects"):
        SimulatedRig(RigConfig(plant=PlantParams(), scene=many))
