"""Model and solver parameters as frozen dataclasses.

Defaults are Aiko's (Transeth et al. 2008, section VIII-A). SI units throughout;
any other unit is named in the field (``_deg``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .errors import ParameterError

__all__ = ["SnakeParams", "SolverParams", "SOLVERS", "CONTACT_LAWS", "DRIVES"]

SOLVERS = ("newton", "jor", "sor")

DEFAULT_ALPHA = {"newton": 1.0, "jor": 0.2, "sor": 1.0}
"""Relaxation per solver (unused by newton, which has fixed r_N, r_T, r_V). SOR
converges in 5-20 sweeps on the presets with 1.0; JOR needs a small value to be
stable with up to 22 coupled contacts (0.4 and above oscillate on lateral
undulation) and is slow on a resting snake whatever its value."""


@dataclass(frozen=True)
class SnakeParams:
    """Physical parameters of an n-link snake (all links equal).

    Attributes follow the paper's symbols: ``L`` link length (joint to joint),
    ``L_SC`` sphere/link radius, ``L_GS`` centre of gravity to sphere centre,
    ``m`` link mass, ``Theta1``/``Theta3`` moments of inertia about the body x/y and
    z axes (48), PD gains of (68)-(69), friction coefficients of (58) and (60).

    ``mu_V`` (rolling friction, (60)) is not given in the paper. The default
    0.001 is a small rolling resistance that damps free rolling of the links. The
    presets' motion barely depends on it (link-6 travel over 3 s changes by a few
    millimetres between 0, 0.001 and 0.01), while the contact solver needs about
    4x (0.001) to 12x (0.01) more sweeps on lateral undulation than with 0: the
    rolling columns of a link's two spheres are identical, which makes the
    impulses non-unique (see the README's notes on the numerics).

    ``e_N`` is a Newton restitution coefficient on the normal contact velocity
    (Gehring et al. eq. 5); 0 is the paper's completely inelastic impact.
    Above 0 only on the rigid contact (``k_N=math.inf``).

    ``contact`` chooses the contact law (:data:`CONTACT_LAWS`): the paper's hard
    contact, or the compliant law with its gains ``k_pc`` (1/s^2) and ``k_vc``
    (1/s), Rengifo et al.'s 500 and 250 by default.

    ``k_N`` (N/m), ``d_N`` (N s/m) and ``v_N`` (m/s) give the hard law's
    contacts a stiff normal spring and damper: a closed contact's normal
    impulse over a step is P_N = dt (k_N (-g_E) + d_N (-gamma_N^E)), g_E the
    gap at the step's end and gamma_N^E the normal velocity, the spring's part
    no more than it takes to push the contact apart at v_N, and P_N >= 0;
    solved with the friction and the joints like the paper's (77), which is
    the limit k_N -> inf (``k_N=math.inf``: the paper's rigid law; d_N and
    v_N unused). Why: a snake lying on the ground is statically
    indeterminate (22 normal impulses, 12 independent), so the rigid law
    leaves the split of its weight between the spheres to the solver's
    iteration, and on anisotropic friction that split sets the speed. Equal
    springs pick one split (the least-norm one, in the stiff limit) that no
    tolerance, time step or sweep order changes. The defaults sink a sphere
    carrying half a link's weight 3.3 um; the damper (10 ms against the
    spring, heavily overdamped for any of the snake's masses) keeps an impact
    from bouncing back off the spring, and v_N caps how fast the spring
    pushes out what an impact pressed in (a step's late detection presses a
    sphere in by up to v dt), above the F / d_N = 7.5 mm/s at which it carries
    the whole snake's weight at rest. Not used by the compliant law.

    ``slope_deg`` inclines the ground about the y axis, rising toward +x. The
    coordinates stay ground-fixed, so gravity gains ``-g sin(slope)`` along x.
    """

    n: int = 11
    L: float = 0.122
    L_SC: float = 0.0525
    L_GS: float = 0.0393
    m: float = 7.5 / 11
    Theta1: float = 9.63e-4
    Theta3: float = 2.35e-4
    g: float = 9.81
    K_hp: float = 40.0
    K_hd: float = 0.2
    K_vp: float = 800.0
    K_vd: float = 0.2
    mu_x: float = 0.2
    mu_y: float = 0.2
    mu_V: float = 0.001
    e_N: float = 0.0
    slope_deg: float = 0.0
    contact: str = "hard"
    k_pc: float = 500.0
    k_vc: float = 250.0
    k_N: float = 1.0e6
    d_N: float = 1.0e4
    v_N: float = 1.0e-2

    def __post_init__(self) -> None:
        if self.contact not in CONTACT_LAWS:
            raise ParameterError("contact", self.contact,
                                 f"must be one of {', '.join(CONTACT_LAWS)}")
        for name in ("k_pc", "k_vc"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ParameterError(name, value, "must be a positive finite number")
        if not self.k_N > 0:  # NaN fails too
            raise ParameterError("k_N", self.k_N, "must be positive (math.inf: rigid)")
        if not (math.isfinite(self.d_N) and self.d_N >= 0):
            raise ParameterError("d_N", self.d_N, "must be a non-negative finite number")
        if not self.v_N > 0:
            raise ParameterError("v_N", self.v_N, "must be positive (math.inf: no limit)")
        if not isinstance(self.n, int) or self.n < 1:
            raise ParameterError("n", self.n, "the number of links must be an integer >= 1")
        for name in ("L", "L_SC", "m", "Theta1", "Theta3"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ParameterError(name, value, "must be a positive finite number")
        for name in ("L_GS", "g", "K_hp", "K_hd", "K_vp", "K_vd", "mu_x", "mu_y", "mu_V"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ParameterError(name, value, "must be a non-negative finite number")
        if not (0.0 <= self.e_N <= 1.0):
            raise ParameterError("e_N", self.e_N, "the restitution coefficient must lie in [0, 1]")
        if self.e_N > 0 and self.k_N < math.inf and self.contact == "hard":
            raise ParameterError("e_N", self.e_N, "restitution is a law of the rigid contact: "
                                 "set k_N=math.inf (the springs' damper says how they bounce)")
        if not (math.isfinite(self.slope_deg) and abs(self.slope_deg) < 90.0):
            raise ParameterError("slope_deg", self.slope_deg, "the slope must lie in (-90, 90) degrees")

    @property
    def slope(self) -> float:
        """Ground inclination in rad."""
        return math.radians(self.slope_deg)

    @property
    def gravity(self) -> tuple[float, float, float]:
        """Gravity vector in the ground-fixed frame, m/s^2."""
        s = self.slope
        return (-self.g * math.sin(s), 0.0, -self.g * math.cos(s))

    def with_(self, **changes) -> SnakeParams:
        """A copy with some fields changed."""
        return replace(self, **changes)


CONTACT_LAWS = ("hard", "compliant")
"""``hard``: the paper's set-valued laws (47)-(48), (52)-(60), solved by prox
iterations, the normal impulse from a stiff spring and damper per contact
(``SnakeParams.k_N``, ``d_N``, ``v_N``; ``k_N=math.inf`` is the paper's rigid
R+). ``compliant``: Rengifo et al.'s desired-acceleration law (seeds/001,
(17)-(20)): every sphere at or below the ground gets the contact impulse that
would give its contact point the acceleration
-k_pc [0, 0, g_N] - k_vc [v_x, v_y, min(0, v_z)] (the constrained Delassus
system solved in the least-squares, least-norm sense, (18)), then saturated:
P_N >= 0 (19) and the friction impulse projected onto the anisotropic
friction ellipse (our (58), where (20) splits a circle by angle). k_pc (1/s^2)
and k_vc (1/s) do not depend on masses or inertias; no rolling resistance."""


DRIVES = ("implicit", "explicit")
"""How the PD joint drives (68)-(69) enter the time step. ``explicit``: the
paper's, the torques at the midpoint's angles and the step's starting rates in
the free velocity; stable only below about 1 ms with Aiko's K_vp.
``implicit``: each drive's torque at the step's end angle and rate, solved with
the joint's constraints as a compliant bilateral constraint (two more rows per
joint in the O(n) direct solve, see ``aiko.model._kernels.drive_rows``);
unconditionally stable in the drive, for any gains and step."""


@dataclass(frozen=True)
class SolverParams:
    """Time-stepping and contact-solver settings.

    ``solver``:
      * ``"newton"``: the paper's modified Newton iteration (84)-(93): direct
        bilateral impulses, then a Jacobi prox step on every contact with the fixed
        ``r_N``, ``r_T``, ``r_V``; stops when the change of all impulses (93) is
        below ``eps``.
      * ``"jor"`` / ``"sor"``: Gehring et al.'s projected Jacobi / Gauss-Seidel
        iterations with ``r = alpha / G_ll`` per contact, direct bilateral
        impulses (their eq. 20) and the per-component tolerance
        ``|dP| <= |P| T_rel + T_abs``. G is the Delassus matrix with the joints
        solved out, W_U^T A W_U. SOR projects a contact's normal, friction and
        rolling impulses one after the other, the velocities following each;
        it visits the contacts along the chain, and passes over one link's
        contacts up to ``link_passes`` times (until no velocity changes by more
        than ``u_tol``) before it moves on: a block Gauss-Seidel iteration whose
        blocks are the links. 1 gives plain SOR.

    Every solver also stops when every prox equation (61) holds to ``u_tol`` in
    velocity units, ``|P - prox(P - r gamma)| / r <= u_tol`` (m/s): a sinking
    speed, slip speed or misalignment of the sliding direction below u_tol. The
    contact impulses are not unique (the problem is rank deficient), so this
    velocity-level test is the one that ends most steps. 1 um/s by
    default. On the paper's rigid contact (``SnakeParams(k_N=math.inf)``)
    where the solver stops picks among the impulses, and on flat ground that
    matters: the chain lying on the ground is statically indeterminate (its
    normal impulses' Delassus matrix has rank 12 of 22), and solved to 1e-8
    or tighter the solver carries about 90 % of the weight on the links'
    front spheres, against about half at 1e-6; with anisotropic friction that
    split set the orthotropic preset's speed by 3 %. The default contact
    springs make the impulses unique: the presets' paths then agree to 0.1
    mm between u_tol 1e-6 and 1e-10 (benchmarks/timestep_study.py, README).

    ``active_tol`` (m) is the gap below which a contact is taken as closed (49).
    A literal ``g_N <= 0`` lets resting contacts drop out on round-off (gaps of
    +-1e-17), and so does any tolerance below the lift that the solver's own
    velocity tolerance allows in a step (u_tol dt, 1e-9 m at 1 ms): a contact
    dropping out for one step lets its sphere fall. A closed contact only acts
    against approach (velocity-level law), so 10 nm costs nothing.

    ``warm_start``: each contact's iteration starts from the impulses it had
    when last closed (the paper); with ``extrapolate`` (default; SOR and JOR,
    see :attr:`extrapolates`) a ground contact closed in the two last steps
    starts from their extrapolation,
    P + 0.9 dP (:attr:`SnakeState.dP`; for each of its normal, friction and
    rolling parts whose change the solver tells from converged,
    |dP| / r > u_tol). The contact forces of a gait change smoothly, so the
    start is then often within ``u_tol`` of the answer: lateral undulation
    needs about 1.6 sweeps a step instead of 2.4 (the gain below 1 lets the
    solver's own drift among equivalent impulses die out, so a resting snake
    comes to rest as with the plain warm start).

    ``drive`` (:data:`DRIVES`): the PD drives (68)-(69) explicit, as the paper,
    or implicit (default): each drive's torque taken at
    ``alpha_A + drive_weight (alpha_E - alpha_A)`` and the same weighting of
    its rates, solved with the joints. A weight of 1 takes the end of the step
    (damps the drive's fastest modes most), 0.5 the trapezoidal rule (no
    numerical damping, but stiff modes ring); 0.6 between them. ``dt`` 1 ms,
    the largest step at which link 6's path stays within 1 % of its travel
    (or 1 cm) of the paper's step (explicit drives at 0.25 ms, solved to
    1e-10) on every paper preset over 15 s, at the default tolerance
    (measured 0.18, 0.12 and 0.94 cm; 2 ms: 1.53 cm on sidewinding;
    benchmarks/timestep_study.py, README); the paper's 0.25 ms with explicit
    drives is ``SolverParams(dt=0.00025, drive="explicit")``.
    """

    dt: float = 0.001
    solver: str = "sor"
    alpha: float | None = None
    r_N: float = 0.1
    r_T: float = 0.01
    r_V: float = 0.05
    eps: float = 1e-10
    T_rel: float = 1e-6
    T_abs: float = 1e-10
    u_tol: float = 1e-6
    max_iter: int = 500
    active_tol: float = 1e-8
    projection: str = "link1"
    warm_start: bool = field(default=True)
    extrapolate: bool = True
    link_passes: int = 3
    drive: str = "implicit"
    drive_weight: float = 0.6

    def __post_init__(self) -> None:
        if self.solver not in SOLVERS:
            raise ParameterError("solver", self.solver, f"must be one of {', '.join(SOLVERS)}")
        if not (math.isfinite(self.dt) and self.dt > 0):
            raise ParameterError("dt", self.dt, "the time step must be positive")
        if self.alpha is not None and not (0.0 < self.alpha < 2.0):
            raise ParameterError("alpha", self.alpha, "the relaxation must lie in (0, 2)")
        for name in ("r_N", "r_T", "r_V"):
            if not getattr(self, name) > 0:
                raise ParameterError(name, getattr(self, name), "must be positive")
        for name in ("eps", "T_rel", "T_abs", "u_tol", "active_tol"):
            if not getattr(self, name) >= 0:
                raise ParameterError(name, getattr(self, name), "must be non-negative")
        if not (isinstance(self.max_iter, int) and self.max_iter >= 1):
            raise ParameterError("max_iter", self.max_iter, "must be an integer >= 1")
        if not (isinstance(self.link_passes, int) and self.link_passes >= 1):
            raise ParameterError("link_passes", self.link_passes, "must be an integer >= 1")
        if self.drive not in DRIVES:
            raise ParameterError("drive", self.drive, f"must be one of {', '.join(DRIVES)}")
        if not (0.5 <= self.drive_weight <= 1.0):
            raise ParameterError("drive_weight", self.drive_weight,
                                 "the implicit drive's weight must lie in [0.5, 1]")
        if self.projection not in ("link1", "com"):
            raise ParameterError("projection", self.projection, "must be 'link1' or 'com'")

    @property
    def extrapolates(self) -> bool:
        """Whether warm starts are extrapolated: ``extrapolate`` with
        ``warm_start``, for SOR and JOR (the paper's Newton iteration keeps the
        paper's warm start: with the extrapolation its fixed r and impulse
        criterion (93) stop at points that drift apart from the other solvers'
        by 1 cm over 2 s of sidewinding, 0.4 cm without)."""
        return self.warm_start and self.extrapolate and self.solver != "newton"

    @property
    def relaxation(self) -> float:
        """alpha of r = alpha / G_ll: as given, else the solver's default
        (:data:`DEFAULT_ALPHA`, chosen by measurement on the presets)."""
        return DEFAULT_ALPHA[self.solver] if self.alpha is None else self.alpha

    def with_(self, **changes) -> SolverParams:
        """A copy with some fields changed."""
        return replace(self, **changes)
