"""The model's Python API: states, holding references, saving, small snakes,
restitution, input checks."""

import math

import numpy as np
import pytest

from aiko.control import PRESETS, references
from aiko.model import (
    JointReferenceError,
    ParameterError,
    SnakeModel,
    SnakeParams,
    SnakeState,
    SolverParams,
    StateError,
)


def test_advance_holds_references_and_equals_stepping():
    model = SnakeModel(SnakeParams(n=5))
    s0 = model.initial_state()
    refs = references(PRESETS["sidewinding"].with_(soft_start=False), 0.3, 4)
    a, st = model.advance(s0, 0.1, refs)
    assert st.steps == round(0.1 / model.dt) and a.t == pytest.approx(0.1)
    b, _ = model.run_steps(s0, np.repeat(refs[None], st.steps, axis=0))
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.u, b.u)
    # the input state is left untouched (new state out)
    np.testing.assert_array_equal(s0.q, model.initial_state().q)


def test_extrapolated_warm_start_is_part_of_the_state():
    """The warm start extrapolates each ground contact's impulses from its
    change in the last step, which the state carries (dP): a trajectory does
    not depend on how it is cut into calls (uneven pieces, each continuing a
    copy of the last state), and lateral undulation needs fewer sweeps than
    with the paper's warm start (its first 0.2 s from the curved start at
    rest: 2.8 against 3.6 a step; over 15 s 1.6 against 2.4) while the two
    paths stay within 0.5 mm of each other there."""
    g = PRESETS["lateral-undulation"]
    model = SnakeModel(SnakeParams(mu_x=g.mu_x, mu_y=g.mu_y))
    plain = SnakeModel(model.params, model.solver.with_(extrapolate=False))
    assert model.solver.extrapolates and not plain.solver.extrapolates
    assert not SolverParams(solver="newton").extrapolates
    nj = model.n - 1
    s0 = model.initial_state(*references(g, 0.0, nj)[:, :2].T)
    t = np.arange(400) * model.dt
    refs = references(g, t, nj)
    whole, st = model.run_steps(s0, refs)
    assert np.abs(whole.dP).max() > 0
    cut = s0
    for k in range(0, 400, 37):  # uneven pieces, each a fresh call
        cut, _ = model.run_steps(cut.copy(), refs[k:k + 37])
    for name in ("q", "u", "P", "dP"):
        np.testing.assert_array_equal(getattr(cut, name), getattr(whole, name))
    other, st_plain = plain.run_steps(s0, refs)
    assert np.all(other.dP == 0)
    assert st.iterations < 0.9 * st_plain.iterations
    assert np.abs(other.q[:, :3] - whole.q[:, :3]).max() < 1e-3


def test_state_copy_save_load_roundtrip(tmp_path):
    model = SnakeModel(SnakeParams(n=4))
    s, _ = model.advance(model.initial_state(height=0.01), 0.05)
    c = s.copy()
    c.q[0, 0] += 1.0
    assert s.q[0, 0] != c.q[0, 0]
    path = tmp_path / "state.npz"
    s.save(path)
    r = SnakeState.load(path)
    for name in ("q", "u", "P", "active", "dP"):
        np.testing.assert_array_equal(getattr(r, name), getattr(s, name))
    assert r.t == s.t
    # a state saved before dP existed loads without extrapolation history
    old = tmp_path / "old.npz"
    np.savez(old, t=np.array(s.t), q=s.q, u=s.u, P=s.P, active=s.active)
    np.testing.assert_array_equal(SnakeState.load(old).dP, np.zeros((2 * s.n, 5)))
    # continuing from a restored state gives the same future
    s1, _ = model.advance(s, 0.1)
    r1, _ = model.advance(r, 0.1)
    np.testing.assert_array_equal(s1.q, r1.q)


def test_bad_state_files_and_shapes_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(StateError, match="not a saved model state"):
        SnakeState.load(bad)
    model = SnakeModel(SnakeParams(n=3))
    with pytest.raises(StateError, match="q: expected shape"):
        model.state_from_q(np.zeros((4, 7)))
    q = model.initial_state().q
    q[1, 2] = np.nan
    with pytest.raises(StateError, match="non-finite"):
        model.state_from_q(q)
    with pytest.raises(JointReferenceError, match="expected shape"):
        model.step(model.initial_state(), np.zeros((5, 4)))
    with pytest.raises(JointReferenceError, match="non-finite"):
        model.step(model.initial_state(), np.full((2, 4), np.inf))
    s = model.initial_state()
    s.dP = np.zeros((4, 5))
    with pytest.raises(StateError, match="dP: expected shape"):
        model.step(s)


