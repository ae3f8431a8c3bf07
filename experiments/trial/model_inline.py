"""The parallel model in the trial's own process, for virtual time: the same
:class:`~aiko.experiments.rig.parallel_model.ParallelModel` the model process
runs, fed where the references arrive, behind the interface of
:class:`~aiko.experiments.trial.model_link.ModelLink`.

Each period's references simulate the model up to their send time with the
previous period's (as the process does). That simulation runs on the model's
own thread (its compiled steps release the GIL) while the trial and the
simulated Aiko go on with the period, and its samples go to ``on_sample``
when the next period's references arrive (or at the end), with their lag on
the trial clock: up to two periods (a sample is made when the references
after it arrive, and handed on a period later). In virtual time the trial's
clock does not move while the trial waits for the model, so the model never
falls behind the trial; the same trial gives the same samples, at the same
trial times, on any machine.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from aiko.experiments.rig.parallel_model import ModelSample, ParallelModel
from aiko.model import SnakeModel
from aiko.model.errors import AikoError

from .model_link import ModelSamples

__all__ = ["InlineModel"]

log = logging.getLogger(__name__)


class InlineModel(ModelSamples):
    """See the module docstring; ``rate``: samples a second of trial time.
    Owns one worker thread, ended by :meth:`end` or when :meth:`run` ends."""

    def __init__(self, model: SnakeModel, clock, rate: float = 20.0,
                 on_sample: Callable[[float, np.ndarray, float], None] | None = None,
                 on_event: Callable[[str, dict], None] | None = None) -> None:
        super().__init__(clock, on_sample, on_event)
        self.pm = ParallelModel(model, rate)
        self._ended = asyncio.Event()
        self._worker: ThreadPoolExecutor | None = None
        self._pending: Future | None = None

    @property
    def alive(self) -> bool:
        return self.stopped is None

    def _emit(self, samples: list[ModelSample]) -> None:
        for s in samples:
            self.took(s.t, np.asarray(s.positions, dtype=float))

    def _failed(self, exc: AikoError) -> None:
        """A failure stops the model, never the trial."""
        self.stopped = str(exc)
        log.warning("parallel model stopped: %s", exc)
        self.on_event("model_error", {"error": str(exc)})
        self.on_event("model_stopped", {"reason": str(exc), "pid": None})
        self._ended.set()

    def _collect(self) -> None:
        """Wait for the simulation in flight, if any, and hand on its samples."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        try:
            self._emit(pending.result())
        except AikoError as exc:
            self._failed(exc)

    def _running(self) -> bool:
        return self.stopped is None and self.done is None

    def _submit(self, step: Callable[[], list[ModelSample]]) -> None:
        """Collect the last simulation, then start ``step`` on the worker."""
        self._collect()
        if not self._running():
            return
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="parallel-model")
        self._pending = self._worker.submit(step)

    def _close(self) -> None:
        """End the worker, after the simulation in flight (one period at most;
        its samples stay to be collected, by :meth:`end` say)."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=True)

    def start(self, t0: float, q0: np.ndarray, source: str) -> None:
        self.started = True
        self.on_event("model_started", {"t0": t0, "start": source,
                                        "q0": np.asarray(q0, dtype=float).tolist()})
        q = np.array(q0, dtype=float)
        self._submit(lambda: self.pm.start(t0, q))

    def send_refs(self, t: float, refs: np.ndarray) -> None:
        r = np.array(refs, dtype=float)   # the caller's array may change meanwhile
        self._submit(lambda: self.pm.add_refs(t, r))

    def end(self, t_end: float) -> None:
        """The references end at ``t_end``: simulate up to there; once."""
        if not self.started or self.done is not None:
            return
        self._submit(lambda: self.pm.finish(t_end))
        self._collect()
        self._close()
        if self.stopped is None:   # its wall time stays out of the records
            self.done = {k: v for k, v in self.pm.stats().items() if k != "wall_s"}
            self.on_event("model_done", self.done)
        self._ended.set()

    async def run(self) -> None:
        """Wait until the model is done or stopped (the trial's ``model`` task;
        the stepping starts where the references arrive). Ends the worker
        however it ends."""
        try:
            await self._ended.wait()
        finally:
            self._close()

    async def finish(self, t_end: float, timeout: float = 120.0) -> bool:
        """Simulate to ``t_end`` unless :meth:`end` did; True once done."""
        if not self.started or self.stopped is not None:
            return False
        self.end(t_end)
        return self.done is not None

    def summary(self) -> dict:
        return {**super().summary(), "pid": None, "wall_s": self.pm.wall}
