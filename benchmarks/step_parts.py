"""Where the model's step spends its time: its parts timed one by one on the
states of a run, beside the whole step over the same steps.

    taskset -c 1 python benchmarks/step_parts.py     # sidewinding 0.25 ms, lateral undulation 1 ms
    taskset -c 1 python benchmarks/step_parts.py --case sidewinding,0.001 --repeat 7

Each case: the preset's gait for 1 s with the default solver (not timed), then
its states over the next 0.5 s, step by step. The whole step is the compiled
``_advance`` over those steps in one call; each part runs once per recorded
state in a compiled loop, on the inputs the step gives it there (the rotations
at the step's midpoint, the joints' rows with the implicit drives' two, the
links touching the ground): the joints' Jacobians, blocks and factorisation
(``joint_system``), the eliminations the sweeps need (``eliminations``), the
gains of the links touching the ground (``link_block``), the final joint solve
(``constrain_velocity``) and the projection onto the joints
(``project_joints``). The rest of the step (the half steps, the drives' rows,
each contact's W, K W and warm start, the sweeps) is the whole step less the
parts. A part timed alone runs its chains of dependent operations (a
factorisation's pivots, one joint after the other) with nothing beside them,
where inside the step the processor overlaps them with other work, and it
reads its inputs from arrays of all the states: the parts are upper bounds,
the rest a lower one. The fastest of ``--repeat`` runs counts; microseconds a
step. Not part of the tests.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from machine import describe
from numba import njit

from aiko.control import PRESETS, references
from aiko.experiments.analysis.simulate import simulate_gait
from aiko.model import SnakeModel, SnakeParams, SolverParams
from aiko.model import _chain as C
from aiko.model import _kernels as K

CASES = ("sidewinding,0.00025", "lateral-undulation,0.001")


@njit(cache=True)
def _joint_systems(Rs, par, minv, WJ, comp, D, E, Ld, Ls):
    for s in range(Rs.shape[0]):
        K.joint_system(Rs[s], par, minv, WJ[s], comp[s], D[s], E[s], Ld[s], Ls[s])


@njit(cache=True)
def _eliminations(D, E, Ld, Ls, FL, DR, FR, lo, hi):
    F4 = np.empty((C.NR, C.NR))
    for s in range(D.shape[0]):
        if lo[s] >= 0:
            C.eliminations(D[s], E[s], Ld[s], Ls[s], FL[s], DR[s], FR[s], F4, lo[s], hi[s])


@njit(cache=True)
def _link_blocks(WJ, minv, Ld, Ls, DR, links, counts):
    Y = np.empty((2 * C.NR, 6))
    Kl = np.empty((6, 6))
    Cl = np.empty((C.NR, C.NR))
    t = np.empty(6)
    for s in range(WJ.shape[0]):
        for k in range(counts[s]):
            l = links[s, k]
            C.link_block(l, WJ[s], minv[l], Ld[s], Ls[s], DR[s], Y, Kl, Cl, t)


@njit(cache=True)
def _joint_solves(WJ, Ld, Ls, minv, bo, v):
    work = np.empty(bo.shape[1:])
    vs = np.empty(v.shape[1])
    for s in range(WJ.shape[0]):
        vs[:] = v[s]
        K.constrain_velocity(WJ[s], Ld[s], Ls[s], minv, bo[s], vs, work)


@njit(cache=True)
def _projections(q, L):
    R2 = np.empty((2, 3, 3))
    qs = np.empty(q.shape[1:])
    for s in range(q.shape[0]):
        qs[:] = q[s]
        K.project_joints(qs, L, False, R2)


def _record(preset: str, dt: float, seconds: float):
    """The model, the states over ``seconds`` after 1 s of the gait, and each
    step's references."""
    g = PRESETS[preset]
    model = SnakeModel(SnakeParams(mu_x=g.mu_x, mu_y=g.mu_y), SolverParams(dt=dt))
    state = simulate_gait(model, g, 1.0).final_state
    n_steps = int(round(seconds / dt))
    refs = references(g, state.t + np.arange(n_steps) * dt, model.n - 1)
    states = []
    for k in range(n_steps):
        states.append(state)
        state, _ = model.step(state, refs[k])
    return model, states, refs


