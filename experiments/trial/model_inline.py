"""The parallel model in the trial's own process, for virtual time: the same
:class:`~aiko.experiments.rig.parallel_model.ParallelModel` the model process
runs, stepped where the references arrive, behind the interface of
:class:`~aiko.experiments.trial.model_link.ModelLink`.

Each period's references simulate the model up to their send time with the
previous period's (as the process does); its samples go to ``on_sample`` at
once, with their lag on the trial clock (up to one period: a sample is made
when the references after it arrive). In virtual time the trial's clock does
not move while the model steps, so the model never falls behind the trial;
the same trial gives the same samples on any machine.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import numpy as np

from aiko.experiments.rig.parallel_model import ModelSample, ParallelModel
from aiko.model import SnakeModel
from aiko.model.errors import AikoError

from .model_link import ModelSamples

__all__ = ["InlineModel"]

log = logging.getLogger(__name__)


class InlineModel(ModelSamples):
    """See the module docstring; ``rate``: samples a second of trial time."""

    def __init__(self, model: SnakeModel, clock, rate: float = 20.0,
                 on_sample: Callable[[float, np.ndarray, float], None] | None = None,
                 on_event: Callable[[str, dict], None] | None = None) -> None:
        super().__init__(clock, on_sample, on_event)
        self.pm = ParallelModel(model, rate)
        self._ended = asyncio.Event()

    @property
    def alive(self) -> bool:
        return self.stopped is None

    def _emit(self, samples: list[ModelSample]) -> None:
        for s in samples:
            self.took(s.t, np.asarray(s.positions, dtype=float))

    def _guarded(self, step: Callable[[], list[ModelSample]]) -> None:
        """A step of the model; a failure stops the model, never the trial."""
        if self.stopped is not None or self.done is not None:
            return
        try:
            self._emit(step())
        except AikoError as exc:
            self.stopped = str(exc)
            log.warning("parallel model stopped: %s", exc)
            self.on_event("model_error", {"error": str(exc)})
            self.on_event("model_stopped", {"reason": str(exc), "pid": None})
            self._ended.set()

    def start(self, t0: float, q0: np.ndarray, source: str) -> None:
        self.started = True
        self.on_event("model_started", {"t0": t0, "start": source,
                                        "q0": np.asarray(q0, dtype=float).tolist()})
        self._guarded(lambda: self.pm.start(t0, q0))

    def send_refs(self, t: float, refs: np.ndarray) -> None:
        self._guarded(lambda: self.pm.add_refs(t, refs))

    def end(self, t_end: float) -> None:
        """The references end at ``t_end``: simulate up to there; once."""
        if not self.started or self.done is not None:
            return
        self._guarded(lambda: self.pm.finish(t_end))
        if self.stopped is None:   # its wall time stays out of the records
            self.done = {k: v for k, v in self.pm.stats().items() if k != "wall_s"}
            self.on_event("model_done", self.done)
        self._ended.set()

    async def run(self) -> None:
        """Wait until the model is done or stopped (the trial's ``model`` task;
        the stepping happens where the references arrive)."""
        await self._ended.wait()

    async def finish(self, t_end: float, timeout: float = 120.0) -> bool:
        """Simulate to ``t_end`` unless :meth:`end` did; True once done."""
        if not self.started or self.stopped is not None:
            return False
        self.end(t_end)
        return self.done is not None

    def summary(self) -> dict:
        return {**super().summary(), "pid": None, "wall_s": self.pm.wall}
