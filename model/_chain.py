"""O(n) responses of the jointed chain with the joint impulses solved directly.

The joint impulses P_J solve G_J P_J = -b with b = W_J^T v, v (6n,) the velocity
the links would have without them (84). G_J = W_J^T M^-1 W_J is block
tridiagonal: D_i (joint i with itself) and E_i (joints i and i+1 through their
shared link i+1), r x r blocks with r = NR = 6 rows per joint: the cardan
joint's four constraints (39)-(41) and its two drive rows (see
:func:`aiko.model._kernels.drive_rows`; inert with explicit drives), whose
compliance adds to D_i's diagonal and whose offset adds to b. r is a constant
so that numba unrolls the blocks' loops. Eliminating it from both ends of the
chain,

    DL_0 = D_0,        DL_i = D_i - FL_i E_{i-1},   FL_i = E_{i-1}^T DL_{i-1}^-1
    DR_m = D_m,        DR_i = D_i - FR_i E_i^T,     FR_i = E_i DR_{i+1}^-1
    bL_0 = b_0,        bL_i = b_i - FL_i bL_{i-1}
    bR_m = b_m,        bR_i = b_i - FR_i bR_{i+1}

(m = nJ - 1), leaves for the one or two joints that touch link l (l - 1 and l)
the small system Q_l x = [bL_{l-1}; bR_l] with Q_l = [[DL_{l-1}, E_{l-1}],
[E_{l-1}^T, DR_l]] (the Schur complement of G_J on those joints, so Q_l^-1 is
their block of G_J^-1). Its solution gives link l's velocity
u_l = v_l - M_l^-1 B_l^T x in O(1) (B_l: the joints' rows of W_J^T on link l):
with Q_l = F_l F_l^T and Y_l = F_l^-1 B_l M_l^-1, u_l = v_l - Y_l^T F_l^-1
[bL_{l-1}; bR_l], and K_l = M_l^-1 - Y_l^T Y_l is link l's own block of the
constrained inverse mass M^-1 - M^-1 W_J G_J^-1 W_J^T M^-1: the response of
u_l to an impulse on link l when nothing else changes.

A change of the contact impulses on link l changes b only at joints l - 1 and l,
so a Gauss-Seidel sweep along the chain keeps bL current behind it and bR ahead
of it at O(1) per link: Alexiou's impulse propagation (seeds/002) in the form
of a block elimination. Every array is a plain numpy array; nothing allocates.
"""

from __future__ import annotations

import math

from numba import njit

from ._fused import fma

_NO_JOINT = -1
NR = 6
"""Rows per joint in the direct solve: the cardan joint's four constraints
(39)-(41) and its two drive rows (zero and inert with explicit drives)."""


@njit(cache=True, error_model="numpy", inline="always")
def chol_factor(A, m, F):
    """Lower Cholesky factor F of the leading m x m block of the SPD matrix A,
    with the reciprocals of its diagonal on F's diagonal (solves multiply)."""
    for j in range(m):
        s = A[j, j]
        for k in range(j):
            s = fma(-F[j, k], F[j, k], s)
        # 1/sqrt(s) as sqrt(s) * (1/s): the root and the division run side by
        # side (the pivots are the factorisation's critical path)
        d = math.sqrt(s) * (1.0 / s) if s > 0.0 else 1e300
        F[j, j] = d
        for i in range(j + 1, m):
            s = A[i, j]
            for k in range(j):
                s = fma(-F[i, k], F[j, k], s)
            F[i, j] = s * d
        for i in range(j):
            F[i, j] = 0.0


@njit(cache=True, error_model="numpy", inline="always")
def chol_solve(F, m, x):
    """Solve (F F^T) y = x in place for the leading m entries of x (F from
    :func:`chol_factor`)."""
    for i in range(m):
        s = x[i]
        for k in range(i):
            s = fma(-F[i, k], x[k], s)
        x[i] = s * F[i, i]
    for i in range(m - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, m):
            s = fma(-F[k, i], x[k], s)
        x[i] = s * F[i, i]


