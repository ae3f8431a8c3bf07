"""The model's public API: states, one model, advancing it in time.

Pure: parameters and a state in, a new state out; no I/O but :meth:`SnakeState.save`
/ :meth:`SnakeState.load` on a path the caller gives.

Typical uses::

    model = SnakeModel(SnakeParams(mu_x=0.1, mu_y=0.5), SolverParams(solver="sor"))
    state = model.initial_state(alpha_h=a0, alpha_v=b0)         # or straight
    # a streamer's references arrive every 100 ms: hold them until the next ones
    state, stats = model.advance(state, t_end=state.t + 0.1, refs=refs)
    # per-step references (a continuously evaluated gait)
    state, stats = model.run_steps(state, refs_per_step)

``refs`` are joint references (n-1, 4): ``[alpha_h_r, alpha_v_r, alphadot_h_r,
alphadot_v_r]`` per joint (rad, rad/s) as used by the PD laws (68)-(69).
States are small (a few hundred floats): copy, pickle or save them freely, e.g.
to run sweeps in worker processes.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from . import _kernels as K
from .errors import AikoError, JointReferenceError, ParameterError, StateError
from .params import SnakeParams, SolverParams
from .posture import posture_from_joint_angles, straight_posture
from .scene import Scene

__all__ = ["SnakeState", "StepStats", "SnakeModel", "ConvergenceWarning", "kernels_cached",
           "warm_up"]


class ConvergenceWarning(UserWarning):
    """Some time steps hit the contact solver's iteration cap."""


@dataclass
class SnakeState:
    """Everything that evolves: time, coordinates, velocities, warm-start impulses.

    t: time (s); q (n, 7) coordinates (4); u (n, 6) velocities (5);
    P (2n + m, 5) contact impulsions of the last step (the first 2n rows the
    spheres on the ground, as g_N in (10), columns [P_N, P_Tx, P_Ty, P_Vx,
    P_Vy], N s; then the m obstacle contacts of the model's scene, see
    :meth:`SnakeModel.obstacle_slots`, columns [P_N, P_T, P_S, 0, 0]);
    active (2n + m,) the closed contacts of the last step (49). P rows of open
    contacts keep their last value (warm start); :attr:`contact_impulses`
    shows them as zero. A state with only the 2n ground rows is taken by a
    model with a scene as one without obstacle contacts. dP (2n, 5): each
    ground contact's change of impulses over the last step where it was
    closed in that step and the one before, else zero; the next step starts
    from their extrapolation (``SolverParams.extrapolate``). None: zero.
    """

    t: float
    q: np.ndarray
    u: np.ndarray
    P: np.ndarray
    active: np.ndarray
    dP: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.dP is None:
            n = np.shape(self.q)[0] if np.ndim(self.q) else 0
            self.dP = np.zeros((2 * n, 5))

    @property
    def n(self) -> int:
        return self.q.shape[0]

    def copy(self) -> SnakeState:
        assert self.dP is not None  # set in __post_init__
        return SnakeState(self.t, self.q.copy(), self.u.copy(), self.P.copy(),
                          self.active.copy(), self.dP.copy())

    @property
    def positions(self) -> np.ndarray:
        """Centres of gravity r_Gi of all links (n, 3), m."""
        return self.q[:, :3].copy()

    @property
    def contact_impulses(self) -> np.ndarray:
        """Contact impulsions of the last step (2n + m, 5), zero on open contacts."""
        return np.where(self.active[:, None], self.P, 0.0)

    def save(self, path: str | Path) -> None:
        """Write the state to an .npz file (no pickles)."""
        assert self.dP is not None  # set in __post_init__
        np.savez(path, t=np.array(self.t), q=self.q, u=self.u, P=self.P, active=self.active,
                 dP=self.dP)

    @classmethod
    def load(cls, path: str | Path) -> SnakeState:
        """Read a state written by :meth:`save`; checks shapes and values."""
        try:
            with np.load(path, allow_pickle=False) as f:
                # states saved before dP existed start without extrapolation
                dP = f["dP"].astype(float) if "dP" in f.files else None
                state = cls(float(f["t"]), f["q"].astype(float), f["u"].astype(float),
                            f["P"].astype(float), f["active"].astype(bool), dP)
        except (OSError, KeyError, ValueError) as exc:
            raise StateError(str(path), f"not a saved model state ({exc})") from exc
        state.validate(slots=max(0, state.P.shape[0] - 2 * state.q.shape[0]))
        return state

    def validate(self, n: int | None = None, slots: int = 0, values: bool = True) -> None:
        """Raise StateError unless shapes fit n links and ``slots`` obstacle
        contact slots (P, active), t is finite and (``values``) so is every
        entry of the arrays."""
        n = self.q.shape[0] if n is None else n
        rows = 2 * n + slots
        shapes = {"q": (n, 7), "u": (n, 6), "P": (rows, 5), "active": (rows,),
                  "dP": (2 * n, 5)}
        for name, shape in shapes.items():
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.shape != shape:
                got = getattr(arr, "shape", type(arr).__name__)
                raise StateError(name, f"expected shape {shape}, got {got}")
        if not math.isfinite(self.t):
            raise StateError("t", "is not finite")
        for name in ("q", "u", "P", "dP") if values else ():
            if not np.isfinite(getattr(self, name)).all():
                raise StateError(name, "contains non-finite values")


