"""Timing one gait on the model, shared by the benchmark scripts."""

from __future__ import annotations

import warnings

from aiko.experiments.analysis.simulate import SimulationResult, simulate_gait
from aiko.model import ConvergenceWarning, SnakeModel, StateError

PAPER_PRESETS = ("lateral-undulation", "lateral-undulation-orthotropic", "sidewinding")


def timed_run(model: SnakeModel, gait, duration: float) -> SimulationResult | None:
    """``duration`` s of ``gait`` on ``model``, after ten steps that compile the
    kernels (not timed). Steps at the iteration cap are counted in the result's
    stats, not warned about. None when the run diverges (StateError)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        simulate_gait(model, gait, 10 * model.dt)
        try:
            return simulate_gait(model, gait, duration)
        except StateError:
            return None
