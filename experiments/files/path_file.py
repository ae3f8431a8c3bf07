"""Path files for LOS path following (``aiko run --path FILE.toml``)::

    [path]
    waypoints = [[0.0, 0.3], [3.0, 0.3]]   # m, (x, y) in motion capture's frame
    lookahead = 0.8                        # m, optional: LOS look-ahead distance
    accept = 0.15                          # m, optional: a waypoint counts as reached
                                           # within this distance

At least two waypoints, consecutive ones distinct; errors name the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aiko.model.errors import AikoError

from .tomlfile import number, pair, read_table

__all__ = ["PathSpec", "PathFileError", "load_path_toml"]


class PathFileError(AikoError, ValueError):
    """A path file that cannot be used."""

    def __init__(self, source: str, reason: str, key: str | None = None) -> None:
        self.source, self.reason, self.key = source, reason, key
        where = f"{source}: {key}: " if key else f"{source}: "
        super().__init__(where + reason)


@dataclass(frozen=True)
class PathSpec:
    waypoints: tuple[tuple[float, float], ...]
    lookahead: float = 0.8
    accept: float = 0.15


def load_path_toml(path: str | Path) -> PathSpec:
    """Read a path file (module docstring)."""
    src = str(path)
    table = read_table(path, "path", ("waypoints", "lookahead", "accept"), PathFileError)
    wps = table.get("waypoints")
    if not isinstance(wps, list):
        raise PathFileError(src, "missing or not a list of [x, y] pairs", "path.waypoints")
    if len(wps) < 2:
        raise PathFileError(src, "needs at least two waypoints", "path.waypoints")
    points = []
    for i, w in enumerate(wps):
        key = f"path.waypoints[{i}]"
        points.append(pair(w, src, key, PathFileError))
        if i and points[i] == points[i - 1]:
            raise PathFileError(src, "repeats the waypoint before it", key)
    lookahead = number(table.get("lookahead", 0.8), src, "path.lookahead", PathFileError)
    accept = number(table.get("accept", 0.15), src, "path.accept", PathFileError)
    if lookahead <= 0:
        raise PathFileError(src, f"must be > 0, got {lookahead!r}", "path.lookahead")
    if accept < 0:
        raise PathFileError(src, f"must be >= 0, got {accept!r}", "path.accept")
    return PathSpec(tuple(points), lookahead, accept)
