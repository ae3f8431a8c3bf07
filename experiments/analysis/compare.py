"""Simulation against experiment: link 6 of the model and of motion capture on
one clock, the numbers, and the figure in the style of the paper's Fig. 7, 10
and 11 (x(t), y(t) and the (x, y) path).

Pure but for :func:`save_comparison`, which writes the figure and the JSON
beside a trial file. The same functions serve the end of a trial and the
replay of a logged one.

Metrics, all in the ground plane (x, y), over the time span both cover (the
keys keep their first names; what each is):

* ``final_error_m``: distance between the two at the last common time;
* ``rms_error_m``: root mean square of that distance at the experiment's sample
  times (the model interpolated linearly between its samples);
* ``distance_*_m``: the **net displacement**, start to end in a straight line;
  ``distance_ratio``: model / experiment;
* ``path_*_m``: the **path length**, link 6's path resampled every
  :data:`PATH_STEP_S` s (summed over every sample it would count motion
  capture's noise: 0.5 mm at 20 Hz adds about 1 % at 8 cm/s and over 30 % at
  1 cm/s; tests/experiments/analysis/test_long_trial_metrics.py);
  ``path_ratio``: model / experiment;
* ``heading_*_deg``: direction of the net displacement, atan2(dy, dx), and
  their difference wrapped to (-180, 180];
* ``speed_*_m_s``: the **net speed**, net displacement / duration;
  ``path_speed_*_m_s``: the **speed along the path**, path length / duration;
* ``turning_rate_*_deg_s``: the heading of travel's rate of change, the slope
  of a least-squares line through the headings of consecutive
  :data:`TURN_CHORD_S` s chords (None under two chords);
* ``duration_s``; ``samples``;
* ``windows``: the paper's horizon, the same metrics over consecutive
  :data:`WINDOW_S` s windows (a last one shorter than 90 % of it dropped),
  each with the model translated to start where the experiment starts;
  ``window_summary``: their mean and standard deviation.

Over a long trial the net displacement and the net speed say little (a robot
that went round a circle has a small net displacement); the path length, the
speed along the path, the turning rate and the windows say what happened.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aiko.model.errors import AikoError

__all__ = ["Paths", "ComparisonError", "compare_paths", "comparison_figure", "save_comparison",
           "paths_from_trial", "METRIC_KEYS"]

METRIC_KEYS = ("final_error_m", "rms_error_m", "distance_experiment_m", "distance_model_m",
               "distance_ratio", "heading_experiment_deg", "heading_model_deg",
               "heading_difference_deg", "speed_experiment_m_s", "speed_model_m_s", "duration_s",
               "path_experiment_m", "path_model_m", "samples", "path_ratio",
               "path_speed_experiment_m_s", "path_speed_model_m_s",
               "turning_rate_experiment_deg_s", "turning_rate_model_deg_s")

PATH_STEP_S = 0.5
"""Resampling step of the path length, s."""
TURN_CHORD_S = 5.0
"""Chord of the turning rate's headings, s."""
WINDOW_S = 15.0
"""The windows' length, s: the paper's trials (VIII)."""
WINDOW_SUMMARY_KEYS = ("rms_error_m", "final_error_m", "distance_ratio", "path_ratio",
                       "heading_difference_deg")


class ComparisonError(AikoError):
    def __init__(self, reason: str) -> None:
        super().__init__(f"comparison: {reason}")


@dataclass(frozen=True)
class Paths:
    """Link 6 of the experiment and of the model: times (k,) s on the trial
    clock and positions (k, 3) m. Experiment rows with NaN (occluded) are
    dropped by :func:`compare_paths`."""

    t_experiment: np.ndarray
    p_experiment: np.ndarray
    t_model: np.ndarray
    p_model: np.ndarray


def _clean(t, p) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(t, dtype=float).reshape(-1)
    p = np.asarray(p, dtype=float).reshape(-1, 3)
    ok = np.isfinite(t) & np.all(np.isfinite(p[:, :2]), axis=1)
    t, p = t[ok], p[ok]
    order = np.argsort(t, kind="stable")
    t, p = t[order], p[order]
    keep = np.concatenate([[True], np.diff(t) > 0]) if t.size else np.zeros(0, bool)
    return t[keep], p[keep]


def _heading(d: np.ndarray) -> float:
    return math.degrees(math.atan2(d[1], d[0]))


