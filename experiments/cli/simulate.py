"""`aiko simulate`: run a gait on the model and print a summary or write a CSV."""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from aiko.experiments.cli.args import ArgError, Progress, nonneg, number, positive, slope
from aiko.experiments.cli.flags import add_named_flags
from aiko.model.params import DRIVES, SolverParams

if TYPE_CHECKING:
    from aiko.experiments.analysis.simulate import SimulationResult
    from aiko.model import SnakeModel, SnakeParams

__all__ = ["add_parser", "cmd_simulate"]


stiffness = number("k-N", float, lambda v: v > 0, "be positive (or inf)", finite=False)
"""--k-N: a positive number of N/m, or inf (the rigid contact); NaN fails v > 0."""


def add_parser(sub) -> None:
    s = sub.add_parser("simulate", help="simulate a gait on the non-smooth model",
                       description="Simulate a gait (a preset name or a gait TOML file) on the "
                                   "non-smooth 3D model and print a summary or write a CSV.")
    s.add_argument("gait", metavar="GAIT",
                   help="lateral-undulation, lateral-undulation-orthotropic, sidewinding, "
                        "still, or a gait .toml file")
    s.add_argument("--duration", type=nonneg("duration"), default=15.0, metavar="S",
                   help="simulated time, s (default 15)")
    add_named_flags(s, "simulate", "dt")
    s.add_argument("--drive", choices=DRIVES, default=SolverParams.drive,
                   help="the PD joint drives: implicit in the step (default; stable at any "
                        "step) or explicit, as the paper (needs dt <= 0.25 ms)")
    s.add_argument("--warm-start", choices=("extrapolated", "last"), default="extrapolated",
                   help="where each contact's iteration starts: extrapolated from its last "
                        "change (default; SOR and JOR) or its last impulses (the paper's)")
    add_named_flags(s, "simulate", "mu", "mu_x", "mu_y", "links")
    s.add_argument("--height", type=nonneg("height"), default=0.0, metavar="M",
                   help="start height of the lowest sphere points, m (default 0)")
    s.add_argument("--slope", type=slope, default=0.0, metavar="DEG",
                   help="ground inclination about y, rising toward +x, degrees")
    s.add_argument("--solver", choices=("newton", "jor", "sor"), default="sor",
                   help="contact solver (default sor)")
    s.add_argument("--rate", type=positive("rate"), default=20.0, metavar="HZ",
                   help="output sample rate, Hz (default 20)")
    s.add_argument("--contact", choices=("hard", "compliant"), default="hard",
                   help="contact law: the paper's hard (set-valued) contact (default), or "
                        "the compliant desired-acceleration law of Rengifo et al.")
    s.add_argument("--k-N", dest="k_N", type=stiffness, default=None, metavar="N_PER_M",
                   help="the hard contact's normal stiffness, N/m (default 1e6, with a "
                        "damper of 1e4 N s/m); inf: the paper's rigid contact")
    s.add_argument("--start-curve", type=Path, default=None, metavar="FILE.toml",
                   help="start at rest laid along a curve: [curve] polyline = [[x, y], ...], "
                        "arc = {center, radius, start_deg, direction} or gait = true "
                        "(every joint on the curve, the head at its start)")
    add_named_flags(s, "simulate", "scene")
    s.add_argument("--out", type=Path, metavar="FILE.csv",
                   help="write samples as CSV (and the scene beside it, FILE.scene.toml); its "
                        "folder must exist")
    s.add_argument("--figure", type=Path, metavar="FILE.png",
                   help="draw link 6's x(t), y(t) and path (the figure of trials and replays); "
                        "its folder must exist")
    s.set_defaults(func=cmd_simulate)



def cmd_simulate(args: argparse.Namespace) -> int:
    from aiko.experiments.analysis.simulate import LINK_OF_INTEREST
    from aiko.experiments.files.gait_file import get_gait
    from aiko.experiments.files.scene_file import load_scene
    from aiko.model import SnakeModel

    if args.mu is not None and (args.mu_x is not None or args.mu_y is not None):
        raise ArgError("aiko simulate: give either --mu or --mu-x/--mu-y, not both")
    gait = get_gait(args.gait)
    params = _params(args, gait)
    solver = SolverParams(solver=args.solver, drive=args.drive,
                          extrapolate=args.warm_start == "extrapolated")
    if args.dt is not None:
        solver = solver.with_(dt=args.dt)
    scene = load_scene(args.scene)
    model = SnakeModel(params, solver, scene)
    res, compile_note = _simulate(args, model, gait)
    if args.out is not None:
        _write_csv(args.out, res, scene)
    link = min(LINK_OF_INTEREST, params.n)
    if args.figure is not None:
        _write_figure(args.figure, res, gait, params, link, scene)
    _print_summary(args, res, gait, model, link, compile_note)
    return 0


def _params(args: argparse.Namespace, gait) -> SnakeParams:
    """The snake of --links, the friction of the gait or --mu/--mu-x/--mu-y,
    --slope, --contact and --k-N."""
    from aiko.model import SnakeParams

    mu_x = gait.mu_x if gait.mu_x is not None else SnakeParams.mu_x
    mu_y = gait.mu_y if gait.mu_y is not None else SnakeParams.mu_y
    if args.mu is not None:
        mu_x = mu_y = args.mu
    mu_x = args.mu_x if args.mu_x is not None else mu_x
    mu_y = args.mu_y if args.mu_y is not None else mu_y
    params = SnakeParams(n=args.links, mu_x=mu_x, mu_y=mu_y, slope_deg=args.slope,
                         contact=args.contact)
    if args.k_N is not None:
        params = params.with_(k_N=args.k_N)
    return params


