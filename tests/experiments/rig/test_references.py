"""The lagging plant's references from the motors' record: the numba kernel
against its numpy twin, on random records."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.experiments.rig.references import (
    recorded_references,
    recorded_references_reference,
)
from aiko.model.errors import ParameterError


@st.composite
def records(draw):
    """A record of ticks (2 ms, a little more or less, or a half tick), the
    plant somewhere in or around it, a few steps to take."""
    j = draw(st.integers(1, 4))
    k = draw(st.integers(0, 30))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    gaps = rng.choice([0.002, 0.0021, 0.0019, 0.0005, 1e-10], size=k)
    rec_t = 0.01 + np.cumsum(gaps)
    rec_x = rng.normal(size=(k, j, 2, 2))
    t0 = draw(st.sampled_from([0.0, 0.01, 0.0105]) | st.floats(0.0, 0.08))
    dt = draw(st.sampled_from([0.0005, 0.001, 0.00025]))
    m = draw(st.integers(1, 12))
    link = rng.normal(scale=0.3, size=(j, 4))
    theta0 = link[:, :2] + rng.normal(scale=0.05, size=(j, 2))
    half = np.abs(rng.normal(scale=0.03, size=(j, 2)))
    driven = rng.random((j, 2)) < 0.8
    return t0, dt, m, rec_t, rec_x, theta0, link, half, driven


@settings(max_examples=300)
@given(records())
def test_the_kernel_is_its_numpy_twin(case):
    got = recorded_references(*case)
    want = recorded_references_reference(*case)
    assert (got is None) == (want is None)
    if want is not None:
        np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-15)
        np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-15)


def test_the_references_follow_the_motor_through_the_free_play():
    """One joint, the motor moving linearly 0 -> 0.1 rad over the record's
    two ticks, the link at 0 with free play +-0.02 rad: inside the play the
    link is left alone, past it pulled to its edge at the motor's speed; a
    limp motor leaves it alone throughout."""
    rec_t = np.array([0.002, 0.004])
    rec_x = np.zeros((2, 1, 2, 2))
    rec_x[:, 0, 0, 0] = [0.05, 0.1]          # horizontal motor angle, rad
    rec_x[:, 0, 0, 1] = 25.0                 # its speed, rad/s
    link = np.zeros((1, 4))
    link[0, 2] = 0.3                         # the link's horizontal rate, rad/s
    half = np.full((1, 2), 0.02)
    refs, theta_end = recorded_references(0.0, 0.0005, 8, rec_t, rec_x, np.zeros((1, 2)), link,
                                          half, np.ones((1, 2), dtype=bool))
    theta = 0.0125 * np.arange(1, 9)         # the motor at each step
    np.testing.assert_allclose(refs[:, 0, 0], np.maximum(0.0, theta - 0.02))
    np.testing.assert_allclose(refs[:, 0, 2], np.where(theta > 0.02, 25.0, 0.3))
    assert theta_end[0, 0] == pytest.approx(0.1)
    limp, _ = recorded_references(0.0, 0.0005, 8, rec_t, rec_x, np.zeros((1, 2)), link, half,
                                  np.zeros((1, 2), dtype=bool))
    np.testing.assert_array_equal(limp, np.broadcast_to(link, (8, 1, 4)))
    assert recorded_references(0.0, 0.0005, 9, rec_t, rec_x, np.zeros((1, 2)), link, half,
                               np.ones((1, 2), dtype=bool)) is None    # past the record


def test_bad_input_is_a_clear_error():
    rec_t, rec_x = np.array([0.002]), np.zeros((1, 2, 2, 2))
    args = (np.zeros((2, 2)), np.zeros((2, 4)), np.zeros((2, 2)), np.ones((2, 2), dtype=bool))
    with pytest.raises(ParameterError, match="steps"):
        recorded_references(0.0, 0.0005, 0, rec_t, rec_x, *args)
    with pytest.raises(ParameterError, match="does not fit 3 joints"):
        recorded_references(0.0, 0.0005, 2, rec_t, rec_x, np.zeros((3, 2)), np.zeros((3, 4)),
                            np.zeros((3, 2)), np.ones((3, 2), dtype=bool))


# ------------------------------------------------ the free play at every step
def _walking_motors(model, steps, seed):
    """Motors (steps, n-1, 4) sweeping +-0.3 rad at 0.5-1.5 rad/s, from the
    straight posture."""
    rng = np.random.default_rng(seed)
    nj = model.n - 1
    t = model.dt * np.arange(1, steps + 1)[:, None]
    w = rng.uniform(0.5, 1.5, size=(1, nj))
    motors = np.zeros((steps, nj, 4))
    motors[..., 0] = 0.3 * np.sin(w * t)
    motors[..., 2] = 0.3 * w * np.cos(w * t)
    return motors


def test_the_models_free_play_is_the_numpy_drive_at_each_step():
    """run_steps_through_play is pd_references from each step's joint angles,
    one step at a time, to round-off."""
    from aiko.experiments.rig.references import pd_references
    from aiko.model import SnakeModel, SnakeParams

    model = SnakeModel(SnakeParams(n=5))
    motors = _walking_motors(model, 40, seed=3)
    half = np.full((4, 2), np.radians(2.0))
    driven = np.ones((4, 2), dtype=bool)
    driven[2, 0] = False                           # one limp motor
    state0 = model.initial_state()
    got, _ = model.run_steps_through_play(state0, motors, half, driven)
    state = state0
    for s in range(len(motors)):
        refs = pd_references(motors[s:s + 1, :, :2], motors[s:s + 1, :, 2:],
                             model.joint_angles(state), half, driven)
        state, _ = model.run_steps(state, refs)
    np.testing.assert_allclose(got.q, state.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.u, state.u, rtol=0, atol=1e-10)


@pytest.mark.parametrize("chunk", [1, 3, 8])
def test_the_plants_motion_does_not_depend_on_the_steps_a_call_takes(chunk):
    """The simulated Aiko's physics in chunks of any size (its real-time
    process takes as many as it is behind) moves exactly as in one call."""
    from aiko.model import SnakeModel, SnakeParams

    model = SnakeModel(SnakeParams(n=5))
    motors = _walking_motors(model, 24, seed=5)
    half = np.full((4, 2), np.radians(2.0))
    driven = np.ones((4, 2), dtype=bool)
    whole, _ = model.run_steps_through_play(model.initial_state(), motors, half, driven)
    state = model.initial_state()
    for s in range(0, len(motors), chunk):
        state, _ = model.run_steps_through_play(state, motors[s:s + chunk], half, driven)
    np.testing.assert_array_equal(state.q, whole.q)
    np.testing.assert_array_equal(state.u, whole.u)


def test_motors_of_the_wrong_shape_or_a_negative_play_are_refused():
    from aiko.model import JointReferenceError, SnakeModel, SnakeParams

    model = SnakeModel(SnakeParams(n=3))
    ok = np.zeros((2, 2, 4))
    with pytest.raises(JointReferenceError, match="motors of shape"):
        model.run_steps_through_play(model.initial_state(), np.zeros((2, 3, 4)),
                                     np.zeros((2, 2)), np.ones((2, 2), bool))
    with pytest.raises(JointReferenceError, match="half the play"):
        model.run_steps_through_play(model.initial_state(), ok, -np.ones((2, 2)),
                                     np.ones((2, 2), bool))
    bad = ok.copy()
    bad[1, 0, 2] = np.nan
    with pytest.raises(JointReferenceError, match="non-finite"):
        model.run_steps_through_play(model.initial_state(), bad, np.zeros((2, 2)),
                                     np.ones((2, 2), bool))
