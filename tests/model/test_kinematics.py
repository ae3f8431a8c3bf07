"""Kinematics (6)-(43): rotations, gap functions, and every W matrix against
finite differences of its gap function or of the contact point's motion."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiko.model import SnakeModel, SnakeParams
from aiko.model import _kernels as K
from aiko.model.posture import STRAIGHT_R, posture_from_joint_angles, straight_posture
from aiko.model.quaternion import (
    H,
    H_bar,
    about_axis,
    from_rotation_matrix,
    multiply,
    rotation_matrix,
    skew,
)
from aiko.model.reference import _F, _pars, dense_matrices

quat = st.lists(st.floats(-1, 1), min_size=4, max_size=4).filter(
    lambda v: np.linalg.norm(v) > 0.1).map(lambda v: np.array(v) / np.linalg.norm(v))


@given(quat)
def test_rotation_is_orthonormal_and_kernel_matches_paper(p):
    R = rotation_matrix(p)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(R) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(K.rotation(p, np.empty((3, 3))), R, atol=1e-14)
    # H Hbar^T == H Hbar^T of -p (double cover), and H p == 0
    np.testing.assert_allclose(rotation_matrix(-p), R, atol=1e-14)
    np.testing.assert_allclose(H(p) @ p, 0, atol=1e-14)
    np.testing.assert_allclose(H_bar(p) @ p, 0, atol=1e-14)


@given(quat, quat)
def test_quaternion_product_and_inverse_map(a, b):
    np.testing.assert_allclose(rotation_matrix(multiply(a, b)),
                               rotation_matrix(a) @ rotation_matrix(b), atol=1e-12)
    p = from_rotation_matrix(rotation_matrix(a))
    assert np.allclose(p, a, atol=1e-9) or np.allclose(p, -a, atol=1e-9)


@given(quat, st.lists(st.floats(-5, 5), min_size=3, max_size=3))
def test_quaternion_rate_is_body_angular_velocity(p, w):
    """pdot = 1/2 Hbar^T omega_B (74) gives Rdot = R skew(omega_B) (8)."""
    w = np.array(w)
    h = 1e-6
    Rp = rotation_matrix(p + h * 0.5 * H_bar(p).T @ w)
    Rm = rotation_matrix(p - h * 0.5 * H_bar(p).T @ w)
    np.testing.assert_allclose((Rp - Rm) / (2 * h), rotation_matrix(p) @ skew(w), atol=1e-6)


def random_state(rng, n=5, tilt=0.4):
    p = SnakeParams(n=n)
    q = posture_from_joint_angles(p, rng.uniform(-0.7, 0.7, n - 1), rng.uniform(-0.5, 0.5, n - 1))
    # tilt and move the whole snake, then perturb every link so the joints open
    tq = about_axis(np.array([1.0, 2.0, 0.5]) / np.linalg.norm([1.0, 2.0, 0.5]), tilt)
    for i in range(n):
        q[i, 3:] = multiply(tq, q[i, 3:])
        q[i, 3:] = multiply(about_axis(np.eye(3)[i % 3], rng.uniform(-0.1, 0.1)), q[i, 3:])
    q[:, :3] += rng.normal(0, 0.01, (n, 3))
    u = rng.normal(0, 1.0, (n, 6))
    return p, q, u


def _moved(q, u, h):
    """q moved by +-h along the velocity u: q +- h F(q) u (73)-(74)."""
    dq = (h * _F(q) @ u.reshape(-1)).reshape(q.shape)
    return q + dq, q - dq


def _gaps(q, par):
    n = q.shape[0]
    gN = K.contact_gaps(q, par[1], par[2], np.empty(2 * n))
    gJ = K.joint_gaps(q, par[0], np.empty((n - 1, 4)))
    return gN, gJ


@pytest.mark.parametrize("seed", range(5))
def test_W_N_and_W_J_are_gap_derivatives(seed):
    """gamma = W^T u equals d/dt of the gap functions (9)-(13), (17)-(19), (38)-(43)."""
    rng = np.random.default_rng(seed)
    params, q, u = random_state(rng)
    model = SnakeModel(params)
    par = model._par
    mats = dense_matrices(q, _pars(par))
    h = 1e-6
    qp, qm = _moved(q, u, h)
    gNp, gJp = _gaps(qp, par)
    gNm, gJm = _gaps(qm, par)
    np.testing.assert_allclose(mats["W_N"].T @ u.reshape(-1), (gNp - gNm) / (2 * h), atol=1e-6)
    np.testing.assert_allclose(mats["W_J"].T @ u.reshape(-1), ((gJp - gJm) / (2 * h)).reshape(-1),
                               atol=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_W_T_is_the_sliding_velocity_of_the_contact_point(seed):
    """(21)-(32): the body-fixed point at C moves, in Pi_i, with W_T^T u."""
    rng = np.random.default_rng(seed)
    params, q, u = random_state(rng)
    par = SnakeModel(params)._par
    mats = dense_matrices(q, _pars(par))
    h = 1e-6
    qp, qm = _moved(q, u, h)
    n = params.n
    for a in range(2 * n):
        i, side = a % n, (1.0 if a < n else -1.0)
        R = rotation_matrix(q[i, 3:])
        r_GC = side * params.L_GS * R[:, 2] - params.L_SC * np.eye(3)[:, 2]
        body = R.T @ r_GC

        def point(qq, i=i, body=body):
            return qq[i, :3] + rotation_matrix(qq[i, 3:] / np.linalg.norm(qq[i, 3:])) @ body

        v = (point(qp) - point(qm)) / (2 * h)
        ex = np.array([R[0, 2], R[1, 2], 0.0])
        ex /= np.linalg.norm(ex)
        ey = np.cross([0, 0, 1.0], ex)
        gT = mats["W_T"][:, 2 * a:2 * a + 2].T @ u.reshape(-1)
        np.testing.assert_allclose(gT, [v @ ex, v @ ey], atol=1e-6)
        # rolling (33): D^T (r_CS x omega_I)
        wI = R @ u[i, 3:]
        gV = mats["W_V"][:, 2 * a:2 * a + 2].T @ u.reshape(-1)
        np.testing.assert_allclose(gV, np.cross(params.L_SC * np.eye(3)[:, 2], wI)[:2], atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_kernel_jacobians_equal_the_dense_paper_matrices(seed):
    rng = np.random.default_rng(seed)
    params, q, u = random_state(rng)
    par = SnakeModel(params)._par
    mats = dense_matrices(q, _pars(par))
    n = params.n
    W = np.empty((6, 5))
    for a in range(2 * n):
        i, side = a % n, (1.0 if a < n else -1.0)
        K.contact_jacobian(mats["Rs"][i], side, params.L_SC, params.L_GS, W)
        np.testing.assert_allclose(W[:, 0], mats["W_N"][6 * i:6 * i + 6, a], atol=1e-14)
        np.testing.assert_allclose(W[:, 1:3], mats["W_T"][6 * i:6 * i + 6, 2 * a:2 * a + 2],
                                   atol=1e-14)
        np.testing.assert_allclose(W[:, 3:5], mats["W_V"][6 * i:6 * i + 6, 2 * a:2 * a + 2],
                                   atol=1e-14)
    WJ = np.empty((12, 4))
    for i in range(n - 1):
        K.joint_jacobian(mats["Rs"][i], mats["Rs"][i + 1], params.L, params.L, WJ)
        np.testing.assert_allclose(WJ, mats["W_J"][6 * i:6 * i + 12, 4 * i:4 * i + 4], atol=1e-14)


def test_straight_posture_rests_on_the_ground_with_link_1_at_plus_x():
    p = SnakeParams()
    q = straight_posture(p)
    model = SnakeModel(p)
    state = model.state_from_q(q)
    np.testing.assert_allclose(model.contact_gaps(state), 0.0, atol=1e-15)
    np.testing.assert_allclose(model.joint_gaps(state), 0.0, atol=1e-15)
    assert np.all(np.diff(q[:, 0]) < 0)  # link 1 at +x, link n at -x
    np.testing.assert_allclose(rotation_matrix(q[0, 3:]), STRAIGHT_R, atol=1e-15)
    np.testing.assert_allclose(q[:, :2].mean(axis=0), 0.0, atol=1e-15)


@given(st.lists(st.floats(-0.78, 0.78), min_size=6, max_size=6),
       st.lists(st.floats(-0.78, 0.78), min_size=6, max_size=6))
def test_joint_angles_recover_the_posture(ah, av):
    """(65)-(66) invert R^Bi_Bi+1 = R_y(alpha_h) R_x(alpha_v)."""
    p = SnakeParams(n=7)
    model = SnakeModel(p)
    state = model.state_from_q(posture_from_joint_angles(p, ah, av, height=0.3))
    ang = model.joint_angles(state)
    np.testing.assert_allclose(ang[:, 0], ah, atol=1e-12)
    np.testing.assert_allclose(ang[:, 1], av, atol=1e-12)
    np.testing.assert_allclose(model.joint_gaps(state), 0.0, atol=1e-14)
    assert model.contact_gaps(state).min() == pytest.approx(0.3, abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_control_torques_are_internal_and_match_the_paper(seed):
    """(62)-(64): joint torques act in pairs, so their world-frame sum is zero;
    the kernel equals the literal formula."""
    from aiko.model.reference import reference_drive_power, reference_torques

    rng = np.random.default_rng(seed)
    params, q, u = random_state(rng)
    Rs = np.array([rotation_matrix(qi[3:]) for qi in q])
    refs = rng.uniform(-0.5, 0.5, (params.n - 1, 4))
    power = np.empty((params.n - 1, 2))
    tau = K.control_torques(Rs, u, refs, params.K_hp, params.K_hd, params.K_vp, params.K_vd,
                            np.empty((params.n, 3)), power)
    total = sum(Rs[i] @ tau[i] for i in range(params.n))
    np.testing.assert_allclose(total, 0.0, atol=1e-10)
    ref = reference_torques(Rs, u, refs, _pars(SnakeModel(params)._par)).reshape(-1, 6)[:, 3:]
    np.testing.assert_allclose(tau, ref, atol=1e-10)
    # the motors' powers: the dense twin's, and together the torques' power tau_C^T u
    np.testing.assert_allclose(
        power, reference_drive_power(Rs, u, refs, _pars(SnakeModel(params)._par)), atol=1e-9)
    assert power.sum() == pytest.approx(float(np.sum(tau * u[:, 3:])), abs=1e-9)


def test_pd_torque_drives_the_joint_toward_its_reference():
    """Positive tau_h reduces alpha_h (68): a joint above its reference is pushed back."""
    p = SnakeParams(n=2, g=0.0)
    model = SnakeModel(p)
    state = model.state_from_q(posture_from_joint_angles(p, [0.3], [0.2], height=0.5))
    refs = np.array([[0.0, 0.0, 0.0, 0.0]])
    s = state
    for _ in range(40):
        s, _ = model.step(s, refs)
    ang0 = model.joint_angles(state)[0]
    ang1 = model.joint_angles(s)[0]
    assert abs(ang1[0]) < abs(ang0[0])
    assert abs(ang1[1]) < abs(ang0[1])