def _simulate(args: argparse.Namespace, model: SnakeModel, gait
              ) -> tuple[SimulationResult, str]:
    """The start state (--start-curve, --height or the gait's), checked clear of
    the scene; the kernels loaded; the run with its progress bar. The result,
    and a note on compiling for the summary."""
    from aiko.experiments.analysis.simulate import initial_state_for_gait, simulate_gait
    from aiko.experiments.files.scene_file import check_clear
    from aiko.model import ConvergenceWarning

    state = None
    if args.start_curve is not None:
        from aiko.experiments.files.start_curve import load_start_curve, start_q
        if args.height:
            raise ArgError("aiko simulate: --start-curve lays the snake on the ground; "
                           "--height does not apply")
        state = model.state_from_q(start_q(load_start_curve(args.start_curve), model.params,
                                           gait, str(args.start_curve)))
    if state is None:
        state = initial_state_for_gait(model, gait, args.height)
    check_clear(model, state, f"{gait.name}'s start posture")
    compile_note = _load_kernels()
    progress = Progress(args.duration, sys.stderr.isatty())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # counted in the summary
        try:
            res = simulate_gait(model, gait, args.duration, rate=args.rate, height=args.height,
                                state=state, progress=progress)
        finally:
            progress.close()
    return res, compile_note


def _write_csv(out: Path, res, scene) -> None:
    from aiko.experiments.files.scene_file import write_scene_beside

    try:
        np.savetxt(out, res.csv_rows(), delimiter=",", header=",".join(res.csv_header()),
                   comments="", fmt="%.9g")
    except OSError as exc:
        raise ArgError(f"aiko simulate: cannot write {out}: {exc.strerror}") from exc
    print(f"wrote {res.t.size} rows to {out}")
    try:
        beside = write_scene_beside(out, scene)
    except OSError as exc:
        raise ArgError(f"aiko simulate: cannot write the scene beside {out}: "
                       f"{exc.strerror}") from exc
    if beside is not None:
        print(f"scene: {beside}")


def _write_figure(path: Path, res, gait, params: SnakeParams, link: int, scene) -> None:
    from aiko.experiments.analysis.compare import Paths, comparison_figure

    fig = comparison_figure(Paths(np.zeros(0), np.zeros((0, 3)), res.t, res.link(link)),
                            f"{gait.name} on the model ({params.n} links, mu_x {params.mu_x:g}, "
                            f"mu_y {params.mu_y:g}), link {link}", scene=scene,
                            snake=res.final_state.q[:, :2])
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise ArgError(f"aiko simulate: cannot write {path}: {exc.strerror}") from exc
    print(f"figure: {path}")


def _print_summary(args: argparse.Namespace, res, gait, model: SnakeModel, link: int,
                   compile_note: str) -> None:
    params, solver, scene = model.params, model.solver, model.scene
    p0, p1 = res.link(link)[0], res.link(link)[-1]
    d = p1 - p0
    st = res.stats
    print(f"gait {gait.name}: {params.n} links, mu_x {params.mu_x:g}, mu_y {params.mu_y:g}, "
          f"slope {args.slope:g} deg, solver {args.solver}, dt {model.dt:g} s, "
          f"{args.drive} drives, {'extrapolated' if solver.extrapolates else 'last'} warm "
          "start" + ("" if scene.empty else f"; {scene.describe()}"))
    print(f"link {link}: start ({p0[0]:+.4f}, {p0[1]:+.4f}, {p0[2]:+.4f}) m, "
          f"end ({p1[0]:+.4f}, {p1[1]:+.4f}, {p1[2]:+.4f}) m, "
          f"moved ({d[0]:+.4f}, {d[1]:+.4f}) m, distance {math.hypot(d[0], d[1]):.4f} m")
    c = res.com()
    moved = math.hypot(*(c[-1, :2] - c[0, :2]))
    print(f"drive work {st.work:.3f} J (the motors' positive mechanical work), centre of mass "
          f"moved {moved:.4f} m, cost of transport {res.cost_of_transport():.3g}")
    if not scene.empty:
        print(f"obstacles: {int(res.final_state.active[2 * params.n:].sum())} contacts at the "
              f"end; deepest gap to floor or obstacle "
              f"{1000 * model.clearance(res.final_state):+.3f} mm")
    print(f"steps {st.steps}, solver iterations mean {st.mean_iterations:.1f} max "
          f"{st.max_iterations}, unconverged steps {st.unconverged}")
    print(f"wall {res.wall_time:.2f} s, {res.us_per_step:.1f} us/step, "
          f"realtime factor {res.realtime_factor:.2f}" + compile_note)


def _load_kernels() -> str:
    """Compile the kernels (first run) or load them before anything is timed;
    a note for the summary when it was a compile."""
    from aiko.model import kernels_cached, warm_up

    if kernels_cached():
        warm_up()
        return ""
    print("compiling the model (first run only) ...", file=sys.stderr, flush=True)
    secs = warm_up()
    return f" (not counting {secs:.1f} s of compiling the model, first run only)"
