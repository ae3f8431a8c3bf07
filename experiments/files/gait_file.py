"""Gait files (``aiko run FILE.toml``, ``--gait FILE.toml``): the parameters of
(70)-(71) written by hand in degrees and degrees per second.

A gait file (every key of (70)-(71) is required, the rest optional)::

    [gait]
    A_h = 30.0          # deg
    omega_h = 80.0      # deg/s
    delta_h = -50.0     # deg
    psi_h = 0.0
    A_v = 10.0
    omega_v = 80.0
    delta_v = -50.0
    delta_0 = 90.0
    psi_v = 0.0
    soft_start = true   # VIII-E (default false)
    start = "straight"  # or "curved": the joint angles of t = 0 (default straight)
    offset = 0.0        # deg, optional: the steering offset phi_0 added to every
                        # horizontal joint (default 0; a controller may set it)
    [friction]          # optional
    mu_x = 0.2
    mu_y = 0.2
"""

from __future__ import annotations

import math
from pathlib import Path

from aiko.control.gait import ANGLE_KEYS, PRESETS, Gait, GaitError

from .tomlfile import number, read_toml

__all__ = ["get_gait", "load_gait_toml"]


def load_gait_toml(path: str | Path) -> Gait:
    """Read a gait file (see the module docstring); errors name the key."""
    path = Path(path)
    src = str(path)
    doc = read_toml(path, GaitError)
    for table in doc:
        if table not in ("gait", "friction"):
            raise GaitError(src, "unknown table", table)
    gait = doc.get("gait")
    if not isinstance(gait, dict):
        raise GaitError(src, "missing table [gait]", "gait")
    for key in gait:
        if key not in (*ANGLE_KEYS, "offset", "soft_start", "start"):
            raise GaitError(src, "unknown key", f"gait.{key}")
    for key in ANGLE_KEYS:
        if key not in gait:
            raise GaitError(src, "missing required key", f"gait.{key}")
        number(gait[key], src, f"gait.{key}", GaitError)
    friction = doc.get("friction", {})
    if not isinstance(friction, dict):
        raise GaitError(src, "must be a table", "friction")
    for key in friction:
        if key not in ("mu_x", "mu_y"):
            raise GaitError(src, "unknown key", f"friction.{key}")
    kw = {k: math.radians(float(gait[k])) for k in ANGLE_KEYS}
    kw["offset"] = math.radians(number(gait.get("offset", 0.0), src, "gait.offset", GaitError))
    try:
        return Gait(**kw, soft_start=gait.get("soft_start", False),
                    start=gait.get("start", "straight"),
                    mu_x=friction.get("mu_x"), mu_y=friction.get("mu_y"),
                    name=path.stem)
    except GaitError as exc:
        section = "friction" if exc.key in ("mu_x", "mu_y") else "gait"
        raise GaitError(src, exc.reason, f"{section}.{exc.key}") from None


def get_gait(spec: str) -> Gait:
    """A preset by name, or a gait TOML file by path."""
    if spec in PRESETS:
        return PRESETS[spec]
    if spec.endswith(".toml") or Path(spec).exists():
        return load_gait_toml(spec)
    raise GaitError(spec, f"unknown gait (presets: {', '.join(PRESETS)}; or a .toml file)")
