"""Start postures laid along a curve: every joint on it, the snake at rest on
the ground (no jump in the first step), and one-line errors for curves that
cannot hold the snake."""

import math
import subprocess

import numpy as np
import pytest

from aiko.control import PRESETS
from aiko.experiments.files.start_curve import CurveError, load_start_curve, start_q
from aiko.model import SnakeModel, SnakeParams
from aiko.model.posture import planar_joint_angles
from aiko.model.quaternion import rotation_matrix
from tests.conftest import AIKO_COMMAND, aiko

P = SnakeParams()


def joints_of(q, params=P):
    """Joint points (n + 1, 3) of q: each link's ends along its body z axis."""
    z = np.array([rotation_matrix(q[i, 3:])[:, 2] for i in range(params.n)])
    ends = np.concatenate([q[:, None, :3] - 0.5 * params.L * z[:, None],
                           q[:, None, :3] + 0.5 * params.L * z[:, None]], axis=1)
    # consecutive links meet: the back end of link i is the front end of link i + 1
    np.testing.assert_allclose(ends[:-1, 1], ends[1:, 0], atol=1e-12)
    return np.vstack([ends[:, 0], ends[-1:, 1]])


@pytest.mark.parametrize("ccw", [True, False])
def test_a_snake_on_an_arc_has_every_joint_on_it_and_lies_at_rest(tmp_path, ccw):
    f = tmp_path / "arc.toml"
    f.write_text("[curve]\narc = { center = [0.2, 0.5], radius = 0.6, start_deg = -60.0, "
                 f"direction = \"{'ccw' if ccw else 'cw'}\" }}\n")
    q = start_q(load_start_curve(f), P)
    J = joints_of(q)
    r = np.hypot(J[:, 0] - 0.2, J[:, 1] - 0.5)
    assert np.max(np.abs(r - 0.6)) < 1e-12                 # every joint on the arc
    head = np.array([0.2 + 0.6 * math.cos(math.radians(-60)),
                     0.5 + 0.6 * math.sin(math.radians(-60))])
    np.testing.assert_allclose(J[0, :2], head, atol=1e-12)
    ah = planar_joint_angles(J[:, :2])
    np.testing.assert_allclose(ah, (1 if ccw else -1) * 2 * math.asin(0.061 / 0.6), atol=1e-12)
    # flat on the ground, and at rest: one step with the joints held where they
    # are (it starts to sink into its contact springs, by 3.3 um in all)
    model = SnakeModel(P)
    state = model.state_from_q(q)
    assert np.max(np.abs(model.contact_gaps(state))) < 1e-12
    refs = np.zeros((P.n - 1, 4))
    refs[:, 0] = ah
    new, _ = model.step(state, refs)
    assert np.max(np.abs(new.u[:, :2])) < 1e-6, np.max(np.abs(new.u[:, :2]))
    assert np.max(np.abs(new.q[:, :2] - q[:, :2])) < 1e-9
    # and it stays there for a second
    for _ in range(3):
        new, _ = model.run_steps(new, np.repeat(refs[None], 1000, axis=0))
    assert np.max(np.abs(new.q[:, :3] - q[:, :3])) < 1e-5


