"""The blind fit: three 15 s trials on the realistic simulated Aiko, on a
floor and with a free play the fit is not told, fitted as a lab would.

The judgement is benchmarks/blind_fit.py's: the friction's ratio and the
free play within 10 % of the truth, each range holding it; each friction
within 10 %, or reported not identifiable with a range that holds it. The
trials run in virtual time and the fit's replays do not depend on where
they run, so the verdict is the same on every run. The replays run in the
test's own process, one after the other (about 3.5 minutes of one core).
Not part of the default test run (marked ``blind_fit``): beside it, its load
made the real-time test of a killed simulated Aiko see the modules'
heartbeats missed before the child's exit, twice (with a pool of its own
and without). `.ci/run` runs it alone after the suite:
``python -m pytest -q -m blind_fit -n 0 tests/experiments/analysis/test_blind_fit.py``.
"""

from __future__ import annotations

import pytest

from aiko.experiments.analysis.fit import fit_trials
from aiko.experiments.analysis.replay import load_replay
from tests.conftest import aiko_run

TRUTH = {"mu_x": 0.20, "mu_y": 0.31, "backlash": 4.0}
"""Hidden from the fit (the gaits assume mu_x 0.2, mu_y 0.2, or 0.1 and 0.5
for the orthotropic one; the fit starts at 2 degrees of free play), and
none of the floors the fit was tuned on (docs/fitting.md)."""

pytestmark = pytest.mark.blind_fit

GAITS = ("sidewinding", "lateral-undulation", "lateral-undulation-orthotropic")


@pytest.fixture(scope="module")
def blind_trials(tmp_path_factory):
    folder = tmp_path_factory.mktemp("blind")
    out = []
    for gait in GAITS:
        path = folder / f"{gait}.mcap"
        run = aiko_run(gait, "--time", "virtual", "--duration", "15", "--plant-mu-x",
                       str(TRUTH["mu_x"]), "--plant-mu-y", str(TRUTH["mu_y"]),
                       "--backlash-deg", str(TRUTH["backlash"]), "--no-model",
                       "--out", str(path))
        assert run.returncode == 0, run.stderr
        out.append(load_replay(path))
    return out


def _holds(r, truth: float) -> bool:
    return r.low <= truth <= r.high


def test_a_blind_fit_finds_the_floor_and_the_free_play(blind_trials):
    """As `aiko fit T1 T2 T3 --params mu_x,mu_y,backlash --servo module
    --budget 120`, from the trials' median friction (0.2, 0.2) and 2
    degrees, the trials in the order of their paths (the order given here
    changes nothing). Measured (x86_64, 2 cores; benchmarks/blind_fit.py's
    fit of these trials, 101 s with a pool of two): ratio 1.552
    (1.415-1.674, truth 1.55), free play 4.03 degrees (3.85-4.35), mu_x
    0.189 (0.179-0.224), mu_y 0.293 (0.264-0.331), all within 5.5 % and
    every range holding the truth; link 6's RMS error 16.5 -> 0.63 cm; 22
    evaluations, 135 replays."""
    res = fit_trials(blind_trials, ["mu_x", "mu_y", "backlash"], servo="module", budget=120)
    ratio, back = res.derived["mu_y/mu_x"], res.ranges["backlash"]
    true_ratio = TRUTH["mu_y"] / TRUTH["mu_x"]
    assert ratio.value == pytest.approx(true_ratio, rel=0.10) and _holds(ratio, true_ratio), ratio
    assert back.value == pytest.approx(TRUTH["backlash"], rel=0.10), back
    assert _holds(back, TRUTH["backlash"]) and back.identifiable, back
    for name in ("mu_x", "mu_y"):
        r = res.ranges[name]
        assert _holds(r, TRUTH[name]), (name, r)
        assert r.value == pytest.approx(TRUTH[name], rel=0.10) or not r.identifiable, (name, r)
    assert res.error_after < res.error_before / 5
    assert res.window == 1.5 and res.aligned[1] < res.aligned[0] / 4
