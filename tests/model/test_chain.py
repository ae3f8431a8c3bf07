"""The O(n) chain responses (aiko.model._chain) against dense linear algebra, and
Alexiou's worked 2-link example (seeds/002, section 3): a planar chain pinned at
one end whose tip hits a wall."""

import math

import numpy as np
import pytest

from aiko.model import SnakeModel, SnakeParams
from aiko.model import _chain as C
from aiko.model import _kernels as K
from aiko.model.posture import posture_from_joint_angles, straight_posture
from aiko.model.reference import _pars, dense_matrices, reference_drive_rows

NR = C.NR
DT = 0.002


def _chain_system(q, par, minv, u=None, refs=None, sigma=1.0):
    """Everything the chain kernels compute for posture q: with u and refs the
    implicit drives' rows (step DT), else inert drive rows (explicit drives)."""
    n = q.shape[0]
    nj = n - 1
    Rs = np.empty((n, 3, 3))
    K._all_rotations(q, Rs)
    WJ = np.zeros((nj, 12, NR))
    comp = np.zeros((nj, NR))
    bo = np.zeros((nj, NR))
    if u is None:
        K._inert_drive_rows(WJ, comp, bo)
    else:
        K.drive_rows(Rs, u, refs, par[9], par[10], par[11], par[12], DT, sigma, WJ, comp, bo)
    D, E, Ld, Ls, FL, DR, FR = (np.zeros((nj, NR, NR)) for _ in range(7))
    K.joint_system(Rs, par, minv, WJ, comp, D, E, Ld, Ls)
    C.eliminations(D, E, Ld, Ls, FL, DR, FR, np.zeros((NR, NR)), 0, nj - 1)
    return dict(Rs=Rs, WJ=WJ, D=D, E=E, Ld=Ld, Ls=Ls, FL=FL, DR=DR, FR=FR, comp=comp, bo=bo)


def _link_gains(sys_, minv, l):
    """(m, (C, Y), K_l) of link_block."""
    Y = np.zeros((2 * NR, 6))
    Kl = np.zeros((6, 6))
    Cl = np.zeros((NR, NR))
    m = C.link_block(l, sys_["WJ"], minv[l], sys_["Ld"], sys_["Ls"], sys_["DR"], Y, Kl, Cl,
                     np.zeros(6))
    return m, (Cl, Y), Kl


def _curved_posture(params, seed):
    rng = np.random.default_rng(seed)
    nj = params.n - 1
    return posture_from_joint_angles(params, rng.uniform(-0.7, 0.7, nj),
                                     rng.uniform(-0.4, 0.4, nj), 0.05)


@pytest.mark.parametrize("n", [2, 3, 11])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("drives", ["explicit", "implicit"])
def test_link_gains_equal_dense_constrained_inverse_mass(n, seed, drives):
    """K_l is link l's block of M^-1 - M^-1 W G^-1 W^T M^-1, and
    link_velocity's u_l is link l's part of v - M^-1 W G^-1 (W^T v + o),
    for any v: W = W_J (explicit drives, inert rows) or [W_J, W_D] with
    G = W^T M^-1 W + diag(compliance) and o the drives' offsets (implicit
    drives, from the dense twin's reference_drive_rows)."""
    params = SnakeParams(n=n)
    model = SnakeModel(params)
    par = model._par
    minv = np.zeros((n, 6))
    K._inverse_mass(par, minv)
    q = _curved_posture(params, seed)
    rng = np.random.default_rng(seed + 20)
    W_J = dense_matrices(q, _pars(par))["W_J"]
    comp = np.zeros(W_J.shape[1])
    offset = np.zeros(W_J.shape[1])
    if drives == "implicit":
        u = rng.normal(size=(n, 6))
        refs = rng.normal(scale=0.3, size=(n - 1, 4))
        sys_ = _chain_system(q, par, minv, u, refs, sigma=0.6)
        W_D, c_D, o_D = reference_drive_rows(sys_["Rs"], u, refs, _pars(par), DT, 0.6)
        W_J = np.hstack([W_J, W_D])
        comp = np.concatenate([comp, c_D])
        offset = np.concatenate([offset, o_D])
        assert np.abs(o_D).max() > 1.0  # the references are far from the posture
    else:
        sys_ = _chain_system(q, par, minv)
    Minv = np.diag(minv.reshape(-1))
    G = W_J.T @ Minv @ W_J + np.diag(comp)
    A = Minv - Minv @ W_J @ np.linalg.solve(G, W_J.T @ Minv)
    v = np.random.default_rng(seed + 10).normal(size=6 * n)
    u_dense = v - Minv @ W_J @ np.linalg.solve(G, W_J.T @ v + offset)
    b = np.zeros((n - 1, NR))
    C.joint_rhs(sys_["WJ"], v, sys_["bo"], b)
    bL = np.zeros_like(b)
    bR = np.zeros_like(b)
    for i in range(n - 1):
        C.propagate_left(i, b, sys_["FL"], bL)
    C.all_right(b, sys_["FR"], bR, 0, n - 2)
    for l in range(n):
        m, gains, Kl = _link_gains(sys_, minv, l)
        assert m == NR * ((l > 0) + (l < n - 1))
        np.testing.assert_allclose(Kl, A[6 * l:6 * l + 6, 6 * l:6 * l + 6], atol=1e-9, rtol=1e-9)
        ul = np.zeros(6)
        C.link_velocity(l, v, n - 1, bL, bR, sys_["Ld"], sys_["Ls"], *gains, np.zeros(2 * NR), ul)
        np.testing.assert_allclose(ul, u_dense[6 * l:6 * l + 6], atol=1e-12, rtol=1e-9)