def path_length(t: np.ndarray, p: np.ndarray, step: float = PATH_STEP_S) -> float:
    """Length (m) of the (x, y) path ``p`` (k, 2) sampled at ``t`` (k,),
    resampled every ``step`` s (and at its end)."""
    if t.size < 2:
        return 0.0
    ts = np.append(np.arange(t[0], t[-1], step), t[-1])
    xy = np.column_stack([np.interp(ts, t, p[:, 0]), np.interp(ts, t, p[:, 1])])
    return float(np.hypot(*np.diff(xy, axis=0).T).sum())


def turning_rate(t: np.ndarray, p: np.ndarray, chord: float = TURN_CHORD_S) -> float | None:
    """The heading of travel's rate of change (deg/s): headings of consecutive
    ``chord`` s displacements, unwrapped, and the slope of the least-squares
    line through them against the chords' mid times; None under two chords."""
    k = int((t[-1] - t[0]) // chord) if t.size >= 2 else 0
    if k < 2:
        return None
    edges = t[0] + chord * np.arange(k + 1)
    xy = np.column_stack([np.interp(edges, t, p[:, 0]), np.interp(edges, t, p[:, 1])])
    d = np.diff(xy, axis=0)
    heading = np.degrees(np.unwrap(np.arctan2(d[:, 1], d[:, 0])))
    return float(np.polyfit(edges[:-1] + 0.5 * chord, heading, 1)[0])


def _span_metrics(t: np.ndarray, e: np.ndarray, m: np.ndarray) -> dict:
    """The metrics of one span: t (k,), experiment and model (k, 2) at t."""
    err = np.hypot(*(e - m).T)
    duration = float(t[-1] - t[0])
    de, dm = e[-1] - e[0], m[-1] - m[0]
    dist_e, dist_m = float(np.hypot(*de)), float(np.hypot(*dm))
    he, hm = _heading(de), _heading(dm)
    diff = (hm - he + 180.0) % 360.0 - 180.0
    if diff == -180.0:
        diff = 180.0
    path_e, path_m = path_length(t, e), path_length(t, m)
    return {
        "final_error_m": float(err[-1]),
        "rms_error_m": float(np.sqrt(np.mean(err ** 2))),
        "distance_experiment_m": dist_e,
        "distance_model_m": dist_m,
        "distance_ratio": dist_m / dist_e if dist_e > 0 else math.inf,
        "heading_experiment_deg": he,
        "heading_model_deg": hm,
        "heading_difference_deg": diff,
        "speed_experiment_m_s": dist_e / duration if duration > 0 else 0.0,
        "speed_model_m_s": dist_m / duration if duration > 0 else 0.0,
        "duration_s": duration,
        "path_experiment_m": path_e,
        "path_model_m": path_m,
        "path_ratio": path_m / path_e if path_e > 0 else math.inf,
        "path_speed_experiment_m_s": path_e / duration if duration > 0 else 0.0,
        "path_speed_model_m_s": path_m / duration if duration > 0 else 0.0,
        "turning_rate_experiment_deg_s": turning_rate(t, e),
        "turning_rate_model_deg_s": turning_rate(t, m),
        "samples": int(t.size),
        "t_start": float(t[0]),
        "t_end": float(t[-1]),
    }


def _windows(t: np.ndarray, e: np.ndarray, m: np.ndarray) -> list[dict]:
    """The metrics over consecutive WINDOW_S windows, the model translated to
    the experiment's position at each window's start."""
    out = []
    start = t[0]
    while t[-1] - start >= 0.9 * WINDOW_S:
        sel = (t >= start - 1e-9) & (t <= start + WINDOW_S + 1e-9)
        if sel.sum() >= 2:
            ew, mw = e[sel], m[sel]
            out.append(_span_metrics(t[sel], ew, mw - mw[0] + ew[0]))
        start += WINDOW_S
    return out


def _summary(windows: list[dict]) -> dict:
    out: dict[str, Any] = {"windows": len(windows), "window_s": WINDOW_S}
    for key in WINDOW_SUMMARY_KEYS:
        v = np.array([w[key] for w in windows], dtype=float)
        v = v[np.isfinite(v)]
        out[key] = ({"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else 0.0}
                    if v.size else None)
    return out


def compare_paths(paths: Paths) -> dict:
    """The metrics of the module docstring; ComparisonError if the two do not
    share at least two sample times' span."""
    te, pe = _clean(paths.t_experiment, paths.p_experiment)
    tm, pm = _clean(paths.t_model, paths.p_model)
    if te.size < 2:
        raise ComparisonError(f"{te.size} usable motion-capture samples (need 2)")
    if tm.size < 2:
        raise ComparisonError(f"{tm.size} model samples (need 2)")
    lo, hi = max(te[0], tm[0]), min(te[-1], tm[-1])
    sel = (te >= lo - 1e-9) & (te <= hi + 1e-9)
    if sel.sum() < 2 or hi <= lo:
        raise ComparisonError("the experiment and the model do not overlap in time")
    t = te[sel]
    e = pe[sel, :2]
    m = np.column_stack([np.interp(t, tm, pm[:, 0]), np.interp(t, tm, pm[:, 1])])
    out = _span_metrics(t, e, m)
    windows = _windows(t, e, m)
    out["windows"] = windows
    out["window_summary"] = _summary(windows) if windows else None
    return out


def comparison_figure(paths: Paths, title: str, metrics: dict | None = None,
                      model_label: str = "model", scene=None, snake=None):
    """A matplotlib Figure: x(t) and y(t) of link 6 on the left, the (x, y) path
    on the right; experiment solid, model dashed; start and end marked. With
    no experiment samples (``aiko simulate``) only the model is drawn.
    ``scene`` (:class:`aiko.model.scene.Scene`): its pegs and steps drawn in
    the path's panel (the panel widens to hold the pegs near the path);
    ``snake`` (n, 2): the links' centres at the end, drawn as a line."""
    from matplotlib.figure import Figure

    te, pe = _clean(paths.t_experiment, paths.p_experiment)
    tm, pm = _clean(paths.t_model, paths.p_model)
    t_ref = min(te[0] if te.size else math.inf, tm[0] if tm.size else math.inf)
    t_ref = 0.0 if not math.isfinite(t_ref) else t_ref
    windows = (metrics or {}).get("windows") or []
    panel = len(windows) >= 2
    fig = Figure(figsize=(11, 8.4 if panel else 6.2))
    grid = fig.add_gridspec(4 if panel else 2, 2, width_ratios=(1.15, 1))  # row 2: a gap
    ax_x = fig.add_subplot(grid[0, 0])
    ax_y = fig.add_subplot(grid[1, 0], sharex=ax_x)
    ax_p = fig.add_subplot(grid[:2, 1])
    beside = [ax_x, ax_y]          # the axes whose tick labels the left margin holds
    right_axis = None
    if panel:
        ax_w = fig.add_subplot(grid[3, :])
        right_axis = _draw_windows(ax_w, windows, t_ref)
        beside.append(ax_w)
    exp_style: dict[str, Any] = {"color": "#1f4e9c", "lw": 1.8, "label": "experiment (motion capture)"}
    mod_style: dict[str, Any] = {"color": "#d1495b", "lw": 1.8, "ls": "--", "label": model_label}
    if not te.size:
        exp_style = {**exp_style, "label": None}
        mod_style = {**mod_style, "ls": "-"}
    for ax, k, name in ((ax_x, 0, "x"), (ax_y, 1, "y")):
        if te.size:
            ax.plot(te - t_ref, pe[:, k], **exp_style)
        ax.plot(tm - t_ref, pm[:, k], **mod_style)
        ax.set_ylabel(f"{name} [m]")
        ax.grid(True, alpha=0.3)
    ax_x.tick_params(labelbottom=False)
    ax_y.set_xlabel("t [s]")
    ax_x.set_title("link 6 position")
    if te.size:
        ax_p.plot(pe[:, 0], pe[:, 1], **exp_style)
    ax_p.plot(pm[:, 0], pm[:, 1], **mod_style)
    for p, color in ((pe, exp_style["color"]), (pm, mod_style["color"])):
        if p.shape[0]:
            ax_p.plot(*p[0, :2], "o", color=color, ms=7, mfc="white", mew=2)
            ax_p.plot(*p[-1, :2], "s", color=color, ms=7)
    if snake is not None:
        ax_p.plot(snake[:, 0], snake[:, 1], "-o", color="0.45", ms=3, lw=1.2,
                  label="snake at the end")
    if scene is not None and not scene.empty:
        _draw_scene(ax_p, scene, np.vstack([p[:, :2] for p in (pe, pm) if p.shape[0]]
                                           + ([snake] if snake is not None else [])))
    ax_p.plot([], [], "o", color="0.3", mfc="white", mew=2, label="start", ls="none")
    ax_p.plot([], [], "s", color="0.3", label="end", ls="none")
    ax_p.set_xlabel("x [m]")
    ax_p.set_ylabel("y [m]")
    ax_p.set_aspect("equal", adjustable="datalim")
    ax_p.grid(True, alpha=0.3)
    ax_p.set_title("path of link 6 (x, y)")
    handles, labels = ax_p.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncols=4,
               fontsize=9, frameon=False)
    if metrics:
        text = (f"final error {100 * metrics['final_error_m']:.1f} cm, "
                f"RMS {100 * metrics['rms_error_m']:.1f} cm\n"   # one line: wider than the figure
                + f"net displacement: experiment {metrics['distance_experiment_m']:.3f} m, "
                f"model {metrics['distance_model_m']:.3f} m "
                f"(ratio {metrics['distance_ratio']:.2f});  "
                + (f"path length ratio {metrics['path_ratio']:.2f};  "
                   if "path_ratio" in metrics else "")
                + f"heading difference {metrics['heading_difference_deg']:+.1f} deg")
        title = f"{title}\n{text}"
    fig.suptitle(title, fontsize=11)
    _place(fig, grid, title.count("\n") + 1, math.ceil(len(labels) / 4),
           max(_tick_labels_in(ax) for ax in beside), _tick_labels_in(ax_p),
           None if right_axis is None else _tick_labels_in(right_axis))
    return fig


_MARGIN_IN = {"axis_label": 0.4, "right_axis_label": 0.3, "char": 0.088, "right": 0.1,
              "rows": 0.13, "panel": 0.94, "top": 0.4, "title_line": 0.2, "bottom": 0.57,
              "legend_row": 0.22}
"""The comparison figure's margins and gaps, inches, at matplotlib's default
sizes: beside a y axis its label and ticks plus its tick labels' width (a
character of 10 pt; the windows' panel's right axis sets its label closer);
a line of the title, a row of the figure's legend, the gap above the
windows' panel (its title and legend). Laid out by hand, to what the
constrained layout gave: that layout measured every tick label at each of
savefig's two draws, 40 % of the figure's cost."""


def _tick_labels_in(ax) -> float:
    """The width of ``ax``'s widest y tick label, inches, from its characters."""
    lo, hi = sorted(ax.get_ylim())
    ticks = [t for t in ax.get_yticks() if lo <= t <= hi]
    texts = ax.yaxis.get_major_formatter().format_ticks(ticks) if ticks else ["0"]
    return _MARGIN_IN["char"] * max(len(t) for t in texts)


def _place(fig, grid, title_lines: int, legend_rows: int, left_labels: float,
           path_labels: float, right_labels: float | None) -> None:
    """Margins and gaps of :func:`comparison_figure`'s grid (2 x 2, or with
    the windows' panel 4 x 2: the paths, a gap, the panel) from
    :data:`_MARGIN_IN`, for a title of ``title_lines`` lines, a legend of
    ``legend_rows`` rows and y tick labels as wide as given (inches: the left
    column's, the path's, the panel's right axis's or None); the axes moved
    there."""
    m = _MARGIN_IN
    w, h = fig.get_size_inches()
    n = grid.get_geometry()[0]
    top = m["top"] + m["title_line"] * title_lines
    bottom = m["bottom"] + m["legend_row"] * legend_rows
    left = m["axis_label"] + left_labels
    columns = m["axis_label"] + path_labels
    right = m["right"] if right_labels is None else m["right_axis_label"] + right_labels
    free = h - top - bottom - (n - 1) * m["rows"]
    if n == 4:   # the paths' two rows, the gap to the panel, the panel (0.8 of a row)
        gap = m["panel"] - 2 * m["rows"]
        row = (free - gap) / 2.8
        heights = [row, row, gap, 0.8 * row]
    else:
        heights = [free / 2] * 2
    grid.set_height_ratios(heights)
    width = (w - left - right - columns) / 2
    grid.update(left=left / w, right=1.0 - right / w, top=1.0 - top / h,
                bottom=bottom / h, wspace=columns / width,
                hspace=m["rows"] / (sum(heights) / n))
    for ax in fig.axes:
        ax.set_position(ax.get_subplotspec().get_position(fig))


def _draw_windows(ax, windows: list[dict], t_ref: float):
    """Per window (its start on the time axis): RMS and final position error
    (cm, bars) and the path length and net displacement ratios (lines, right
    axis, returned)."""
    t0 = np.array([w["t_start"] for w in windows]) - t_ref
    width = 0.35 * WINDOW_S
    mid = t0 + 0.5 * WINDOW_S
    ax.bar(mid - width, [100 * w["rms_error_m"] for w in windows], width, align="edge",
           color="#8fa8d8", label="RMS error")
    ax.bar(mid, [100 * w["final_error_m"] for w in windows], width, align="edge",
           color="#1f4e9c", label="error at the window's end")
    ax.set_ylabel("position error [cm]")
    ax.set_xlabel(f"window start [s] (each {WINDOW_S:g} s, the model moved to start "
                  "where the experiment does)")
    ax.set_xticks(t0)
    ax.grid(True, axis="y", alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(mid, [w["path_ratio"] for w in windows], "o-", color="#d1495b",
             label="path length ratio (model / experiment)")
    ax2.plot(mid, [w["distance_ratio"] for w in windows], "s--", color="#e8a33d",
             label="net displacement ratio")
    ax2.axhline(1.0, color="0.5", lw=0.8)
    ax2.set_ylabel("ratio")
    handles = ax.get_legend_handles_labels()
    more = ax2.get_legend_handles_labels()
    ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize=8, ncols=4,
              loc="lower left", bbox_to_anchor=(0.0, 1.0), frameon=False)
    ax.set_title("over the paper's horizon: consecutive windows", pad=20)
    return ax2


def _draw_scene(ax, scene, near: np.ndarray, margin: float = 0.35) -> None:
    """Pegs as filled circles and steps as hatched bands rising to +x, those
    within ``margin`` (m) of the points ``near`` (k, 2)."""
    from matplotlib.patches import Circle, Rectangle

    lo = near.min(axis=0) - margin if near.size else np.array([-1.0, -1.0])
    hi = near.max(axis=0) + margin if near.size else np.array([1.0, 1.0])
    first = True
    for peg in scene.pegs:
        if lo[0] <= peg.x <= hi[0] and lo[1] <= peg.y <= hi[1]:
            ax.add_patch(Circle((peg.x, peg.y), peg.radius, color="#6b8e23", alpha=0.75,
                                label="peg" if first else None))
            first = False
    level = 0.0
    steps = sorted(scene.steps, key=lambda s: s.x0)
    for k, st in enumerate(steps):
        level += st.height
        x1 = steps[k + 1].x0 if k + 1 < len(steps) else hi[0]
        if st.x0 > hi[0]:
            break
        ax.add_patch(Rectangle((st.x0, lo[1]), max(x1 - st.x0, 0.0), hi[1] - lo[1],
                               facecolor="#b08968", alpha=0.12 + 0.1 * min(k, 3),
                               edgecolor="#7f5539", hatch="//", lw=0.0,
                               label="step" if k == 0 else None))
        ax.axvline(st.x0, color="#7f5539", lw=1.2)
        ax.annotate(f"+{100 * level:g} cm", (st.x0, hi[1]), xytext=(3, -12),
                    textcoords="offset points", fontsize=8, color="#7f5539")
    ax.update_datalim(np.array([lo, hi]))
    ax.autoscale_view()


def load_figure_library() -> None:
    """Import what drawing and saving the comparison figure needs (about 0.6 s
    on the 2-core machine), at a moment of the caller's choosing: a trial
    does it while its child processes start, not after its end."""
    import matplotlib.backends.backend_agg  # noqa: F401 - savefig's renderer
    import matplotlib.figure  # noqa: F401
    import matplotlib.patches  # noqa: F401


def save_comparison(trial_path: Path, paths: Paths, title: str,
                    metrics: dict, scene=None) -> tuple[Path, Path]:
    """Write ``TRIAL.png`` and ``TRIAL.json`` beside the trial file; the
    figure draws the scene's obstacles."""
    trial_path = Path(trial_path)
    png = trial_path.with_suffix(".png")
    js = trial_path.with_suffix(".json")
    comparison_figure(paths, title, metrics, scene=scene).savefig(png, dpi=110)
    js.write_text(json.dumps(metrics, indent=2) + "\n")
    return png, js


def paths_from_trial(data) -> Paths:
    """Link 6 of the experiment (/mocap) and of the model (/model) of a loaded
    trial (:class:`aiko.experiments.files.triallog.TrialData`)."""
    tracked = data.tracked()
    te = [t for t, _ in tracked]
    pe = [p for _, p in tracked]
    mod = data.records.get("/model", [])
    tm = [d["t"] for _, d in mod]
    pm = [(d["x"], d["y"], d["z"]) for _, d in mod]
    return Paths(np.array(te), np.array(pe).reshape(-1, 3), np.array(tm),
                 np.array(pm).reshape(-1, 3))