@njit(cache=True, error_model="numpy")
def joint_blocks(WJ, minv, D, E):
    """The blocks of G_J = W_J^T M^-1 W_J: D (nJ, r, r) and E (nJ, r, r),
    E[i] = G_J[i, i+1] (E[nJ-1] unused). WJ (nJ, 12, r) from joint_jacobian
    (and drive_rows), whose translational rows are +-identity in the three
    position columns (39)-(41) and zero in the others: they add the two links'
    inverse masses (D) and minus the shared link's (E) on that 3x3 diagonal;
    the rotational rows are summed as outer products. minv (n, 6): each link's
    diagonal of M^-1. D is symmetric: only its lower triangle is formed (every
    reader reads no more)."""
    nj = WJ.shape[0]
    nr = NR
    for i in range(nj):
        for a in range(nr):
            for c in range(nr):
                D[i, a, c] = 0.0
                E[i, a, c] = 0.0
        for a in range(3):
            D[i, a, a] = minv[i, a] + minv[i + 1, a]
            E[i, a, a] = -minv[i + 1, a]
        for j in range(3, 6):
            ma = minv[i, j]
            mb = minv[i + 1, j]
            for a in range(nr):
                wa = ma * WJ[i, j, a]
                wb = mb * WJ[i, 6 + j, a]
                for c in range(a + 1):
                    D[i, a, c] = fma(wa, WJ[i, j, c], fma(wb, WJ[i, 6 + j, c], D[i, a, c]))
        if i + 1 < nj:
            for j in range(3, 6):
                for a in range(nr):
                    w = minv[i + 1, j] * WJ[i, 6 + j, a]
                    for c in range(nr):
                        E[i, a, c] = fma(w, WJ[i + 1, j, c], E[i, a, c])


@njit(cache=True, error_model="numpy")
def eliminations(D, E, Ld, Ls, FL, DR, FR, F4, lo, hi):
    """The eliminations of G_J (module docstring). From link 1's end they come
    with the block Cholesky factor of G_J (Ld, Ls of joint_system: DL_i = Ld_i
    Ld_i^T, Ls_i = E_{i-1}^T Ld_{i-1}^-T), so only FL_i = Ls_i Ld_{i-1}^-1 is
    formed, for 1 <= i <= hi; from link n's end DR, FR, down to joint lo.
    A sweep over links lo..hi + 1 needs no more (bL behind its last link, bR
    ahead of its first); lo = 0, hi = nJ - 1 forms all. FL[0] and FR[nJ-1]
    are unused. O(n). All blocks (nJ, r, r); F4 (r, r) scratch. D and DR are
    symmetric: their lower triangles are read and formed."""
    nj = D.shape[0]
    if nj == 0:
        return
    nr = NR
    for i in range(1, min(hi, nj - 1) + 1):
        # FL_i Ld_{i-1} = Ls_i, row by row (back substitution on Ld^T)
        for r in range(nr):
            for c in range(nr - 1, -1, -1):
                s = Ls[i, r, c]
                for k in range(c + 1, nr):
                    s = fma(-FL[i, r, k], Ld[i - 1, k, c], s)
                FL[i, r, c] = s * Ld[i - 1, c, c]
    for a in range(nr):
        for c in range(a + 1):
            DR[nj - 1, a, c] = D[nj - 1, a, c]
    for i in range(nj - 2, max(lo, 0) - 1, -1):
        # FR_i DR_{i+1} = E_i, row by row
        chol_factor(DR[i + 1], nr, F4)
        for r in range(nr):
            for c in range(nr):
                FR[i, r, c] = E[i, r, c]
            chol_solve(F4, nr, FR[i, r])
        for a in range(nr):
            for c in range(a + 1):
                s = D[i, a, c]
                for k in range(nr):
                    s = fma(-FR[i, a, k], E[i, c, k], s)
                DR[i, a, c] = s


@njit(cache=True, error_model="numpy", inline="always")
def link_joints(l, nj):
    """The joints touching link l: (joint l-1 or -1, joint l or -1)."""
    jp = l - 1 if l >= 1 else _NO_JOINT
    jn = l if l < nj else _NO_JOINT
    return jp, jn