def _inputs(model: SnakeModel, states, refs) -> dict[str, np.ndarray]:
    """The parts' inputs at each recorded state, as the step forms them."""
    _, (par, sol, *_rest) = model.kernel_inputs(states[0])
    n, dt = model.n, model.dt
    nj, nr, k = n - 1, C.NR, len(states)
    a = {name: np.zeros((k, *shape)) for name, shape in (
        ("Rs", (n, 3, 3)), ("WJ", (nj, 12, nr)), ("comp", (nj, nr)), ("bo", (nj, nr)),
        ("D", (nj, nr, nr)), ("E", (nj, nr, nr)), ("Ld", (nj, nr, nr)), ("Ls", (nj, nr, nr)),
        ("FL", (nj, nr, nr)), ("DR", (nj, nr, nr)), ("FR", (nj, nr, nr)), ("v", (6 * n,)),
        ("q", (n, 7)))}
    a["links"] = np.zeros((k, n), dtype=np.int64)
    a["counts"] = np.zeros(k, dtype=np.int64)
    a["lo"] = np.full(k, -1, dtype=np.int64)
    a["hi"] = np.zeros(k, dtype=np.int64)
    minv = np.empty((n, 6))
    K._inverse_mass(par, minv)
    qM = np.empty((n, 7))
    for s, st in enumerate(states):
        K._kinematic_update(st.q, st.u, 0.5 * dt, qM)
        K._normalise_quaternions(qM)
        K._all_rotations(qM, a["Rs"][s])
        K.drive_rows(a["Rs"][s], st.u, refs[s], par[9], par[10], par[11], par[12], dt,
                     sol[16], a["WJ"][s], a["comp"][s], a["bo"][s])
        K.joint_system(a["Rs"][s], par, minv, a["WJ"][s], a["comp"][s], a["D"][s], a["E"][s],
                       a["Ld"][s], a["Ls"][s])
        gaps = K.contact_gaps(qM, par[1], par[2], np.empty(2 * n))
        links = np.flatnonzero((gaps[:n] <= sol[11]) | (gaps[n:] <= sol[11]))
        a["counts"][s] = len(links)
        a["links"][s, :len(links)] = links
        if len(links):
            a["lo"][s], a["hi"][s] = links[0], links[-1] - 1
            C.eliminations(a["D"][s], a["E"][s], a["Ld"][s], a["Ls"][s], a["FL"][s],
                           a["DR"][s], a["FR"][s], np.empty((nr, nr)), links[0], links[-1] - 1)
        a["v"][s] = st.u.reshape(-1)
        a["q"][s] = st.q
    a["minv"] = minv
    a["par"] = par
    return a


def _fastest(repeat: int, run) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def time_case(preset: str, dt: float, seconds: float,
              repeat: int) -> tuple[dict[str, float], float]:
    """({part: microseconds a step} for the whole step, each part and the
    rest, the mean number of links touching the ground)."""
    model, states, refs = _record(preset, dt, seconds)
    a = _inputs(model, states, refs)
    k = len(states)
    first, (par, sol, pegs, steps, _) = model.kernel_inputs(states[0])

    def whole() -> None:
        st = first.copy()
        K._advance(st.q, st.u, st.P, st.active, st.dP, refs, model._no_motors,
                   model._no_play, par, sol, pegs, steps, k, np.zeros(3, dtype=np.int64),
                   np.zeros(k))

    parts = {
        "whole step": whole,
        "joint_system": lambda: _joint_systems(a["Rs"], a["par"], a["minv"], a["WJ"],
                                               a["comp"], a["D"], a["E"], a["Ld"], a["Ls"]),
        "eliminations": lambda: _eliminations(a["D"], a["E"], a["Ld"], a["Ls"], a["FL"],
                                              a["DR"], a["FR"], a["lo"], a["hi"]),
        "link_block": lambda: _link_blocks(a["WJ"], a["minv"], a["Ld"], a["Ls"], a["DR"],
                                           a["links"], a["counts"]),
        "constrain_velocity": lambda: _joint_solves(a["WJ"], a["Ld"], a["Ls"], a["minv"],
                                                    a["bo"], a["v"]),
        "project_joints": lambda: _projections(a["q"], par[0]),
    }
    for run in parts.values():  # compile or load, not timed
        run()
    times = {name: 1e6 * _fastest(repeat, run) / k for name, run in parts.items()}
    whole = times["whole step"]
    times["the rest"] = whole - sum(v for name, v in times.items() if name != "whole step")
    return times, float(a["counts"].mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", help="PRESET,DT (s); repeatable")
    ap.add_argument("--seconds", type=float, default=0.5, help="the states recorded (s)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    if args.repeat < 1 or not args.seconds > 0:
        ap.error("--repeat must be at least 1 and --seconds above 0")
    cases = []
    for case in args.case or CASES:
        preset, _, dt = case.partition(",")
        try:
            cases.append((preset, float(dt)))
        except ValueError:
            ap.error(f"--case {case!r}: expected PRESET,DT with DT in seconds")
        if preset not in PRESETS or not cases[-1][1] > 0:
            ap.error(f"--case {case!r}: unknown preset or a step not above 0")
    print(f"machine: {describe()}; the fastest of {args.repeat} runs, us a step")
    for preset, dt in cases:
        times, links = time_case(preset, dt, args.seconds, args.repeat)
        print(f"{preset} at {1e3 * dt:g} ms")
        for name, v in times.items():
            print(f"  {name:20s} {v:7.2f}  {100 * v / times['whole step']:5.1f} %")
        print(f"  links touching the ground, mean: {links:.2f}")


if __name__ == "__main__":
    main()
