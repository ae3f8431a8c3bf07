"""aiko.model: the non-smooth 3D snake model of Transeth et al. (2008).

Pure: no I/O, no asyncio, no logging set-up. Imports nothing of the other aiko
packages.
"""

from .errors import AikoError, JointReferenceError, ParameterError, StateError
from .params import CONTACT_LAWS, DRIVES, SOLVERS, SnakeParams, SolverParams
from .scene import SCENE_PRESETS, Peg, Scene, SceneError, Step
from .simulation import (
                         ConvergenceWarning,
                         SnakeModel,
                         SnakeState,
                         StepStats,
                         kernels_cached,
                         warm_up,
)

__all__ = [
    "AikoError", "ParameterError", "StateError", "JointReferenceError",
    "SnakeParams", "SolverParams", "SOLVERS", "CONTACT_LAWS", "DRIVES",
    "SnakeModel", "SnakeState", "StepStats", "ConvergenceWarning", "kernels_cached", "warm_up",
    "Scene", "Peg", "Step", "SceneError", "SCENE_PRESETS",
]
