"""Start postures laid along a planar curve (``aiko simulate --start-curve``).

A curve file is one of::

    [curve]                                  # a polyline: the head at its first
    polyline = [[0.0, 0.0], [0.6, 0.0], [1.2, 0.5]]   # point, the body along it, m

    [curve]                                  # a circle arc
    arc = { center = [0.0, 0.5], radius = 0.5, start_deg = -90.0, direction = "ccw" }
                                             # the head at start_deg on the circle, the
                                             # body running ccw or cw from it

    [curve]                                  # the gait's own curve: its joint
    gait = true                              # angles at t = 0

Every joint of the snake lies on the curve (consecutive joints one link
length apart), the snake flat on the ground at rest. Errors (a curve too
short or too tight, joint angles beyond the joint limits, unknown keys) name
the key.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from aiko.control.gait import JOINT_LIMIT, Gait, references
from aiko.model import SnakeParams
from aiko.model.errors import AikoError, StateError
from aiko.model.posture import (
    joint_points_on_arc,
    joint_points_on_polyline,
    planar_joint_angles,
    posture_along,
)

from .tomlfile import number, pair, read_table

__all__ = ["CurveError", "load_start_curve", "start_q"]


class CurveError(AikoError, ValueError):
    def __init__(self, source: str, reason: str, key: str | None = None) -> None:
        self.source, self.reason, self.key = source, reason, key
        super().__init__(f"{source}: {key}: {reason}" if key else f"{source}: {reason}")


def load_start_curve(path: str | Path) -> dict:
    """The curve of a file (module docstring) as a dict: ``{"polyline": (k, 2)}``,
    ``{"arc": {...}}`` or ``{"gait": True}``."""
    src = str(path)
    c = read_table(path, "curve", ("polyline", "arc", "gait"), CurveError)
    if len(c) != 1:
        raise CurveError(src, "give exactly one of polyline, arc, gait", "curve")
    if "gait" in c:
        if c["gait"] is not True:
            raise CurveError(src, "must be true", "curve.gait")
        return {"gait": True}
    if "polyline" in c:
        v = c["polyline"]
        if not isinstance(v, list) or len(v) < 2:
            raise CurveError(src, "needs at least two [x, y] points", "curve.polyline")
        return {"polyline": np.array([pair(w, src, f"curve.polyline[{i}]", CurveError)
                                      for i, w in enumerate(v)])}
    a = c["arc"]
    if not isinstance(a, dict):
        raise CurveError(src, "must be a table", "curve.arc")
    for key in a:
        if key not in ("center", "radius", "start_deg", "direction"):
            raise CurveError(src, "unknown key", f"curve.arc.{key}")
    for key in ("center", "radius"):
        if key not in a:
            raise CurveError(src, "missing", f"curve.arc.{key}")
    r = number(a["radius"], src, "curve.arc.radius", CurveError)
    start = number(a.get("start_deg", -90.0), src, "curve.arc.start_deg", CurveError)
    if r <= 0:
        raise CurveError(src, f"must be > 0, got {r!r}", "curve.arc.radius")
    direction = a.get("direction", "ccw")
    if direction not in ("ccw", "cw"):
        raise CurveError(src, f"must be 'ccw' or 'cw', got {direction!r}",
                         "curve.arc.direction")
    return {"arc": {"center": pair(a["center"], src, "curve.arc.center", CurveError),
                    "radius": r, "start_deg": start, "ccw": direction == "ccw"}}


def start_q(curve: dict, params: SnakeParams, gait: Gait | None = None,
            source: str = "curve") -> np.ndarray:
    """Coordinates q (n, 7) of the snake laid along ``curve``; CurveError if
    it cannot be (too short, too tight, beyond the joint limits)."""
    if "gait" in curve:
        if gait is None:
            raise CurveError(source, "the gait's curve needs a gait", "curve.gait")
        r0 = references(gait, 0.0, params.n - 1)
        from aiko.model.posture import posture_from_joint_angles
        return posture_from_joint_angles(params, r0[:, 0], r0[:, 1])
    try:
        if "polyline" in curve:
            pts = joint_points_on_polyline(curve["polyline"], params.L, params.n)
        else:
            a = curve["arc"]
            pts = joint_points_on_arc(a["center"], a["radius"], a["start_deg"], a["ccw"],
                                      params.L, params.n)
    except StateError as exc:
        raise CurveError(source, exc.reason, "curve") from None
    ah = planar_joint_angles(pts)
    worst = int(np.argmax(np.abs(ah)))
    if abs(ah[worst]) > JOINT_LIMIT + 1e-9:
        raise CurveError(source, f"joint {worst + 1} would bend {math.degrees(ah[worst]):+.1f} "
                         f"deg, beyond the joint limit of {math.degrees(JOINT_LIMIT):.0f} deg",
                         "curve")
    return posture_along(params, pts)
