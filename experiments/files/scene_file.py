"""Scene files (``--scene FILE.toml`` or a preset name) for `aiko simulate`,
`aiko run` and `aiko replay`::

    [[peg]]            # a fixed vertical cylinder standing on the ground
    x = 0.50           # m, its axis
    y = 0.10
    radius = 0.05      # m
    mu = 0.2           # optional: link-peg friction (default: the ground's)
    [[step]]           # the ground rises by `height` for x >= x0
    x0 = 1.0           # m
    height = 0.04      # m

See :mod:`aiko.model.scene`. Errors are one line and name the file and item.
"""

from __future__ import annotations

import json
from pathlib import Path

from aiko.model.scene import SCENE_PRESETS, Scene, SceneError, scene_from_mapping

from .tomlfile import read_toml

__all__ = ["load_scene", "scene_toml", "scene_json", "scene_from_json", "write_scene_beside",
           "check_clear", "StartInsideObstacle"]


def load_scene(spec: str | Path | None) -> Scene:
    """A preset name (:data:`aiko.model.scene.SCENE_PRESETS`) or a TOML
    file; None: the flat floor."""
    if spec is None:
        return Scene()
    text = str(spec)
    if text in SCENE_PRESETS:
        return SCENE_PRESETS[text]
    path = Path(text)
    data = read_toml(path, SceneError,
                     missing=f"no such scene file (presets: {', '.join(SCENE_PRESETS)})")
    try:
        return scene_from_mapping(data, name=path.stem)
    except SceneError as exc:
        raise SceneError(f"{text}: {exc.item}" if exc.item else text, exc.reason) from exc


def _value(v: float) -> str:
    return repr(float(v))


def scene_toml(scene: Scene) -> str:
    """The scene as a scene file (loads back to an equal scene)."""
    lines = [f"# scene {scene.describe()}"]
    for kind, entries in scene.to_mapping().items():
        for entry in entries:
            lines.append("")
            lines.append(f"[[{kind}]]")
            lines += [f"{k} = {_value(v)}" for k, v in entry.items()]
    return "\n".join(lines) + "\n"


def scene_json(scene: Scene) -> str:
    """The scene as one JSON object (for child processes and the trial log)."""
    return json.dumps({"name": scene.name, **scene.to_mapping()})


def scene_from_json(text: str | dict | None) -> Scene:
    """Back from :func:`scene_json` (a string or its parsed object); None or
    an empty object: the flat floor."""
    if text is None:
        return Scene()
    data = json.loads(text) if isinstance(text, str) else dict(text)
    name = data.pop("name", "") or ""
    return scene_from_mapping(data, name=str(name))


def write_scene_beside(path: Path, scene: Scene) -> Path | None:
    """Write ``PATH.scene.toml`` beside an output file; nothing for the flat
    floor. Returns the file written."""
    if scene.empty:
        return None
    out = Path(path).with_suffix(".scene.toml")
    out.write_text(scene_toml(scene))
    return out


class StartInsideObstacle(SceneError):
    """A start posture inside a peg or a step; ``depth`` (m) how deep."""

    def __init__(self, reason: str, depth: float) -> None:
        self.depth = depth
        super().__init__("start posture", reason)


def check_clear(model, state, who: str = "the snake", tol: float = 1e-6) -> None:
    """StartInsideObstacle unless ``state`` (of ``model``, whose scene it is)
    is clear of every obstacle: a snake that starts inside a peg or a step
    stays stuck there (the contact laws act on velocities)."""
    import numpy as np

    scene = model.scene
    if scene.empty:
        return
    gp, gs = model.obstacle_gaps(state)
    ground = model.contact_gaps(state)
    if gp.size and gp.min() < -tol:
        link, k = np.unravel_index(int(np.argmin(gp)), gp.shape)
        x, y = model._pegs[k, :2]
        raise StartInsideObstacle(f"{who} overlaps the peg at ({x:g}, {y:g}) m by "
                                  f"{-1000 * gp.min():.1f} mm (link {link + 1}); start it "
                                  "elsewhere (a curved start, --start-curve) or move the peg",
                                  float(-gp.min()))
    step = min(gs.min() if gs.size else 0.0, ground.min())
    if step < -tol:
        raise StartInsideObstacle(f"{who} starts inside a step by {-1000 * step:.1f} mm; "
                                  "move the step or the start", float(-step))