@njit(cache=True, error_model="numpy", inline="always")
def link_block(l, WJ, minv, Ld, Ls, DR, Y, K, C, t):
    """Link l's gains: Y (2r, 6) = F_l^-1 B_l M_l^-1 with F_l the Cholesky
    factor of Q_l, so that u_l = v_l - Y^T F_l^-1 [bL_{l-1}; bR_l]
    (:func:`link_velocity`), and K (6, 6) = M_l^-1 - Y^T Y, its block of the
    constrained inverse mass. B_l (2r, 6): the rows of W_J^T of joints l-1
    (rows 0..r-1) and l (rows r..2r-1) on link l, zero where the chain ends
    (that joint's rows of Y are zero); minv (6,): link l's diagonal of M^-1.
    Returns m (0, r or 2r), the rows of the joints that exist (r rows per
    joint, WJ (nJ, 12, r)). C (r, r) receives F_l's own block; t (>= 6)
    scratch (r <= 6).

    F_l is taken by blocks, [[Ld_{l-1}, 0], [Ls_l, C]] with
    C C^T = DR_l - Ls_l Ls_l^T, and used where it lies: B_l M_l^-1 is solved
    with it row by row, all six columns at once."""
    nj = WJ.shape[0]
    nr = NR
    jp, jn = link_joints(l, nj)
    m = 0
    # forward substitution: Y <- [[Ld, 0], [Ls, C]]^-1 B_l M_l^-1
    if jp >= 0:
        m = nr
        for a in range(nr):
            for j in range(6):
                t[j] = WJ[jp, 6 + j, a] * minv[j]
            for k in range(a):
                f = Ld[jp, a, k]
                for j in range(6):
                    t[j] = fma(-f, Y[k, j], t[j])
            d = Ld[jp, a, a]
            for j in range(6):
                Y[a, j] = t[j] * d
    else:
        for a in range(nr):
            for j in range(6):
                Y[a, j] = 0.0
    if jn >= 0:
        m += nr
        for a in range(nr):
            for c in range(a + 1):
                s = DR[jn, a, c]
                if jp >= 0:
                    for k in range(nr):
                        s = fma(-Ls[jn, a, k], Ls[jn, c, k], s)
                C[a, c] = s
        chol_factor(C, nr, C)  # in place: A's column j is read before F's is written
        for a in range(nr):
            for j in range(6):
                t[j] = WJ[jn, j, a] * minv[j]
            if jp >= 0:
                for k in range(nr):
                    f = Ls[jn, a, k]
                    for j in range(6):
                        t[j] = fma(-f, Y[k, j], t[j])
            for k in range(a):
                f = C[a, k]
                for j in range(6):
                    t[j] = fma(-f, Y[nr + k, j], t[j])
            d = C[a, a]
            for j in range(6):
                Y[nr + a, j] = t[j] * d
    else:
        for a in range(nr):
            for j in range(6):
                Y[nr + a, j] = 0.0
    for a in range(6):
        for c in range(a + 1):
            s = 0.0
            for i in range(2 * nr):
                s = fma(Y[i, a], Y[i, c], s)
            K[a, c] = -s
            K[c, a] = -s
        K[a, a] += minv[a]
    return m


@njit(cache=True, error_model="numpy", inline="always")
def propagate_left(i, b, FL, bL):
    """bL_i from b_i and bL_{i-1}."""
    nr = NR
    for a in range(nr):
        s = b[i, a]
        if i > 0:
            for k in range(nr):
                s = fma(-FL[i, a, k], bL[i - 1, k], s)
        bL[i, a] = s


@njit(cache=True, error_model="numpy", inline="always")
def all_right(b, FR, bR, lo, hi):
    """bR for the joints from joint hi down to joint lo, O(n): bR beyond hi
    must be current (hi = nJ - 1 forms all)."""
    nj = b.shape[0]
    nr = NR
    for i in range(min(hi, nj - 1), max(lo, 0) - 1, -1):
        for a in range(nr):
            s = b[i, a]
            if i < nj - 1:
                for k in range(nr):
                    s = fma(-FR[i, a, k], bR[i + 1, k], s)
            bR[i, a] = s


