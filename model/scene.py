"""Obstacles on the floor: vertical pegs and steps, as frozen dataclasses.

A :class:`Scene` is part of a :class:`aiko.model.SnakeModel`: every link's
body (the cylinder between its two end spheres, radius ``L_SC``) meets every
peg, every end sphere meets the steps' top faces, risers and edges, with the
same set-valued laws as the ground (normal impulse (47)-(48), (52)-(56);
Coulomb friction (57)-(59), here isotropic and spatial on the obstacle's
surface). Coordinates are the ground-fixed ones of the model (a slope inclines
the scene with the ground).

* :class:`Peg`: a fixed vertical cylinder of ``radius`` standing at (x, y),
  unbounded in height.
* :class:`Step`: the ground rises by ``height`` for x >= ``x0``; several steps
  make a stair (the ground's level at x is the sum of the heights of the steps
  with x0 <= x).

``mu`` of a peg or a step is the friction coefficient between a link and the
obstacle; None takes the ground's (``SnakeParams.mu_x`` and ``mu_y`` when
equal, the smaller of them when the ground is anisotropic).

Pure: building, checking and converting scenes; files are read by the caller
(:func:`scene_from_mapping` takes a parsed TOML table).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import AikoError

__all__ = ["Peg", "Step", "Scene", "SceneError", "scene_from_mapping", "SCENE_PRESETS",
           "pegs_grid"]


class SceneError(AikoError, ValueError):
    """A scene that cannot be used; ``item`` names the peg or step ("peg 2")."""

    def __init__(self, item: str, reason: str) -> None:
        self.item = item
        self.reason = reason
        super().__init__(f"{item}: {reason}" if item else reason)


def _finite(item: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SceneError(item, f"{name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise SceneError(item, f"{name} must be finite, got {value!r}")
    return v


def _mu(item: str, mu: object) -> float | None:
    if mu is None:
        return None
    v = _finite(item, "mu", mu)
    if v < 0:
        raise SceneError(item, f"mu must be >= 0, got {v!r}")
    return v


@dataclass(frozen=True)
class Peg:
    """A vertical cylinder: centre (x, y), m; radius, m; friction mu (None:
    the ground's)."""

    x: float
    y: float
    radius: float
    mu: float | None = None

    def check(self, item: str = "peg") -> None:
        _finite(item, "x", self.x)
        _finite(item, "y", self.y)
        if not _finite(item, "radius", self.radius) > 0:
            raise SceneError(item, f"radius must be > 0, got {self.radius!r}")
        _mu(item, self.mu)


@dataclass(frozen=True)
class Step:
    """The ground rises by ``height`` (m, > 0) for x >= ``x0`` (m); friction mu
    of its riser and edge (None: the ground's)."""

    x0: float
    height: float
    mu: float | None = None

    def check(self, item: str = "step") -> None:
        _finite(item, "x0", self.x0)
        if not _finite(item, "height", self.height) > 0:
            raise SceneError(item, f"height must be > 0, got {self.height!r}")
        _mu(item, self.mu)


@dataclass(frozen=True)
class Scene:
    """Pegs and steps; empty: the paper's flat floor. Checked on creation:
    pegs may not overlap, steps may not share an x0."""

    pegs: tuple[Peg, ...] = ()
    steps: tuple[Step, ...] = ()
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pegs", tuple(self.pegs))
        object.__setattr__(self, "steps", tuple(self.steps))
        for i, p in enumerate(self.pegs, 1):
            if not isinstance(p, Peg):
                raise SceneError(f"peg {i}", f"not a Peg: {p!r}")
            p.check(f"peg {i}")
        for i, s in enumerate(self.steps, 1):
            if not isinstance(s, Step):
                raise SceneError(f"step {i}", f"not a Step: {s!r}")
            s.check(f"step {i}")
        # overlapping pegs: sorted by x, compare with the pegs within reach
        order = sorted(range(len(self.pegs)), key=lambda k: self.pegs[k].x)
        rmax = max((p.radius for p in self.pegs), default=0.0)
        for a, ka in enumerate(order):
            pa = self.pegs[ka]
            for kb in order[a + 1:]:
                pb = self.pegs[kb]
                if pb.x - pa.x > pa.radius + rmax:
                    break
                if math.hypot(pb.x - pa.x, pb.y - pa.y) < pa.radius + pb.radius:
                    i, j = sorted((ka + 1, kb + 1))
                    raise SceneError(f"peg {j}", f"overlaps peg {i}")
        seen: dict[float, int] = {}
        for i, s in enumerate(self.steps, 1):
            if s.x0 in seen:
                raise SceneError(f"step {i}", f"has the same x0 = {s.x0:g} as step {seen[s.x0]}")
            seen[s.x0] = i

    @property
    def empty(self) -> bool:
        return not self.pegs and not self.steps

    def level(self, x) -> np.ndarray:
        """The ground's height at x (any shape), m: the sum of the heights of
        the steps with x0 <= x."""
        x = np.asarray(x, dtype=float)
        out = np.zeros_like(x)
        for s in self.steps:
            out = out + np.where(x >= s.x0, s.height, 0.0)
        return out

    def peg_array(self, ground_mu: float) -> np.ndarray:
        """(pegs, 4) ``[x, y, radius, mu]`` sorted by x (the order of the
        model's peg contact slots); mu None becomes ``ground_mu``."""
        rows = sorted(((p.x, p.y, p.radius, ground_mu if p.mu is None else p.mu)
                       for p in self.pegs), key=lambda r: r[0])
        return np.array(rows, dtype=float).reshape(-1, 4)

    def step_array(self, ground_mu: float) -> np.ndarray:
        """(steps, 4) ``[x0, level below, level above, mu]`` sorted by x0: each
        riser spans the levels below and above it."""
        out = np.zeros((len(self.steps), 4))
        level = 0.0
        for k, s in enumerate(sorted(self.steps, key=lambda s: s.x0)):
            out[k] = (s.x0, level, level + s.height, ground_mu if s.mu is None else s.mu)
            level += s.height
        return out

    def to_mapping(self) -> dict:
        """The scene as the TOML file's tables (``peg``, ``step`` lists)."""
        out: dict = {}
        if self.pegs:
            out["peg"] = [{k: v for k, v in (("x", p.x), ("y", p.y), ("radius", p.radius),
                                             ("mu", p.mu)) if v is not None}
                          for p in self.pegs]
        if self.steps:
            out["step"] = [{k: v for k, v in (("x0", s.x0), ("height", s.height),
                                              ("mu", s.mu)) if v is not None}
                           for s in self.steps]
        return out

    def describe(self) -> str:
        """One line: what the scene holds."""
        if self.empty:
            return "flat floor"
        parts = []
        if self.pegs:
            parts.append(f"{len(self.pegs)} peg{'s' * (len(self.pegs) != 1)}")
        if self.steps:
            total = sum(s.height for s in self.steps)
            parts.append(f"{len(self.steps)} step{'s' * (len(self.steps) != 1)} "
                         f"(rising {100 * total:g} cm)")
        return (f"{self.name}: " if self.name else "") + ", ".join(parts)


_KEYS = {"peg": ("x", "y", "radius", "mu"), "step": ("x0", "height", "mu")}
_REQUIRED = {"peg": ("x", "y", "radius"), "step": ("x0", "height")}


def scene_from_mapping(data: object, name: str = "") -> Scene:
    """A scene from a parsed TOML document: arrays of tables ``[[peg]]`` (x,
    y, radius, optional mu) and ``[[step]]`` (x0, height, optional mu).
    Unknown tables or keys, missing keys, wrong types, non-positive radii or
    heights, overlapping pegs: :class:`SceneError` naming the item."""
    if not isinstance(data, dict):
        raise SceneError("", "a scene is a table of [[peg]] and [[step]] entries")
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise SceneError(unknown[0], "unknown table (a scene has [[peg]] and [[step]])")
    made: dict[str, list] = {"peg": [], "step": []}
    for kind, keys in _KEYS.items():
        entries = data.get(kind, [])
        if isinstance(entries, dict):
            entries = [entries]
        if not isinstance(entries, list):
            raise SceneError(kind, f"must be an array of tables [[{kind}]]")
        for i, entry in enumerate(entries, 1):
            item = f"{kind} {i}"
            if not isinstance(entry, dict):
                raise SceneError(item, f"must be a table, got {entry!r}")
            bad = sorted(set(entry) - set(keys))
            if bad:
                raise SceneError(item, f"unknown key {bad[0]!r} (known: {', '.join(keys)})")
            missing = [k for k in _REQUIRED[kind] if k not in entry]
            if missing:
                raise SceneError(item, f"missing {missing[0]!r}")
            values: dict[str, Any] = {k: (_mu(item, v) if k == "mu" else _finite(item, k, v))
                      for k, v in entry.items()}
            made[kind].append((Peg if kind == "peg" else Step)(**values))
    return Scene(tuple(made["peg"]), tuple(made["step"]), name=name)


def pegs_grid(rows: int = 5, cols: int = 15, spacing_x: float = 0.35, spacing_y: float = 0.30,
              radius: float = 0.02, x0: float = -1.45, y_mid: float = 0.025,
              mu: float | None = None) -> Scene:
    """A regular rectangular field of pegs: ``cols`` columns from ``x0``
    along x at ``spacing_x``, ``rows`` rows along y at ``spacing_y``
    centred on ``y_mid``."""
    pegs = []
    for r in range(rows):
        y = y_mid + (r - 0.5 * (rows - 1)) * spacing_y
        for k in range(cols):
            pegs.append(Peg(round(x0 + k * spacing_x, 9), round(y, 9), radius, mu))
    return Scene(tuple(pegs), name="pegs-grid")


SCENE_PRESETS: dict[str, Scene] = {"pegs-grid": pegs_grid()}
"""Named scenes (``--scene NAME``). ``pegs-grid``: a field of 75 pegs of
4 cm diameter, 0.35 m apart along x and 0.30 m along y (x from -1.45 to
3.45 m, rows at y = -0.575 ... 0.625 m), made for the curved start of
lateral undulation (the preset gait, link 1 at x = 0.5 m): the snake starts
inside it, its first bends about pegs of the middle row (1 cm clear), with
room to travel about 2.5 m forward. The straight snake on the x axis would
lie across the middle row: start it curved, or move the field."""