@pytest.mark.parametrize("eps", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("rates", [(1.0, 0.0), (0.3, -0.8), (-2.0, 1.5)])
def test_alexiou_two_link_impact(eps, rates):
    """Seeds/002 section 3: two horizontal links of length L, mass m and
    I = m L^2 / 12, pinned at one end, hit a wall with the tip: impulse
    J = (1 + eps) 7m/24 L (2 th1' + th2') (36), joint responses
    dth1' = (1 + eps) (2 th1' + th2') / 4 and dth2' = -(1 + eps) 3/2 (2 th1' + th2')
    (38)-(39), the tip leaves at -eps times its approach speed (40).

    Built from our chain: a third, immovable link (zero inverse mass) carries
    the pin as a cardan joint; the chain lies along x, the wall normal is y, so
    the motion stays in the plane of the joints' yaw axes."""
    m, L = 2.0, 0.3
    th1, th2 = rates
    params = SnakeParams(n=3, L=L, m=m, Theta1=m * L**2 / 12.0, Theta3=1e-3)
    par = SnakeModel(params)._par
    q = straight_posture(params)  # link 1 at +x: index 0 is the tip link
    minv = np.zeros((3, 6))
    K._inverse_mass(par, minv)
    minv[2] = 0.0  # the ground, where the pin is
    sys_ = _chain_system(q, par, minv)
    Rs = sys_["Rs"]
    pin = 0.5 * (q[1, :3] + q[2, :3])
    ez = np.array([0.0, 0.0, 1.0])
    # velocities of the joint rates: link index 1 turns about the pin with th1,
    # link index 0 with th1 + th2 about the joint between them
    u = np.zeros((3, 6))
    w1 = th1 * ez
    u[1, :3] = np.cross(w1, q[1, :3] - pin)
    u[1, 3:] = Rs[1].T @ w1
    joint01 = 0.5 * (q[0, :3] + q[1, :3])
    w0 = (th1 + th2) * ez
    u[0, :3] = np.cross(w1, joint01 - pin) + np.cross(w0, q[0, :3] - joint01)
    u[0, 3:] = Rs[0].T @ w0
    b = np.zeros((2, NR))
    C.joint_rhs(sys_["WJ"], u.reshape(-1), sys_["bo"], b)
    assert np.abs(b).max() < 1e-12  # the rates satisfy the joints
    # the tip and the wall's direction as a generalised force on link index 0
    r_tip = np.array([0.5 * L, 0.0, 0.0])
    ey = np.array([0.0, 1.0, 0.0])
    w = np.concatenate([ey, Rs[0].T @ np.cross(r_tip, ey)])
    v_imp = w @ u[0]
    assert v_imp == pytest.approx(L * (2 * th1 + th2), rel=1e-12, abs=1e-15)
    _, _, K0 = _link_gains(sys_, minv, 0)
    assert w @ K0 @ w == pytest.approx(24.0 / (7.0 * m), rel=1e-12)  # (35)
    J = (1 + eps) * v_imp / (w @ K0 @ w)
    assert J == pytest.approx((1 + eps) * 7 * m / 24 * L * (2 * th1 + th2), rel=1e-12, abs=1e-14)
    # the whole chain's response to -J at the tip, joints solved directly
    dv = np.zeros(18)
    dv[:6] = minv[0] * w * -J
    K.constrain_velocity(sys_["WJ"], sys_["Ld"], sys_["Ls"], minv, sys_["bo"], dv,
                         np.zeros((2, NR)))
    du = dv.reshape(3, 6)
    k = 2 * th1 + th2
    dth1 = (Rs[1] @ du[1, 3:])[2]
    dth2 = (Rs[0] @ du[0, 3:])[2] - dth1
    assert dth1 == pytest.approx((1 + eps) * k / 4, rel=1e-10, abs=1e-13)  # (38)
    assert dth2 == pytest.approx(-(1 + eps) * 1.5 * k, rel=1e-10, abs=1e-13)  # (39)
    assert np.abs(du[2]).max() == 0.0  # the ground does not move
    assert w @ (u[0] + du[0]) == pytest.approx(-eps * v_imp, rel=1e-10, abs=1e-13)  # (40)
    # and the links stay in the plane
    assert math.hypot(*(Rs[1] @ du[1, 3:])[:2]) < 1e-12