@njit(cache=True, error_model="numpy", inline="always")
def link_velocity(l, v, nj, bL, bR, Ld, Ls, C, Y, z, out):
    """u_l (6,) = v_l - Y^T F_l^-1 [bL_{l-1}; bR_l]: link l's velocity with
    the joint impulses solved directly (bL, bR current at the joints touching
    link l; C, Y of :func:`link_block`; z (>= 2r,) scratch)."""
    nr = NR
    jp, jn = link_joints(l, nj)
    for a in range(nr):  # z = F_l^-1 [bL; bR], by blocks
        s = 0.0
        if jp >= 0:
            s = bL[jp, a]
            for k in range(a):
                s = fma(-Ld[jp, a, k], z[k], s)
            s *= Ld[jp, a, a]
        z[a] = s
    for a in range(nr):
        s = 0.0
        if jn >= 0:
            s = bR[jn, a]
            if jp >= 0:
                for k in range(nr):
                    s = fma(-Ls[jn, a, k], z[k], s)
            for k in range(a):
                s = fma(-C[a, k], z[nr + k], s)
            s *= C[a, a]
        z[nr + a] = s
    for j in range(6):
        s = v[6 * l + j]
        for i in range(2 * nr):
            s = fma(-Y[i, j], z[i], s)
        out[j] = s


@njit(cache=True, error_model="numpy", inline="always")
def joint_rhs_change(l, WJ, minv, df, b, dbp, dbn):
    """Add to b = W_J^T v the change of an impulse df (6,) on link l (v_l changes
    by M_l^-1 df, minv (6,) link l's diagonal of M^-1); dbp, dbn (r,) receive the
    changes at joints l-1 and l."""
    nj = WJ.shape[0]
    nr = NR
    jp, jn = link_joints(l, nj)
    for a in range(nr):
        sp = 0.0
        sn = 0.0
        for j in range(3, 6):
            w = minv[j] * df[j]
            if jp >= 0:
                sp = fma(WJ[jp, 6 + j, a], w, sp)
            if jn >= 0:
                sn = fma(WJ[jn, j, a], w, sn)
        if a < 3:  # the translational rows: +-identity (joint_blocks)
            w = minv[a] * df[a]
            if jp >= 0:
                sp -= w
            if jn >= 0:
                sn += w
        dbp[a] = sp
        dbn[a] = sn
        if jp >= 0:
            b[jp, a] += sp
        if jn >= 0:
            b[jn, a] += sn


@njit(cache=True, error_model="numpy")
def joint_rhs(WJ, v, bo, b):
    """b = W_J^T v + bo, (nJ, r): bo the drive rows' offset (zero on the
    joints' constraint rows). The links' translations enter only the three
    translational rows, as +-identity (:func:`joint_blocks`): added as such."""
    nr = NR
    for i in range(WJ.shape[0]):
        for a in range(nr):
            s = bo[i, a]
            for j in range(3, 6):
                s = fma(WJ[i, j, a], v[6 * i + j], fma(WJ[i, 6 + j, a], v[6 * i + 6 + j], s))
            b[i, a] = s
        for a in range(3):
            b[i, a] += v[6 * i + a] - v[6 * i + 6 + a]


@njit(cache=True, error_model="numpy")
def sub_joint_velocity(WJ, minv, P_J, v):
    """v <- v - M^-1 W_J P_J: the velocity change of joint impulses P_J (nJ, r)
    taken with the opposite sign (v (6n,); minv (n, 6) the links' diagonals of
    M^-1). The translational rows of W_J are +-identity (:func:`joint_blocks`):
    a link's translation takes only its joints' first three impulses."""
    nr = NR
    for i in range(WJ.shape[0]):
        for j in range(3, 6):
            sa = 0.0
            sb = 0.0
            for k in range(nr):
                sa = fma(WJ[i, j, k], P_J[i, k], sa)
                sb = fma(WJ[i, 6 + j, k], P_J[i, k], sb)
            v[6 * i + j] -= minv[i, j] * sa
            v[6 * i + 6 + j] -= minv[i + 1, j] * sb
        for j in range(3):
            v[6 * i + j] -= minv[i, j] * P_J[i, j]
            v[6 * i + 6 + j] += minv[i + 1, j] * P_J[i, j]
