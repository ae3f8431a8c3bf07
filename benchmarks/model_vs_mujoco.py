"""Our non-smooth model against MuJoCo on the same snake, in one run.

    pip install '.[bench]'
    python benchmarks/model_vs_mujoco.py                 # presets at dt 0.25, 0.5, 1, 2 ms
    python benchmarks/model_vs_mujoco.py --scaling       # sidewinding at 11, 22, 44, 88 links

The MuJoCo model is generated from the same parameters: capsules of radius L_SC
and half-length L_GS, joints L apart, mass m and inertia (Theta1, Theta1, Theta3)
per link, universal joints as two hinges (yaw about the link's vertical axis, then
pitch) driven by position actuators with the PD gains (kp = K_hp, K_vp; kv = K_hd,
K_vd), elliptic friction cones, implicitfast, a plane floor. MuJoCo's tangent
frame is not tied to the link, so the orthotropic preset runs with the mean of
mu_x and mu_y there (its trajectory is not comparable, its cost is). Both engines
get the same reference at every step (link 6's displacement is compared: the
two engines place the curved start differently) (MuJoCo's actuators see the angle; its damping
acts on the joint rate without the reference rate). One core, wall time of the
stepping only, the fastest of ``--repeat`` runs of each (taken in turn, so
that a slow phase of a shared machine does not fall on one engine only). Ours
runs with implicit drives (the default) and with the
paper's explicit ones, both with the default solver settings; MuJoCo's
implicitfast integrates its actuators' damping implicitly. Not part of the test
suite.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from machine import describe
from timed import PAPER_PRESETS, timed_run

from aiko.control import PRESETS, references
from aiko.model import SnakeModel, SnakeParams, SolverParams


def mjcf(p: SnakeParams, dt: float, mu: float, q0_h, q0_v) -> str:
    """An MJCF snake: link 1 at +x, pointing to -x; child links nested."""
    half = p.L / 2

    def body(i: int) -> str:
        inner = ""
        if i < p.n:
            inner = body(i + 1)
        joints = ""
        if i > 1:
            joints = (f'<joint name="h{i - 1}" type="hinge" axis="0 0 1" pos="{-half} 0 0" '
                      f'ref="0"/><joint name="v{i - 1}" type="hinge" axis="0 1 0" '
                      f'pos="{-half} 0 0"/>')
        pos = "0 0 0" if i == 1 else f"{p.L} 0 0"
        return (f'<body name="link{i}" pos="{pos}">{joints}'
                f'<inertial pos="0 0 0" mass="{p.m}" diaginertia="{p.Theta3} {p.Theta1} '
                f'{p.Theta1}"/>'
                f'<geom type="capsule" fromto="{-p.L_GS} 0 0 {p.L_GS} 0 0" size="{p.L_SC}" '
                f'friction="{mu} 0.001 0.001" condim="3"/>{inner}</body>')

    x0 = (p.n - 1) / 2 * p.L
    acts = "".join(
        f'<position joint="h{i}" kp="{p.K_hp}" kv="{p.K_hd}"/>'
        f'<position joint="v{i}" kp="{p.K_vp}" kv="{p.K_vd}"/>' for i in range(1, p.n))
    root = body(1).replace('<body name="link1" pos="0 0 0">',
                           f'<body name="link1" pos="{x0} 0 {p.L_SC}" euler="0 0 180">'
                           '<freejoint/>', 1)
    return (f'<mujoco><option timestep="{dt}" cone="elliptic" integrator="implicitfast" '
            f'gravity="0 0 {-p.g}"/><worldbody><geom type="plane" size="50 50 0.1" '
            f'friction="{mu} 0.001 0.001"/>{root}</worldbody><actuator>{acts}</actuator>'
            '</mujoco>')


def run_mujoco(p: SnakeParams, gait, dt: float, duration: float, mu: float):
    import mujoco

    nj = p.n - 1
    r0 = references(gait, 0.0, nj) if gait.start == "curved" else np.zeros((nj, 4))
    model = mujoco.MjModel.from_xml_string(mjcf(p, dt, mu, r0[:, 0], r0[:, 1]))
    data = mujoco.MjData(model)
    # joints: free (7 qpos) then h1, v1, h2, v2, ...; our alpha_h is a yaw of link
    # i+1 relative to link i about link i's vertical axis
    data.qpos[7::2] = r0[:, 0]
    data.qpos[8::2] = r0[:, 1]
    mujoco.mj_forward(model, data)
    # rest on the floor
    lowest = min(data.geom_xpos[g][2] - p.L_SC for g in range(1, model.ngeom))
    data.qpos[2] -= lowest
    mujoco.mj_forward(model, data)
    start6 = data.xpos[6].copy()
    steps = int(round(duration / dt))
    refs = references(gait, np.arange(steps) * dt, nj)
    ctrl = np.empty((steps, 2 * nj))
    ctrl[:, 0::2] = refs[:, :, 0]
    ctrl[:, 1::2] = refs[:, :, 1]
    contacts = 0
    t0 = time.perf_counter()
    for k in range(steps):
        data.ctrl[:] = ctrl[k]
        mujoco.mj_step(model, data)
        contacts += data.ncon
    wall = time.perf_counter() - t0
    return wall / steps * 1e6, data.xpos[6] - start6, contacts / steps


def run_ours(p: SnakeParams, gait, dt: float, duration: float, drive: str = "implicit"):
    """(us/step, link-6 displacement, stats); NaNs when the run diverges at this dt."""
    r = timed_run(SnakeModel(p, SolverParams(dt=dt, drive=drive)), gait, duration)
    if r is None:
        return float("nan"), np.full(3, np.nan), None
    return r.us_per_step, r.link(6)[-1] - r.link(6)[0], r.stats


def machine() -> str:
    import mujoco
    import numba
    return f"{describe()}, numba {numba.__version__}, MuJoCo {mujoco.__version__}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--scaling", action="store_true")
    ap.add_argument("--dt", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0],
                    help="time steps, ms")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each engine and configuration, taken in turn; the "
                         "fastest counts (default 3)")
    ap.add_argument("--presets", nargs="+", default=list(PAPER_PRESETS),
                    choices=PAPER_PRESETS, metavar="PRESET",
                    help="paper presets to run (default: all three)")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    print(f"machine: {machine()}; one core, stepping wall time only, the fastest of "
          f"{a.repeat} runs taken in turn")
    if a.scaling:
        gait = PRESETS["sidewinding"]
        print(f"{'links':>5} {'ours us/step':>12} {'MuJoCo us/step':>14} {'ratio':>6}")
        base = None
        for n in (11, 22, 44, 88):
            p = SnakeParams(n=n)
            ours = min(run_ours(p, gait, 0.00025, a.duration)[0] for _ in range(a.repeat))
            mj = min(run_mujoco(p, gait, 0.00025, a.duration, 0.2)[0] for _ in range(a.repeat))
            base = base or (ours, mj)
            print(f"{n:>5} {ours:>12.1f} {mj:>14.1f} {ours / mj:>6.2f}   "
                  f"(x{ours / base[0]:.1f} and x{mj / base[1]:.1f} from 11 links)")
        return
    print(f"{'preset':<32}{'dt ms':>6}{'drive':>9}{'ours us':>9}{'MuJoCo us':>10}"
          f"{'ours/MJ':>8}{'RTF ours':>9}{'RTF MJ':>8}  link 6 moved: ours | MuJoCo (m)"
          "   [MJ contacts]")
    for name in a.presets:
        gait = PRESETS[name]
        p = SnakeParams(mu_x=gait.mu_x, mu_y=gait.mu_y)
        mu = 0.5 * (gait.mu_x + gait.mu_y)
        for dt in (d * 1e-3 for d in a.dt):
            runs = {"mujoco": [], "implicit": [], "explicit": []}
            for _ in range(a.repeat):
                runs["mujoco"].append(run_mujoco(p, gait, dt, a.duration, mu))
                for drive in ("implicit", "explicit"):
                    runs[drive].append(run_ours(p, gait, dt, a.duration, drive))
            mj, end_m, ncon = min(runs["mujoco"], key=lambda r: r[0])
            for drive in ("implicit", "explicit"):
                done = [r for r in runs[drive] if r[0] == r[0]]  # a diverged run: NaN
                ours, end_o, _ = min(done, key=lambda r: r[0]) if done else runs[drive][0]
                if ours != ours:  # NaN: diverged
                    print(f"{name:<32}{dt * 1e3:>6.2f}{drive:>9}{'diverges':>9}{mj:>10.1f}")
                    continue
                print(f"{name:<32}{dt * 1e3:>6.2f}{drive:>9}{ours:>9.1f}{mj:>10.1f}"
                      f"{ours / mj:>8.2f}{dt * 1e6 / ours:>9.2f}{dt * 1e6 / mj:>8.2f}  "
                      f"({end_o[0]:+.3f}, {end_o[1]:+.3f}) | ({end_m[0]:+.3f}, "
                      f"{end_m[1]:+.3f})   [{ncon:.1f}]", flush=True)


if __name__ == "__main__":
    main()