@dataclass
class StepStats:
    """Counters of a run of steps: steps, solver iterations (sum, max), the
    steps that hit the iteration cap unconverged, and the joint drives' positive
    mechanical work, J (the sum over steps and motors of the power each motor's
    torque pair (68)-(69) delivers to its two links, where positive, times dt:
    the modules' motors do not recover the energy of braking)."""

    steps: int = 0
    iterations: int = 0
    max_iterations: int = 0
    unconverged: int = 0
    work: float = 0.0

    @property
    def mean_iterations(self) -> float:
        return self.iterations / self.steps if self.steps else 0.0

    def __iadd__(self, other: StepStats) -> StepStats:
        self.steps += other.steps
        self.iterations += other.iterations
        self.max_iterations = max(self.max_iterations, other.max_iterations)
        self.unconverged += other.unconverged
        self.work += other.work
        return self


@dataclass(frozen=True)
class SnakeModel:
    """The non-smooth snake model of Transeth et al. with its time-stepping.

    Holds frozen parameters only; every method takes a state and returns a new one.
    ``scene`` (:class:`aiko.model.scene.Scene`): pegs and steps on the floor;
    empty, the paper's flat floor. Obstacles need the hard contact law.
    """

    params: SnakeParams = field(default_factory=SnakeParams)
    solver: SolverParams = field(default_factory=SolverParams)
    scene: Scene = field(default_factory=Scene)

    def __post_init__(self) -> None:
        if not isinstance(self.scene, Scene):
            raise ParameterError("scene", self.scene, "must be an aiko.model.scene.Scene")
        if not self.scene.empty and self.params.contact != "hard":
            raise ParameterError("contact", self.params.contact,
                                 "obstacles (pegs, steps) need the hard contact law")

    @property
    def obstacle_mu(self) -> float:
        """Friction of obstacles without their own mu: the ground's when
        isotropic, else the smaller of mu_x and mu_y."""
        return min(self.params.mu_x, self.params.mu_y)

    @cached_property
    def _pegs(self) -> np.ndarray:
        """The scene's pegs for the kernels (:meth:`Scene.peg_array`); do not
        modify."""
        return self.scene.peg_array(self.obstacle_mu)

    @cached_property
    def _steps(self) -> np.ndarray:
        """The scene's steps for the kernels (:meth:`Scene.step_array`); do
        not modify."""
        return self.scene.step_array(self.obstacle_mu)

    @property
    def obstacle_slots(self) -> int:
        """m: the obstacle contact slots after the 2n ground rows of P: link l
        (0-based) against peg k (pegs sorted by x) is row 2n + l np + k; sphere c
        (as g_N's rows) against step k (sorted by x0) is row 2n + n np + c ns + k."""
        return self.n * len(self.scene.pegs) + 2 * self.n * len(self.scene.steps)

    # packed parameter vectors for the kernels (do not modify)
    @cached_property
    def _par(self) -> np.ndarray:
        p = self.params
        gx, gy, gz = p.gravity
        return np.array([p.L, p.L_SC, p.L_GS, p.m, p.Theta1, p.Theta3, gx, gy, gz,
                         p.K_hp, p.K_hd, p.K_vp, p.K_vd, p.mu_x, p.mu_y, p.mu_V, p.e_N,
                         K.CONTACT_CODES[p.contact], p.k_pc, p.k_vc, p.k_N, p.d_N, p.v_N])

    @cached_property
    def _sol(self) -> np.ndarray:
        s = self.solver
        return np.array([s.dt, K.SOLVER_CODES[s.solver], s.relaxation, s.r_N, s.r_T, s.r_V,
                         s.eps, s.T_rel, s.T_abs, s.u_tol, s.max_iter, s.active_tol,
                         K.PROJECTION_CODES[s.projection], 1.0 if s.warm_start else 0.0,
                         s.link_passes, K.DRIVE_CODES[s.drive], s.drive_weight,
                         1.0 if s.extrapolates else 0.0])

    @property
    def n(self) -> int:
        return self.params.n

    @property
    def dt(self) -> float:
        return self.solver.dt

    # ------------------------------------------------------------------ states
    def state_from_q(self, q, t: float = 0.0, u=None) -> SnakeState:
        """A state at the given coordinates (n, 7), velocities u (default zero)."""
        n = self.n
        q = np.array(q, dtype=float)
        u = np.zeros((n, 6)) if u is None else np.array(u, dtype=float)
        rows = 2 * n + self.obstacle_slots
        state = SnakeState(float(t), q, u, np.zeros((rows, 5)), np.zeros(rows, dtype=bool))
        state.validate(n, self.obstacle_slots)
        return state

    def initial_state(self, alpha_h=None, alpha_v=None, height: float = 0.0) -> SnakeState:
        """Start posture at rest: straight along x with link 1 at +x, or curved
        with the given joint angles (rad, (n-1,) each); the lowest sphere points
        ``height`` (m) above the ground."""
        if alpha_h is None and alpha_v is None:
            q = straight_posture(self.params, height)
        else:
            zeros = np.zeros(self.n - 1)
            q = posture_from_joint_angles(
                self.params, zeros if alpha_h is None else alpha_h,
                zeros if alpha_v is None else alpha_v, height)
        return self.state_from_q(q)

    # ---------------------------------------------------------------- stepping
    def _refs(self, refs, rows: int | None) -> np.ndarray:
        nj = max(self.n - 1, 0)
        if refs is None:
            return np.zeros((1, nj, 4))
        r = np.ascontiguousarray(refs, dtype=float)
        if r.ndim == 2:
            r = r[None]
        if r.ndim != 3 or r.shape[1:] != (nj, 4):
            raise JointReferenceError(f"expected shape ({nj}, 4) or (steps, {nj}, 4), "
                                      f"got {np.shape(refs)}")
        if rows is not None and r.shape[0] not in (1, rows):
            raise JointReferenceError(f"{r.shape[0]} rows of references for {rows} steps")
        return r  # their values are checked by the kernel (_run)

    def kernel_inputs(self, state: SnakeState
                      ) -> tuple[SnakeState, tuple[np.ndarray, ...]]:
        """What the compiled step takes, for compiled code that steps this
        model itself (the simulated Aiko's compiled loop): a checked copy of
        ``state`` with this model's contact rows, and the arrays (par, sol,
        pegs, steps, no_refs) (do not modify them; no_refs (1, n-1, 4): the
        references of steps that take theirs through the play). The step is
        ``aiko.model._kernels._advance``; its codes below zero are the
        errors :meth:`kernel_error` gives."""
        return (self._with_slots(state),
                (self._par, self._sol, self._pegs, self._steps, self._no_refs))

    def _with_slots(self, state: SnakeState) -> SnakeState:
        """A copy of the state with this model's contact rows (a state of
        the flat floor gets empty obstacle rows), its shapes and t validated
        (the kernel checks the arrays' values: numpy's checks of them cost
        about 1 % of a 200-step call)."""
        new = state.copy()
        m = self.obstacle_slots
        if m and getattr(state.P, "shape", None) == (2 * self.n, 5) \
                and getattr(state.active, "shape", None) == (2 * self.n,):
            new.P = np.vstack([new.P, np.zeros((m, 5))])
            new.active = np.concatenate([new.active, np.zeros(m, dtype=bool)])
        new.validate(self.n, m, values=False)
        return new

    def _run(self, state: SnakeState, n_steps: int, refs: np.ndarray,
             motors: np.ndarray | None = None, play: np.ndarray | None = None,
             warn: bool = True) -> tuple[SnakeState, StepStats]:
        new = self._with_slots(state)
        stats = np.zeros(3, dtype=np.int64)
        work = np.zeros(n_steps)
        if motors is None or play is None:
            motors, play = self._no_motors, self._no_play
        done = K._advance(new.q, new.u, new.P, new.active, new.dP, refs, motors, play,
                          self._par, self._sol, self._pegs, self._steps, n_steps, stats, work)
        if done == K.BAD_STATE:
            new.validate(self.n, self.obstacle_slots)  # names the array
        if done in (K.BAD_STATE, K.BAD_REFS):
            raise self.kernel_error(done, state.t)
        new.t = state.t + n_steps * self.dt
        st = StepStats(n_steps, int(stats[0]), int(stats[1]), int(stats[2]), float(work.sum()))
        if st.unconverged and warn:
            warnings.warn(f"{st.unconverged} of {n_steps} steps reached the iteration cap "
                          f"({self.solver.max_iter}) of the {self.solver.solver} solver",
                          ConvergenceWarning, stacklevel=3)
        if done == K.DIVERGED:
            raise self.kernel_error(done, new.t)
        return new, st

    def kernel_error(self, code: int, t: float) -> AikoError:
        """The error of the compiled step's code below zero (``K.BAD_STATE``,
        ``K.BAD_REFS``, ``K.DIVERGED``); t (s): the time the steps reached."""
        if code == K.BAD_REFS:
            return JointReferenceError("non-finite values")
        if code == K.BAD_STATE:
            return StateError("state", "contains non-finite values")
        why = ("the PD torques are explicit, and their stiff vertical gain needs a small "
               "step" if self.solver.drive == "explicit" else "try a smaller step")
        return StateError("state", f"the simulation diverged before t = {t:.6g} s "
                                   f"(dt = {self.dt:g} s; {why})")

    def step(self, state: SnakeState, refs=None) -> tuple[SnakeState, StepStats]:
        """One time step (72)-(83) with references (n-1, 4) (zero if None)."""
        return self._run(state, 1, self._refs(refs, 1))

    def steps_until(self, state: SnakeState, t_end: float) -> int:
        """Number of steps from state.t to the step nearest t_end (>= 0)."""
        return max(0, int(round((t_end - state.t) / self.dt)))

    def advance(self, state: SnakeState, t_end: float, refs=None) -> tuple[SnakeState, StepStats]:
        """Advance to the time step nearest ``t_end`` holding the references
        ``refs`` (n-1, 4), as between two 10 Hz reference frames."""
        return self._run(state, self.steps_until(state, t_end), self._refs(refs, None)[:1])

    def run_steps(self, state: SnakeState, refs_per_step, warn: bool = True
                  ) -> tuple[SnakeState, StepStats]:
        """Take one step per row of ``refs_per_step`` (steps, n-1, 4). Steps at
        the solver's iteration cap give a ConvergenceWarning unless ``warn``
        is False (a caller that counts them in the returned statistics: no
        ``warnings.catch_warnings``, whose filters are not safe to change
        from two threads at once)."""
        r = self._refs(refs_per_step, None)
        return self._run(state, r.shape[0], r, warn=warn)

    def run_steps_through_play(self, state: SnakeState, motors, half, driven,
                               warn: bool = True) -> tuple[SnakeState, StepStats]:
        """Take one step per row of ``motors`` (steps, n-1, 4) ``[theta_h,
        theta_v, speed_h, speed_v]``: motor angles (rad) and speeds (rad/s)
        behind free play of ``half`` (n-1, 2) rad either side. At each step's
        start the PD law (68)-(69) pulls a link that is outside the play to
        its edge at the motor's speed, and exerts nothing on a link inside
        it or behind a motor that ``driven`` (n-1, 2) says is not driven
        (the paper's error sources VIII-F 1 and 2). The play is taken up or
        left at every step, whatever the number of steps a call takes.
        ``warn``: as :meth:`run_steps`."""
        nj = max(self.n - 1, 0)
        m = np.ascontiguousarray(motors, dtype=float)
        if m.ndim != 3 or m.shape[1:] != (nj, 4) or m.shape[0] < 1:
            raise JointReferenceError(f"expected motors of shape (steps, {nj}, 4), "
                                      f"got {np.shape(motors)}")
        h = np.asarray(half, dtype=float)
        d = np.asarray(driven, dtype=bool)
        if h.shape != (nj, 2) or d.shape != (nj, 2) or not np.all(h >= 0):
            raise JointReferenceError(f"expected half the play (>= 0) and driven of shape "
                                      f"({nj}, 2), got {h.shape} and {d.shape}")
        play = np.concatenate([h, d.astype(float)], axis=1)
        return self._run(state, m.shape[0], self._no_refs, m, play, warn)

    @cached_property
    def _no_motors(self) -> np.ndarray:
        return np.zeros((0, max(self.n - 1, 0), 4))

    @cached_property
    def _no_play(self) -> np.ndarray:
        return np.zeros((max(self.n - 1, 0), 4))

    @cached_property
    def _no_refs(self) -> np.ndarray:
        return np.zeros((1, max(self.n - 1, 0), 4))

    # ----------------------------------------------------------------- readout
    def joint_angles(self, state: SnakeState) -> np.ndarray:
        """Joint angles and rates (n-1, 4): [alpha_h, alpha_v, omega_h, omega_v],
        (65)-(67)."""
        Rs = self.rotations(state)
        out = np.empty((max(self.n - 1, 0), 4))
        K.joint_angles(Rs, state.u, out)
        return out

    def rotations(self, state: SnakeState) -> np.ndarray:
        """R^I_Bi of every link (n, 3, 3)."""
        Rs = np.empty((self.n, 3, 3))
        K._all_rotations(np.ascontiguousarray(state.q), Rs)
        return Rs

    def contact_gaps(self, state: SnakeState) -> np.ndarray:
        """g_N (2n,) of (10), m; with steps, above the ground's level under
        each sphere's centre."""
        g = K.contact_gaps(np.ascontiguousarray(state.q), self.params.L_SC,
                           self.params.L_GS, np.empty(2 * self.n))
        if self.scene.steps:
            g -= self.scene.level(self.sphere_centres(state)[:, 0])
        return g

    def clearance(self, state: SnakeState) -> float:
        """The smallest gap to the floor (:meth:`contact_gaps`) or an obstacle
        (:meth:`obstacle_gaps`), m; negative: a penetration."""
        gp, gs = self.obstacle_gaps(state)
        return float(min(self.contact_gaps(state).min(), gp.min(initial=np.inf),
                         gs.min(initial=np.inf)))

    def sphere_centres(self, state: SnakeState) -> np.ndarray:
        """Centres of the end spheres (2n, 3), rows as g_N: fronts, then rears."""
        z = self.rotations(state)[:, :, 2]
        r = state.q[:, :3]
        return np.vstack([r + self.params.L_GS * z, r - self.params.L_GS * z])

    def obstacle_gaps(self, state: SnakeState) -> tuple[np.ndarray, np.ndarray]:
        """Gaps to the scene's obstacles, m: pegs (n, np) (each link's body
        against each peg, pegs sorted by x) and step risers and edges (2n, ns)
        (each sphere against each step ahead of its centre; +inf for the steps
        behind it, whose top face is the ground, see :meth:`contact_gaps`).
        Computed here with numpy, independently of the compiled step."""
        p = self.params
        z = self.rotations(state)[:, :, 2]
        r = state.q[:, :3]
        pegs = self._pegs
        gp = np.empty((self.n, pegs.shape[0]))
        s = np.linspace(-p.L_GS, p.L_GS, 2)
        for k, (x, y, radius, _) in enumerate(pegs):
            d = r[:, :2] - [x, y]
            zh = z[:, :2]
            zh2 = np.einsum("ij,ij->i", zh, zh)
            t = np.where(zh2 > 1e-24, -np.einsum("ij,ij->i", d, zh) / np.maximum(zh2, 1e-300),
                         0.0)
            t = np.clip(t, s[0], s[1])
            gp[:, k] = np.linalg.norm(d + t[:, None] * zh, axis=1) - p.L_SC - radius
        steps = self._steps
        o = self.sphere_centres(state)
        gs = np.full((2 * self.n, steps.shape[0]), np.inf)
        for k, (x0, lo, hi, _) in enumerate(steps):
            ahead = o[:, 0] < x0
            dz = o[:, 2] - np.clip(o[:, 2], lo, hi)
            gs[ahead, k] = np.hypot(o[ahead, 0] - x0, dz[ahead]) - p.L_SC
        return gp, gs

    def joint_gaps(self, state: SnakeState) -> np.ndarray:
        """g_J (n-1, 4) of (12)-(13): translational gaps (m) and g_phi."""
        return K.joint_gaps(np.ascontiguousarray(state.q), self.params.L,
                            np.empty((max(self.n - 1, 0), 4)))

    def momentum(self, state: SnakeState) -> tuple[np.ndarray, np.ndarray]:
        """Linear momentum (3,) and angular momentum about the origin (3,)."""
        m = self.params.m
        theta = np.array([self.params.Theta1, self.params.Theta1, self.params.Theta3])
        Rs = self.rotations(state)
        p = m * state.u[:, :3].sum(axis=0)
        spin = np.einsum("nij,nj->ni", Rs, theta * state.u[:, 3:])
        ang = (np.cross(state.q[:, :3], m * state.u[:, :3]) + spin).sum(axis=0)
        return p, ang


def kernels_cached() -> bool:
    """Whether numba's on-disk cache holds the compiled step, so that the first
    step of this process loads it instead of compiling (about 25-45 s on a
    2-core machine). False when it cannot tell."""
    try:
        # numba's Dispatcher is untyped for mypy: its cache is an implementation detail
        return Path(K._advance._cache._cache_file._index_path).exists()  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # numba internals moved: assume a compile
        return False


def warm_up() -> float:
    """Compile (or load from the cache) every kernel a simulation calls, by
    stepping a small snake once; returns the seconds it took. Call it before
    timing or before real-time work so that neither counts the compile."""
    import time

    t0 = time.perf_counter()
    model = SnakeModel(SnakeParams(n=3))
    state = model.initial_state()
    state, _ = model.run_steps(state, np.zeros((2, 2, 4)))
    model.joint_angles(state)
    model.contact_gaps(state)
    return time.perf_counter() - t0
