"""aiko.model: the non-smooth 3D snake model of Transeth et al. (2008).

Pure: no I/O, no asyncio, no logging set-up. Imports nothing of the other aiko
packages.
"""

from typing import TYPE_CHECKING, Any

from .errors import AikoError, JointReferenceError, ParameterError, StateError
from .params import CONTACT_LAWS, DRIVES, SOLVERS, SnakeParams, SolverParams
from .scene import SCENE_PRESETS, Peg, Scene, SceneError, Step

if TYPE_CHECKING:
    from .simulation import (
                             ConvergenceWarning,
                             SnakeModel,
                             SnakeState,
                             StepStats,
                             kernels_cached,
                             warm_up,
    )

_SIMULATION = frozenset({"ConvergenceWarning", "SnakeModel", "SnakeState", "StepStats",
                         "kernels_cached", "warm_up"})
"""Names of :mod:`.simulation`, imported at their first use: it loads numba
(about half a second), which the errors, parameters and scenes do not need
(every ``aiko`` command imports the errors)."""


def __getattr__(name: str) -> Any:
    if name in _SIMULATION:
        from . import simulation
        return getattr(simulation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "AikoError", "ParameterError", "StateError", "JointReferenceError",
    "SnakeParams", "SolverParams", "SOLVERS", "CONTACT_LAWS", "DRIVES",
    "SnakeModel", "SnakeState", "StepStats", "ConvergenceWarning", "kernels_cached", "warm_up",
    "Scene", "Peg", "Step", "SceneError", "SCENE_PRESETS",
]
