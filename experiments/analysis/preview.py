"""A kinematic first look at a head path: the snake's chain dragged along it
by the tractrix (:mod:`aiko.model.tractrix`), and its figure.

The snake starts straight with its head at the path's first waypoint and its
body behind it, against the first segment's direction; its head then moves
along the waypoints in straight steps of ``step`` m and every link follows
on its tractrix. Nothing here is dynamics: a body that only follows its head
does not propel itself on a flat floor, so this shows where the links would
pass, not whether a gait gets there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from aiko.model import SnakeParams
from aiko.model.tractrix import drag_along

__all__ = ["Preview", "preview_path", "preview_figure"]


@dataclass(frozen=True)
class Preview:
    """postures (m + 1, n + 1, 3): the joint points at each step (point 0 the
    head's front end); s (m + 1,): the head's distance along the path, m;
    waypoints (k, 2); compute_s: the wall time of the tractrix, s."""

    postures: np.ndarray
    s: np.ndarray
    waypoints: np.ndarray
    compute_s: float

    def length_error(self) -> float:
        """Largest change of any segment's length over the whole drag, m."""
        seg = np.linalg.norm(np.diff(self.postures, axis=1), axis=2)
        return float(np.max(np.abs(seg - seg[0])))


def preview_path(waypoints, params: SnakeParams | None = None, step: float = 0.01
                 ) -> Preview:
    """Drag the snake of ``params`` (default: Aiko) along the waypoints (k, 2)."""
    params = SnakeParams() if params is None else params
    w = np.asarray(waypoints, dtype=float)
    if w.ndim != 2 or w.shape[1] != 2 or len(w) < 2:
        raise ValueError("a path needs at least two (x, y) waypoints")
    d = w[1] - w[0]
    d = d / np.hypot(*d)
    k = np.arange(params.n + 1)[:, None]
    start = np.column_stack([w[0] - k[:, 0:1] * params.L * d, np.zeros(params.n + 1)])
    t0 = time.perf_counter()
    postures = drag_along(start, w[1:], step)
    compute = time.perf_counter() - t0
    heads = postures[:, 0, :2]
    s = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(heads, axis=0).T))])
    return Preview(postures, s, w, compute)


def preview_figure(p: Preview, title: str, every: float = 0.25):
    """Postures every ``every`` m of the head's travel, coloured from the
    start (light) to the end (dark), the head's path and the tail's."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 7), layout="constrained")
    marks = np.searchsorted(p.s, np.arange(0.0, p.s[-1] + 1e-9, every))
    marks = np.unique(np.append(marks, len(p.s) - 1))
    cmap = plt.get_cmap("viridis_r")
    for j, i in enumerate(marks):
        c = cmap(0.15 + 0.85 * j / max(1, len(marks) - 1))
        pts = p.postures[i]
        ax.plot(pts[:, 0], pts[:, 1], "-", color=c, lw=2.0, alpha=0.9, marker=".", ms=5)
        ax.plot(pts[0, 0], pts[0, 1], ">", color=c, ms=6)
    ax.plot(p.waypoints[:, 0], p.waypoints[:, 1], ":", color="#c8102e", lw=1.5, marker="s",
            ms=4, label="head path (waypoints)")
    ax.plot(p.postures[:, -1, 0], p.postures[:, -1, 1], "--", color="#e07000", lw=1.6,
            label="tail's path")
    ax.plot([], [], "-", color=cmap(0.6), label=f"postures every {100 * every:g} cm of travel "
                                                "(dark: later)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(alpha=0.3)
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.legend(loc="best", fontsize=8)
    ax.set_title(f"{title}\nkinematic preview (tractrix): the links follow the head; no "
                 "dynamics, no friction", fontsize=10)
    return fig
