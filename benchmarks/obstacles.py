"""Obstacles: peg-aided lateral undulation, sidewinding onto a 2 cm step, and
the model's speed among pegs.

1. Lateral undulation with isotropic friction (the preset gait, 15 s) on the
   bare floor and in the ``pegs-grid`` field: the centre of mass's travel.
2. Sidewinding (the preset gait) toward a 2 cm step, the snake laid across
   the direction of travel 0.25 m before it: climbed or not, the deepest
   penetration of floor, top face and edge, no divergence.
3. Speed: lateral undulation at the default step on the bare floor, in the
   peg field, and with the same field moved 100 m away (the broad phase: far
   pegs should cost nothing); interleaved repeats, the median reported.

Writes figures into docs/figures/ and prints a report with the machine.

    python benchmarks/obstacles.py [--duration 15] [--repeats 5]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import describe  # noqa: E402

from aiko.control import PRESETS  # noqa: E402
from aiko.experiments.analysis.simulate import initial_state_for_gait, simulate_gait  # noqa: E402
from aiko.model import ConvergenceWarning, SnakeModel, warm_up  # noqa: E402
from aiko.model.posture import posture_along  # noqa: E402
from aiko.model.scene import SCENE_PRESETS, Peg, Scene, Step  # noqa: E402

FIGURES = Path(__file__).resolve().parents[1] / "docs" / "figures"


def pegs_vs_floor(duration: float):
    gait = PRESETS["lateral-undulation"]
    out = {}
    for label, scene in (("bare floor", Scene()), ("pegs-grid", SCENE_PRESETS["pegs-grid"])):
        model = SnakeModel(scene=scene)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = simulate_gait(model, gait, duration)
        com = res.com()
        out[label] = (res, com, model)
        d = com[-1, :2] - com[0, :2]
        print(f"  {label:10s}: centre of mass moved ({d[0]:+.3f}, {d[1]:+.3f}) m, "
              f"{np.hypot(*d):.3f} m; mean speed along x {d[0] / duration * 100:+.2f} cm/s; "
              f"deepest gap {1000 * model.clearance(res.final_state):+.3f} mm at the end; "
              f"unconverged steps {res.stats.unconverged}")
    return out


def figure_pegs(runs, duration: float, path: Path) -> None:
    from matplotlib.figure import Figure
    from matplotlib.patches import Circle

    fig = Figure(figsize=(11, 6.4), layout="constrained")
    axes = fig.subplots(2, 1, height_ratios=(1.3, 1))
    ax = axes[0]
    colors = {"bare floor": "#1f4e9c", "pegs-grid": "#d1495b"}
    for label, (res, com, _) in runs.items():
        ax.plot(com[:, 0], com[:, 1], color=colors[label], lw=1.8,
                label=f"{label}: centre of mass")
        q = res.final_state.q
        ax.plot(q[:, 0], q[:, 1], "-o", color=colors[label], ms=3, lw=1, alpha=0.6)
        axes[1].plot(res.t, com[:, 0], color=colors[label], lw=1.8, label=label)
    for peg in SCENE_PRESETS["pegs-grid"].pegs:
        if -1.0 <= peg.x <= 3.0 and abs(peg.y) < 0.7:
            ax.add_patch(Circle((peg.x, peg.y), peg.radius, color="#6b8e23", alpha=0.8))
    ax.plot([], [], "o", color="#6b8e23", label="pegs (pegs-grid)")
    ax.set_aspect("equal")
    ax.set_xlim(-1.0, 3.0)
    ax.set_ylim(-0.7, 0.7)
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right", ncols=3)
    ax.set_title("paths; the snakes at the end (links' centres)")
    axes[1].set_xlabel("t [s]")
    axes[1].set_ylabel("centre of mass x [m]")
    axes[1].grid(True, alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.suptitle(f"lateral undulation, isotropic friction 0.2, {duration:g} s: bare floor "
                 "and among pegs", fontsize=11)
    fig.savefig(path, dpi=110)


def sidewinding_step(duration: float, height: float = 0.02):
    """The snake laid along y, its axis 0.25 m before a step at x0 = 0.4 m,
    head toward +y or -y, whichever makes sidewinding travel toward +x (found
    on the flat floor first). Sampled every 0.1 s: the deepest penetration of
    floor, top face and edge over the run."""
    gait = PRESETS["sidewinding"]
    flat = SnakeModel()
    head = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        moved = simulate_gait(flat, gait, 4.0, state=flat.state_from_q(_along_y(flat, 0.0, 1.0)))
    if moved.com()[-1, 0] < moved.com()[0, 0]:
        head = -1.0
    x0 = 0.4
    scene = Scene(steps=(Step(x0, height),))
    runs = {}
    for label, sc in (("step", scene), ("flat floor", Scene())):
        model = SnakeModel(scene=sc)
        runs[label] = (model, *_sampled(model, gait, _along_y(model, x0 - 0.25, head), duration))
    model, t, positions, deepest, unconverged = runs["step"]
    com = positions.mean(axis=1)
    beyond = int((positions[-1, :, 0] > x0).sum())
    above = positions[:, :, 2] - scene.level(positions[:, :, 0])  # above the level under it
    flat_above = runs["flat floor"][2][:, :, 2]
    print(f"  step of {100 * height:g} cm at x0 = {x0} m, the snake's axis 0.25 m before it, "
          f"head toward {'+' if head > 0 else '-'}y: after {duration:g} s the centre of mass "
          f"is at x = {com[-1, 0]:+.3f} m (on the flat floor: "
          f"{runs['flat floor'][2][-1, :, 0].mean():+.3f} m); {beyond} of {model.n} links' "
          f"centres beyond the edge; the links' mean height above the ground under them "
          f"{100 * above[-1].mean():.2f} cm at the end (flat floor {100 * flat_above[-1].mean():.2f} "
          f"cm), the whole snake raised by {100 * (com[-1, 2] - com[0, 2]):+.2f} cm")
    print(f"  deepest gap (sampled every 0.1 s): {1000 * deepest:+.3f} mm with the step, "
          f"{1000 * runs['flat floor'][3]:+.3f} mm on the flat floor; finite throughout: "
          f"{bool(np.all(np.isfinite(positions)))}; unconverged steps {unconverged}")
    return t, positions, model, x0


def _sampled(model: SnakeModel, gait, q0, duration: float):
    """Run in 0.1 s pieces: (t, positions, deepest gap at the pieces' ends,
    unconverged steps)."""
    state = model.state_from_q(q0)
    ts, pos = [], []
    deepest = math.inf
    unconverged = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        while state.t < duration - 1e-9:
            res = simulate_gait(model, gait, 0.1, state=state)
            state = res.final_state
            unconverged += res.stats.unconverged
            ts.append(res.t[1:] if ts else res.t)
            pos.append(res.positions[1:] if pos else res.positions)
            deepest = min(deepest, model.clearance(state))
    return np.concatenate(ts), np.concatenate(pos), deepest, unconverged


def _along_y(model: SnakeModel, x: float, head: float) -> np.ndarray:
    p = model.params
    pts = np.array([[x, head * (0.5 * p.n * p.L - k * p.L)] for k in range(p.n + 1)])
    return posture_along(p, pts)


def figure_step(t, positions, model, x0: float, path: Path) -> None:
    from matplotlib.figure import Figure

    com = positions.mean(axis=1)
    fig = Figure(figsize=(11, 5.6), layout="constrained")
    ax, az = fig.subplots(1, 2, width_ratios=(1.2, 1))
    for k in range(0, t.size, max(1, t.size // 12)):
        ax.plot(positions[k, :, 0], positions[k, :, 1], "-", color="0.6", lw=0.8)
    ax.plot(positions[-1, :, 0], positions[-1, :, 1], "-o", color="#d1495b", ms=3,
            lw=1.5, label="the snake at the end")
    ax.plot(com[:, 0], com[:, 1], color="#1f4e9c", lw=1.8, label="centre of mass")
    ax.axvspan(x0, max(x0 + 0.5, positions[:, :, 0].max() + 0.1), color="#b08968",
               alpha=0.2, label="step top (+2 cm)")
    ax.axvline(x0, color="#7f5539", lw=1.2)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("top view (grey: every 1/12 of the run)")
    for i in range(model.n):
        az.plot(t, positions[:, i, 2] * 100, lw=0.9, color=f"C{i % 10}")
    az.axhline((model.params.L_SC + 0.02) * 100, color="#7f5539", ls="--", lw=1,
               label="a link resting on the top face")
    az.axhline(model.params.L_SC * 100, color="0.4", ls=":", lw=1,
               label="a link resting on the floor")
    az.set_xlabel("t [s]")
    az.set_ylabel("links' centres z [cm]")
    az.grid(True, alpha=0.3)
    az.legend(fontsize=8)
    az.set_title("height of every link")
    fig.suptitle("sidewinding toward a 2 cm step", fontsize=11)
    fig.savefig(path, dpi=110)


def speed(duration: float, repeats: int) -> None:
    gait = PRESETS["lateral-undulation"]
    grid = SCENE_PRESETS["pegs-grid"]
    far = Scene(tuple(Peg(p.x + 100.0, p.y, p.radius) for p in grid.pegs))
    cases = {"bare floor": Scene(), "pegs-grid": grid, "pegs-grid 100 m away": far}
    times: dict[str, list[float]] = {k: [] for k in cases}
    steps = {}
    for _ in range(repeats):
        for label, scene in cases.items():
            model = SnakeModel(scene=scene)
            state = initial_state_for_gait(model, gait)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                t0 = time.perf_counter()
                res = simulate_gait(model, gait, duration, state=state)
                times[label].append(time.perf_counter() - t0)
            steps[label] = (res.stats.steps, res.stats.mean_iterations)
    for label, ts in times.items():
        med = statistics.median(ts)
        n, it = steps[label]
        print(f"  {label:22s}: {duration / med:6.1f} x realtime, {1e6 * med / n:6.1f} us/step "
              f"(median of {repeats}; min {duration / max(ts):.1f}, max {duration / min(ts):.1f} "
              f"x realtime), mean sweeps {it:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--step-duration", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    warm_up()
    print(f"machine: {describe()}")
    FIGURES.mkdir(exist_ok=True)
    print("1. lateral undulation, isotropic friction, bare floor and pegs-grid:")
    runs = pegs_vs_floor(args.duration)
    figure_pegs(runs, args.duration, FIGURES / "obstacles-pegs-grid.png")
    print("2. sidewinding toward a 2 cm step:")
    t, positions, model, x0 = sidewinding_step(args.step_duration)
    figure_step(t, positions, model, x0, FIGURES / "obstacles-step.png")
    print(f"3. speed, lateral undulation, {args.duration:g} s at dt "
          f"{SnakeModel().dt:g} s (default step):")
    speed(args.duration, args.repeats)
    print(f"figures: {FIGURES / 'obstacles-pegs-grid.png'}, {FIGURES / 'obstacles-step.png'}")


if __name__ == "__main__":
    main()
