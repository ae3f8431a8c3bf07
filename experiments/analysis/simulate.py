"""Run a gait on the model offline and sample it: the engine of `aiko simulate`.

The gait is evaluated at the start of every time step (a continuous reference, as
in the paper's simulations) and the state is sampled at a fixed rate.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from aiko.control.gait import Gait, references, soft_start_times
from aiko.model import SnakeModel, SnakeState, StepStats
from aiko.model.errors import ParameterError

__all__ = ["SimulationResult", "simulate_gait", "initial_state_for_gait"]

LINK_OF_INTEREST = 6
"""The link whose position the experiments track (1-based, VIII-C)."""


@dataclass
class SimulationResult:
    """Samples of one run: t (k,), positions (k, n, 3) m, joint angles
    alpha_h, alpha_v (k, n-1) rad, the drives' positive work since the start
    (k,) J (see :class:`aiko.model.StepStats`), and the solver's counters and
    wall time."""

    t: np.ndarray
    positions: np.ndarray
    alpha_h: np.ndarray
    alpha_v: np.ndarray
    stats: StepStats
    wall_time: float
    dt: float
    final_state: SnakeState
    work: np.ndarray
    mass: float = 0.0           # the snake's total mass, kg
    gravity: float = 9.81       # |g|, m/s^2

    def com(self) -> np.ndarray:
        """Centre of mass (k, 3), m (links of equal mass)."""
        return self.positions.mean(axis=1)

    def cost_of_transport(self, t_from: float | None = None) -> float:
        """Work / (m g d) from ``t_from`` (default: the start) to the end, d
        the centre of mass's straight-line displacement in the ground plane;
        inf when it did not move."""
        i = 0 if t_from is None else int(np.searchsorted(self.t, t_from - 1e-9))
        i = min(i, self.t.size - 1)
        c = self.com()
        d = float(np.hypot(*(c[-1, :2] - c[i, :2])))
        w = float(self.work[-1] - self.work[i])
        return w / (self.mass * self.gravity * d) if d > 0 else math.inf

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0]) if self.t.size else 0.0

    @property
    def realtime_factor(self) -> float:
        return self.duration / self.wall_time if self.wall_time > 0 else float("inf")

    @property
    def us_per_step(self) -> float:
        return 1e6 * self.wall_time / self.stats.steps if self.stats.steps else 0.0

    def link(self, i: int = LINK_OF_INTEREST) -> np.ndarray:
        """Trajectory (k, 3) of link i (1-based)."""
        return self.positions[:, i - 1, :]

    def csv_header(self) -> list[str]:
        n = self.positions.shape[1]
        cols = ["t"]
        for i in range(1, n + 1):
            cols += [f"x{i}", f"y{i}", f"z{i}"]
        cols += [f"ah{i}" for i in range(1, n)] + [f"av{i}" for i in range(1, n)]
        return cols + ["work_J"]

    def csv_rows(self) -> np.ndarray:
        k = self.t.size
        return np.hstack([self.t[:, None], self.positions.reshape(k, -1),
                          self.alpha_h, self.alpha_v, self.work[:, None]])


def initial_state_for_gait(model: SnakeModel, gait: Gait, height: float = 0.0) -> SnakeState:
    """Straight, or curved with the joint angles of t = 0 (VIII-B, VIII-D)."""
    if gait.start == "curved" and model.n > 1:
        r0 = references(gait, 0.0, model.n - 1)
        return model.initial_state(alpha_h=r0[:, 0], alpha_v=r0[:, 1], height=height)
    return model.initial_state(height=height)


def simulate_gait(model: SnakeModel, gait: Gait, duration: float, rate: float = 20.0,
                  height: float = 0.0, state: SnakeState | None = None,
                  progress: Callable[[float], None] | None = None) -> SimulationResult:
    """Simulate ``duration`` seconds of the gait, sampling at ``rate`` Hz.

    Starts from ``state`` (default: the gait's start posture at t = 0); the gait
    is evaluated at the state's own time, so a run can be continued from its
    final state. ``progress`` (optional) is called with the simulated time since
    the start after each sample.
    """
    if not duration >= 0:
        raise ParameterError("duration", duration, "must be >= 0")
    if not rate > 0:
        raise ParameterError("rate", rate, "must be > 0")
    if state is None:
        state = initial_state_for_gait(model, gait, height)
    n = model.n
    nj = max(n - 1, 0)
    t0 = state.t
    dt = model.dt
    steps_total = int(round(duration / dt))
    sample_steps = max(1, int(round(1.0 / (rate * dt))))
    ts = soft_start_times(gait, nj)
    times, pos, ah, av = [], [], [], []

    def record(s: SnakeState) -> None:
        times.append(s.t)
        pos.append(s.q[:, :3].copy())
        ang = model.joint_angles(s)
        ah.append(ang[:, 0])
        av.append(ang[:, 1])

    stats = StepStats()
    work = [0.0]
    record(state)
    wall = 0.0
    done = 0
    while done < steps_total:
        m = min(sample_steps, steps_total - done)
        t_steps = t0 + (done + np.arange(m)) * dt
        refs = references(gait, t_steps, nj, t_start=ts)
        w0 = time.perf_counter()
        state, st = model.run_steps(state, refs)
        wall += time.perf_counter() - w0
        stats += st
        done += m
        record(state)
        work.append(stats.work)
        if progress is not None:
            progress(state.t - t0)
    k = len(times)
    p = model.params
    return SimulationResult(np.array(times), np.array(pos), np.array(ah).reshape(k, nj),
                            np.array(av).reshape(k, nj), stats, wall, dt, state,
                            np.array(work), p.n * p.m, p.g)