def test_a_snake_on_a_polyline_has_every_joint_on_it(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text("[curve]\npolyline = [[0.0, 0.0], [-0.5, 0.0], [-0.9, 0.4], [-0.9, 1.5]]\n")
    curve = load_start_curve(f)
    J = joints_of(start_q(curve, P))[:, :2]
    W = curve["polyline"]

    def distance_to_polyline(p):
        best = math.inf
        for a, b in zip(W[:-1], W[1:], strict=True):
            t = np.clip((p - a) @ (b - a) / ((b - a) @ (b - a)), 0, 1)
            best = min(best, np.hypot(*(a + t * (b - a) - p)))
        return best
    assert max(distance_to_polyline(p) for p in J) < 1e-12
    np.testing.assert_allclose(np.hypot(*np.diff(J, axis=0).T), P.L, atol=1e-12)


def test_the_gaits_own_curve_is_its_start_posture(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text("[curve]\ngait = true\n")
    g = PRESETS["lateral-undulation"]
    q = start_q(load_start_curve(f), P, g)
    from aiko.experiments.analysis.simulate import initial_state_for_gait
    np.testing.assert_allclose(q, initial_state_for_gait(SnakeModel(P), g).q, atol=1e-12)


@pytest.mark.parametrize("text, message", [
    ("[curve]\npolyline = [[0, 0], [0.5, 0]]\n", "the polyline ends before the snake"),
    ("[curve]\npolyline = [[0, 0], [-0.61, 0], [-0.61, 1.0]]\n", "beyond the joint limit"),
    ("[curve]\narc = { center = [0, 0], radius = 0.05 }\n", "too small"),
    ("[curve]\narc = { center = [0, 0], radius = 0.2 }\n", "overlap itself"),
    ("[curve]\narc = { center = [0, 0], radius = 0.5, direction = 'up' }\n", "'ccw' or 'cw'"),
    ("[curve]\narc = { radius = 0.5 }\n", "curve.arc.center: missing"),
    ("[curve]\npolyline = [[0, 0], [1, 0]]\ngait = true\n", "exactly one of"),
    ("[curve]\nspiral = 1\n", "curve.spiral: unknown key"),
    ("[shape]\n", "shape: unknown table"),
])
def test_curves_that_cannot_hold_the_snake_are_one_line_errors(tmp_path, text, message):
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(CurveError) as exc:
        start_q(load_start_curve(f), P, source=str(f))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_aiko_simulate_starts_from_the_curve(tmp_path):
    f = tmp_path / "arc.toml"
    f.write_text("[curve]\narc = { center = [0.0, 0.6], radius = 0.6 }\n")
    out = tmp_path / "s.csv"
    r = aiko("simulate", "still", "--duration", "0.2", "--start-curve", f, "--out", out)
    assert r.returncode == 0, r.stderr
    rows = np.loadtxt(out, delimiter=",", skiprows=1, ndmin=2)
    header = out.read_text().splitlines()[0].split(",")
    x6, y6 = rows[0, header.index("x6")], rows[0, header.index("y6")]
    assert math.hypot(x6, y6 - 0.6) == pytest.approx(0.6 * math.cos(math.asin(0.061 / 0.6)),
                                                     abs=1e-6)
    r = aiko("simulate", "still", "--start-curve", tmp_path / "none.toml")
    assert r.returncode == 2 and "none.toml: no such file" in r.stderr


def test_the_simulated_aiko_starts_along_the_curve(tmp_path):
    from aiko.experiments.files.triallog import read_trial

    f = tmp_path / "arc.toml"
    f.write_text("[curve]\narc = { center = [0.0, 0.6], radius = 0.6 }\n")
    out = tmp_path / "t.mcap"
    r = aiko("run", "still", "--duration", "1", "--plant", "ideal", "--no-model",
             "--start-curve", f, "--time", "virtual", "--out", out)
    assert r.returncode == 0, r.stderr
    data = read_trial(out)
    chord = 2 * math.asin(0.061 / 0.6)
    first = {}
    for _, s in data.records["/joint_state"]:
        first.setdefault(s["node"], s)
    assert sorted(first) == list(range(1, 11))
    for s in first.values():           # every joint bent by the arc's chord angle
        assert s["alpha_h"] == pytest.approx(chord, abs=math.radians(0.01))
        assert abs(s["alpha_v"]) < math.radians(0.01)
    _, p = data.mocap()
    assert math.hypot(p[0, 0], p[0, 1] - 0.6) == pytest.approx(0.6 * math.cos(chord / 2),
                                                                abs=1e-3)
    # the ramp then straightened it for the still gait
    ramp = [e["data"] for _, e in data.events("ramp_done")][0]
    assert ramp["start_deg"][0][0] == pytest.approx(math.degrees(chord), abs=0.01)
    bad = subprocess.run([*AIKO_COMMAND, "run", "still",
                          "--start-curve", str(tmp_path / "missing.toml")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert bad.returncode == 2 and "missing.toml: no such file" in bad.stderr
    assert not list(tmp_path.glob("trial-*"))
