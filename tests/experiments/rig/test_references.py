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
