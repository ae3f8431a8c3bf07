"""The paper's results (VIII-B, D, E) on the three presets, 15 s each, and the
speed floor of `aiko simulate`."""

import math
import warnings

import numpy as np
import pytest

from aiko.control import PRESETS
from aiko.experiments.analysis.simulate import simulate_gait
from aiko.model import ConvergenceWarning, SnakeModel, SnakeParams, SolverParams

PERIOD = 2 * math.pi / math.radians(80.0)  # one gait cycle, 4.5 s
RATE = 20.0


def run(name, duration=15.0, solver="sor"):
    g = PRESETS[name]
    model = SnakeModel(SnakeParams(mu_x=g.mu_x, mu_y=g.mu_y), SolverParams(solver=solver))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return simulate_gait(model, g, duration, rate=RATE)


@pytest.fixture(scope="module")
def results():
    return {name: run(name) for name in
            ("lateral-undulation", "lateral-undulation-orthotropic", "sidewinding")}


def cycle_mean(r, first: bool):
    """Mean link-6 position over the first or last gait cycle."""
    k = int(round(PERIOD * RATE))
    seg = r.link(6)[:k] if first else r.link(6)[-k:]
    return seg.mean(axis=0)


def test_orthotropic_undulation_moves_forward_steadily(results):
    """VIII-B, Fig. 6: forward (+x) and steadily: every gait cycle gains x."""
    r = results["lateral-undulation-orthotropic"]
    x = r.link(6)[:, 0]
    k = int(round(PERIOD * RATE))
    cycle_means = [x[i:i + k].mean() for i in range(0, x.size - k + 1, k)]
    assert np.all(np.diff(cycle_means) > 0.2)
    d = cycle_mean(r, False) - cycle_mean(r, True)
    assert d[0] > 1.0 and abs(d[1]) < 0.2 * d[0]


def test_isotropic_undulation_moves_slowly_backward(results):
    """VIII-D, Fig. 7: with mu = 0.2 isotropic, slowly backward (-x), in the
    direction of the body wave, far slower than with orthotropic friction."""
    r = results["lateral-undulation"]
    d = cycle_mean(r, False) - cycle_mean(r, True)
    fwd = cycle_mean(results["lateral-undulation-orthotropic"], False)[0]
    assert d[0] < -0.05
    assert abs(d[0]) < 0.3 * fwd


def test_sidewinding_moves_mainly_sideways(results):
    """VIII-E, Fig. 10-11: link 6 travels mainly along y."""
    r = results["sidewinding"]
    d = r.link(6)[-1] - r.link(6)[0]
    assert abs(d[1]) > 0.5
    assert abs(d[1]) > 4 * abs(d[0])


def test_sidewinding_fast_enough(results):
    """15 s of sidewinding at the default step within 60 s of wall time
    (compile excluded: the kernels are cached and compiled by earlier tests)."""
    r = results["sidewinding"]
    assert r.stats.steps == round(15.0 / SolverParams().dt)
    assert r.wall_time < 60.0
    assert r.stats.unconverged < 0.01 * r.stats.steps


def test_solvers_agree_on_sidewinding():
    """The three solvers follow the same trajectory: link 6 within 1 cm of the
    SOR result after 2 s (differences come from where each solver stops within
    its tolerance; the gait amplifies them slowly)."""
    ref = run("sidewinding", 2.0, "sor")
    for solver in ("newton", "jor"):
        other = run("sidewinding", 2.0, solver)
        assert np.abs(other.link(6) - ref.link(6)).max() < 0.01
