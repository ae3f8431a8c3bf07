"""The simulated Aiko offline, compiled (drive_plant) against its readable
twin (drive_plant_reference: the bank ticked and the plant advanced from
Python, tick by tick): the same samples, work and solver counts, to the
last bit."""

import math

import numpy as np
import pytest

from aiko.control.gait import PRESETS, references, soft_start_times
from aiko.experiments.analysis.simulate import initial_state_for_gait
from aiko.experiments.rig.plant import drive_plant, drive_plant_reference
from aiko.model import SnakeModel, SnakeParams, SolverParams, StateError
from aiko.model.scene import Peg, Scene


def _case(preset, duration, scene=None, offset=0.0137):
    gait = PRESETS[preset]
    params = SnakeParams(n=11, **{k: v for k, v in (("mu_x", gait.mu_x), ("mu_y", gait.mu_y))
                                  if v is not None})
    model = SnakeModel(params, SolverParams(u_tol=1e-5, max_iter=30, dt=0.0005),
                       scene or Scene())
    state = initial_state_for_gait(model, gait)
    t_refs = np.arange(int(round(duration * 10))) * 0.1 + offset
    refs = references(gait, t_refs, 10, t_start=soft_start_times(gait, 10))
    return model, state, t_refs, refs


def _same(a, b):
    np.testing.assert_array_equal(a.t, b.t)
    np.testing.assert_array_equal(a.positions, b.positions)
    np.testing.assert_array_equal(a.work, b.work)
    assert (a.steps, a.iterations, a.unconverged) == (b.steps, b.iterations, b.unconverged)


@pytest.mark.parametrize(("preset", "servo", "deg"), [
    ("sidewinding", "module", 4.0),          # free play taken up, the servo's lag
    ("lateral-undulation", "ideal", 2.0),    # the ideal servo behind free play
    ("lateral-undulation-orthotropic", "module", 0.0),
])
def test_the_compiled_plant_is_its_twin_to_the_last_bit(preset, servo, deg):
    model, state, t_refs, refs = _case(preset, 2.0)
    a = drive_plant_reference(model, state, t_refs, refs, 2.0, math.radians(deg), servo)
    b = drive_plant(model, state, t_refs, refs, 2.0, math.radians(deg), servo)
    _same(a, b)
    assert len(b.t) == 41 and b.steps == 4000 and np.ptp(b.positions[:, 5, 1]) > 0.01


def test_frames_before_the_start_an_end_between_ticks_and_a_peg():
    """References sent before time 0 (skipped), an end that is not on the
    ticks' grid, samples at 33 Hz, and a peg in the scene (obstacle contacts)."""
    scene = Scene(pegs=(Peg(0.3, 0.05, 0.03),))
    model, state, t_refs, refs = _case("lateral-undulation", 1.6, scene, offset=-0.25)
    a = drive_plant_reference(model, state, t_refs, refs, 1.2345, math.radians(3.0), "module",
                              rate=33.0)
    b = drive_plant(model, state, t_refs, refs, 1.2345, math.radians(3.0), "module", rate=33.0)
    _same(a, b)
    assert b.t[-1] <= 1.2345 + 1e-9 and len(b.t) == 41


def test_a_diverging_plant_raises_as_its_twin_does():
    model, state, t_refs, refs = _case("sidewinding", 1.0)
    bad = SnakeModel(model.params, SolverParams(dt=0.05, drive="explicit"))
    with pytest.raises(StateError, match="diverged") as twin:
        drive_plant_reference(bad, state, t_refs, refs, 1.0, 0.05, "module")
    with pytest.raises(StateError, match="diverged") as compiled:
        drive_plant(bad, state, t_refs, refs, 1.0, 0.05, "module")
    assert str(compiled.value) == str(twin.value) and "dt = 0.05 s" in str(twin.value)


def test_ticks_run_ahead_are_the_bank_ticked_and_the_plant_advanced_tick_by_tick():
    """SimulatedAiko.run_ticks (the virtual rig's ticks between the loop's
    events) against the bank's tick and advance one by one: the same state to
    the last bit, stopping after the first tick with frames to send (the
    modules' heartbeats), whose frames the bank gives as its tick does."""
    from aiko.experiments.rig.plant import PLANT_TICK, SimulatedAiko, _send_period, _started_bank

    model, state, t_refs, refs = _case("sidewinding", 0.5)
    runs = []
    for ahead in (False, True):
        bank = _started_bank(model, math.radians(4.0), "module")
        aiko = SimulatedAiko(model, bank, state.copy())
        aiko.state.t = 0.0
        _send_period(bank, 0.0, refs[0], 0)      # the first period, then ticks from 0
        t, frames = 0.0, []
        if ahead:
            t, rows = aiko.run_ticks(0.0, 0.5, PLANT_TICK)
            frames = bank.ticked(t, rows) if rows >= 0 else []
        else:
            while not frames and t < 0.5 - 1e-12:
                t += PLANT_TICK
                frames = bank.tick(t)
                aiko.advance(t)
        runs.append((t, frames, aiko, bank))
    (t_a, f_a, a, bank_a), (t_b, f_b, b, bank_b) = runs
    assert t_a == t_b and 0.05 < t_b < 0.5 and [o.frame for o in f_a] == [o.frame for o in f_b]
    assert len(f_b) == 10                           # a heartbeat from each module
    for name in ("q", "u", "P", "active", "dP"):
        np.testing.assert_array_equal(getattr(a.state, name), getattr(b.state, name))
    assert (a.state.t, a.steps, a.iterations, a.unconverged, a.work) == \
        (b.state.t, b.steps, b.iterations, b.unconverged, b.work)
    np.testing.assert_array_equal(a.joint_angles(), b.joint_angles())
    np.testing.assert_array_equal(bank_a.motor_angles(), bank_b.motor_angles())
    np.testing.assert_array_equal(bank_a.link_angles(), bank_b.link_angles())
    assert a.run_ticks(t_a, t_a + 0.5 * PLANT_TICK, PLANT_TICK) == (t_a, -1)   # none before stop


def test_ticks_run_ahead_in_several_calls_are_one_call_and_leave_the_given_state_alone():
    """run_ticks steps the state it made in place from one call to the next:
    three calls give the state one call gives, to the last bit, and the
    state handed to the plant stays as it was."""
    from aiko.experiments.rig.plant import PLANT_TICK, SimulatedAiko, _send_period, _started_bank

    model, state, _, refs = _case("lateral-undulation", 0.5)
    ends = []
    for stops in ((0.011, 0.021, 0.031), (0.031,)):
        given = state.copy()
        given.t = 0.0
        kept = given.copy()
        bank = _started_bank(model, math.radians(4.0), "module")
        aiko = SimulatedAiko(model, bank, given)
        _send_period(bank, 0.0, refs[0], 0)
        t = 0.0
        for stop in stops:
            t, rows = aiko.run_ticks(t, stop, PLANT_TICK)
            assert rows == -1                          # no frames before the first heartbeat
        assert aiko.state is not given
        for name in ("q", "u", "P", "active", "dP"):
            np.testing.assert_array_equal(getattr(given, name), getattr(kept, name))
        assert given.t == 0.0
        ends.append((t, aiko))
    (t_a, a), (t_b, b) = ends
    assert t_a == t_b == pytest.approx(0.030) and a.steps == b.steps == 60
    for name in ("q", "u", "P", "active", "dP"):
        np.testing.assert_array_equal(getattr(a.state, name), getattr(b.state, name))
    assert (a.state.t, a.iterations, a.work) == (b.state.t, b.iterations, b.work)
