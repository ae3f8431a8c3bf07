"""`aiko fit` on a trial the simulated rig made with a known floor friction and
free play."""

import json
import subprocess
import sys

import pytest

from aiko.experiments.fit import FitError, fit_trials, parse_bounds
from aiko.experiments.replay import load_replay

from .conftest import aiko_run

TRUE_MU = 0.3
TRUE_BACKLASH_DEG = 4.0


@pytest.fixture(scope="module")
def known_floor_trial(tmp_path_factory):
    """3 s of sidewinding on the realistic simulated Aiko (4 deg free play, the
    modules' servo) on a floor of mu 0.3, the gait (and the parallel model)
    assuming 0.2."""
    out = tmp_path_factory.mktemp("fit") / "floor.mcap"
    run = aiko_run("sidewinding", "--plant-mu", str(TRUE_MU), "--backlash-deg",
                   str(TRUE_BACKLASH_DEG), "--duration", "3", "--out", str(out))
    assert run.returncode == 0, run.stderr
    return out


def test_fit_recovers_the_floor_friction_and_the_free_play(known_floor_trial):
    """Measured: mu 0.326, backlash 4.08 deg from a start at 0.2 and 2 deg
    (mean RMS error 1.33 cm -> 0.16 cm, 0.5 mm of mocap noise in the data);
    with two CPU-bound processes beside the run that made the trial, once mu
    0.423 and 4.44 deg. The free play is sharply determined; the friction less:
    sidewinding on an isotropic floor is nearly quasi-static, and scaling every
    friction force leaves such a motion unchanged but for the joints' PD
    compliance and the links' inertia (the replay's RMS error at 4 deg:
    4.95 / 2.01 / 3.75 mm for mu 0.2 / 0.3 / 0.4). Tolerance: backlash
    +-0.75 deg, mu +-0.15."""
    inp = load_replay(known_floor_trial)
    res = fit_trials([inp], ["mu", "backlash"], servo="module", u_tol=1e-7, max_iter=100,
                     budget=40)
    assert res.start == {"mu": pytest.approx(0.2), "backlash": 2.0}
    assert res.fitted["mu"] == pytest.approx(TRUE_MU, abs=0.15), res.fitted
    assert res.fitted["backlash"] == pytest.approx(TRUE_BACKLASH_DEG, abs=0.75), res.fitted
    assert res.error_after < res.error_before / 3 and res.error_after < 0.004
    assert res.evaluations <= 42 and res.simulations <= res.evaluations
    assert res.per_trial[0]["rms_error_m"] == pytest.approx(res.error_after)


def test_aiko_fit_of_the_delay_writes_its_report(known_floor_trial, tmp_path):
    r = subprocess.run([sys.executable, "-m", "aiko.experiments.cli", "fit",
                        str(known_floor_trial), "--params", "delay", "--budget", "20",
                        "--workers", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "fit.json").read_text())
    # one simulation: a delay only shifts the experiment's times (a scalar search)
    assert doc["simulations"] == 1 and doc["evaluations"] == 2
    assert -0.3 <= doc["fitted"]["delay"] <= 0.3
    assert doc["error_after_m"] <= doc["error_before_m"]
    assert (tmp_path / "floor-fit.png").read_bytes()[:4] == b"\x89PNG"
    assert "mean RMS error of link 6" in r.stdout


def test_bad_fit_requests_are_one_line_errors(known_floor_trial, tmp_path):
    with pytest.raises(FitError, match="expected NAME=LO:HI"):
        parse_bounds("mu=0.1", ["mu"])
    with pytest.raises(FitError, match="need finite LO < HI"):
        parse_bounds("mu=0.5:0.1", ["mu"])
    for params, needle in [("speed", "unknown speed"), ("mu,mu_x", "not both")]:
        r = subprocess.run([sys.executable, "-m", "aiko.experiments.cli", "fit",
                            str(known_floor_trial), "--params", params, "--out", str(tmp_path)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and needle in r.stderr and r.stderr.count("\n") == 1, r.stderr
