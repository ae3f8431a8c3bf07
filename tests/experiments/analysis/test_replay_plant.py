"""The plant's replay of a simulated-rig trial: from the ramp's start, with
the simulated Aiko's own numerics, it meets the trial it replays at the
trial's own floor and free play (the ground truth a fit looks for)."""

import math
from dataclasses import replace

import numpy as np
import pytest

from aiko.experiments.analysis.compare import compare_paths
from aiko.experiments.analysis.replay import load_replay, plant_solver, shifted
from aiko.experiments.analysis.replay_files import simulate_replay
from aiko.model import SolverParams


def _plant_kw(inp):
    plant = inp.metadata["plant"]
    return {"mu_x": plant["mu_x"], "mu_y": plant["mu_y"],
            "backlash": math.radians(plant["backlash_deg"]), "servo": plant["servo"]}


def test_the_plant_replay_plays_the_ramp_and_meets_the_trial(undulation):
    """lateral undulation from a curved start: a ramp of 19 periods before
    the gait. Replayed from the ramp's start, link 6 meets the trial within
    the motion capture's noise (0.5 mm); from the gait's start, the free play
    and the servos start where no ramp left them, and it does not."""
    _, data = undulation
    inp = load_replay(data.path)
    assert inp.q_ramp is not None and inp.ramp_refs is not None
    assert inp.ramp_t.size == 19 and inp.ramp_t[-1] < inp.t0
    kw = _plant_kw(inp)
    paths, _, kind = simulate_replay(inp, **kw)
    assert kind == "plant"
    # the model's path is given from the last sample at the gait's start on
    assert paths.t_model[0] <= inp.t0 + 1e-9 < paths.t_model[1]
    with_ramp = compare_paths(shifted(inp, paths, 0.0))["rms_error_m"]
    no_ramp = replace(inp, ramp_t=np.zeros(0), ramp_refs=None, q_ramp=None)
    without = compare_paths(shifted(no_ramp, simulate_replay(no_ramp, **kw)[0], 0.0))
    assert with_ramp < 0.0015, with_ramp
    assert without["rms_error_m"] > 2.0 * with_ramp, (without["rms_error_m"], with_ramp)


def test_a_plant_replay_takes_the_simulated_aikos_numerics(undulation):
    """The trial's plant metadata sets the replay's step and contact solver
    (0.5 ms, 1e-5 m/s, 30 sweeps); what a log does not say, or says wrong,
    is the model's default."""
    _, data = undulation
    inp = load_replay(data.path)
    plant = inp.metadata["plant"]
    assert plant_solver(inp) == SolverParams(dt=plant["dt"], u_tol=plant["u_tol"],
                                             max_iter=plant["max_iter"])
    assert plant_solver(inp).dt == 0.0005
    robot = replace(inp, metadata={k: v for k, v in inp.metadata.items() if k != "plant"})
    assert plant_solver(robot) == SolverParams()
    odd = replace(inp, metadata={**inp.metadata, "plant": {"dt": -1, "u_tol": "x",
                                                           "max_iter": True}})
    assert plant_solver(odd) == SolverParams()
    half = replace(inp, metadata={**inp.metadata, "plant": {"dt": 0.0005, "max_iter": 1e400}})
    assert plant_solver(half) == SolverParams(dt=0.0005)


@pytest.mark.parametrize("drop", ["state", "ramp"])
def test_a_ramp_that_cannot_be_rebuilt_is_left_out(undulation, drop):
    """A log without the ramp's references, or without a node's STATE reply
    to the ramp's first SYNC, replays from the gait's start as before."""
    from aiko.experiments.analysis.replay import _ramp
    from aiko.experiments.files.triallog import read_trial

    _, data = undulation
    full = load_replay(data.path)
    trial = read_trial(data.path)
    states = trial.records["/joint_state"]
    t, refs, q = _ramp(trial, states, full.params, full.experiment, full.t0)
    assert t.size == 19 and q is not None          # as logged: the ramp is there
    counter = [d for _, d in trial.records["/references"] if d.get("phase") == "ramp"][0]["counter"]
    if drop == "ramp":
        trial.references = lambda phase: (np.zeros(0), np.zeros((0, 10, 4)))
    else:
        states = [(ts, d) for ts, d in states
                  if not (d.get("sync_echo") == counter and d.get("node") == 4)]
    t, refs, q = _ramp(trial, states, full.params, full.experiment, full.t0)
    assert t.size == 0 and refs is None and q is None