@pytest.mark.parametrize("name", ["q", "u", "P", "dP"])
def test_stepping_a_non_finite_state_names_the_array_and_keeps_the_state(name):
    """The kernel checks the values (the wrapper only the shapes): the error
    still names the array, for any number of steps, and the state is left as
    it was."""
    model = SnakeModel(SnakeParams(n=3))
    s = model.initial_state()
    getattr(s, name)[1, 2] = np.nan
    before = s.copy()
    for call in (lambda: model.step(s), lambda: model.advance(s, s.t),
                 lambda: model.run_steps(s, np.zeros((4, 2, 4)))):
        with pytest.raises(StateError, match=f"^{name}: contains non-finite values"):
            call()
    for field in ("q", "u", "P", "dP"):
        np.testing.assert_array_equal(getattr(s, field), getattr(before, field))
    s = model.initial_state()
    s.t = math.nan
    with pytest.raises(StateError, match="^t: is not finite"):
        model.step(s)
    refs = np.zeros((4, 2, 4))
    refs[3, 1, 2] = -np.inf  # the last row: every row is checked
    with pytest.raises(JointReferenceError, match="non-finite"):
        model.run_steps(model.initial_state(), refs)


@pytest.mark.parametrize("kw", [dict(n=0), dict(L=-1.0), dict(e_N=1.5), dict(slope_deg=90.0),
                                dict(mu_x=-0.1), dict(k_N=0.0), dict(k_N=float("nan")),
                                dict(d_N=-1.0), dict(d_N=math.inf), dict(v_N=0.0)])
def test_bad_parameters(kw):
    with pytest.raises(ParameterError):
        SnakeParams(**kw)


@pytest.mark.parametrize("kw", [dict(dt=0.0), dict(solver="cg"), dict(alpha=2.5),
                                dict(max_iter=0), dict(projection="none"),
                                dict(link_passes=0), dict(link_passes=1.5)])
def test_bad_solver_parameters(kw):
    with pytest.raises(ParameterError):
        SolverParams(**kw)


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_snakes_fall_land_and_rest(n):
    model = SnakeModel(SnakeParams(n=n))
    s, st = model.advance(model.initial_state(height=0.02), 0.5)
    assert st.unconverged == 0
    assert -1e-3 < model.contact_gaps(s).min() <= 1e-9
    assert np.abs(s.u).max() < 1e-9
    assert model.joint_angles(s).shape == (n - 1, 4)


def test_newton_restitution_bounces():
    """One flat link dropped on its two spheres with e_N = 0.5 leaves the ground
    at half its impact speed (Gehring et al. eq. 5; a law of the rigid
    contact, k_N = inf); with e_N = 0 it stays. On the default contact
    springs it stays too: they push out what the landing's step pressed in
    (0.3 mm at 1 m/s) at no more than v_N. Restitution on the springs is
    refused: their damper says how they bounce."""
    h = 0.05
    v_in = math.sqrt(2 * 9.81 * h)
    for e_N, k_N, expected in ((0.5, math.inf, 0.5 * v_in), (0.0, math.inf, 0.0),
                               (0.0, SnakeParams.k_N, None)):
        # at 0.5 ms, where the rigid law's "stays" was measured (1.2e-8 m/s at 1 ms)
        model = SnakeModel(SnakeParams(n=1, e_N=e_N, mu_x=0.0, mu_y=0.0, k_N=k_N),
                           SolverParams(dt=0.0005))
        s = model.initial_state(height=h)
        vz_max = 0.0
        while s.t < math.sqrt(2 * h / 9.81) + 0.01:
            s, _ = model.step(s)
            vz_max = max(vz_max, s.u[0, 2])
        if expected is None:
            assert 0.0 < vz_max <= model.params.v_N + model.solver.u_tol
        else:
            assert vz_max == pytest.approx(expected, rel=0.02, abs=1e-9)
    with pytest.raises(ParameterError, match="e_N"):
        SnakeParams(e_N=0.5)


def test_contact_impulses_carry_the_weight():
    """Resting: the normal impulses per step add up to m g dt per link (once
    the contact springs have settled: 0.2 s is twenty times d_N / k_N)."""
    p = SnakeParams()
    model = SnakeModel(p)
    s, _ = model.advance(model.initial_state(), 0.2)
    P = s.contact_impulses
    assert P[:, 0].sum() == pytest.approx(p.n * p.m * p.g * model.dt, rel=1e-6)
    assert np.all(P[:, 0] >= 0)
