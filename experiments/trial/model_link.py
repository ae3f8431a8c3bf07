"""The trial's side of the parallel model process
(:mod:`aiko.experiments.rig.parallel_model`).

:class:`ModelLink` queues the references for the process as the streamer sends
them, reads its samples (``await link.run()``, a task of the trial), reports
its lag (trial time now minus the time of its newest sample), and at the end
lets it finish the remaining seconds. A model process that dies or fails is
logged and reported, never a reason to stop the trial.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

import numpy as np

from aiko.experiments.files.scene_file import scene_json
from aiko.experiments.rig.parallel_model import MODEL_PRIORITY
from aiko.experiments.trial.processes import Child, ChildProcesses, python_module
from aiko.model import SnakeModel

__all__ = ["ModelLink", "ModelSamples", "start_model_process"]

log = logging.getLogger(__name__)


MODEL_NICE = 10


async def start_model_process(procs: ChildProcesses, model: SnakeModel, rate: float = 20.0
                              ) -> Child:
    """Start the parallel model process; it says ready
    (:meth:`~aiko.experiments.trial.processes.Child.wait_ready`) once its
    kernels are loaded. It runs at a lower priority than the trial and the
    simulated Aiko (their timing comes first, it is allowed to lag): in the
    real-time class below them (``MODEL_PRIORITY``) while it keeps up, at nice
    ``MODEL_NICE`` in the normal class otherwise."""
    p = model.params
    params = {k: getattr(p, k) for k in p.__dataclass_fields__}
    return await procs.start("parallel model", python_module(
        "aiko.experiments.rig.parallel_model", "--params", json.dumps(params),
        "--solver", json.dumps({"dt": model.dt, "solver": model.solver.solver}),
        "--rate", repr(rate), "--scene", scene_json(model.scene),
        "--priority", str(MODEL_PRIORITY)), nice=MODEL_NICE)


def _parse(line: str) -> dict | None:
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


class ModelSamples:
    """What the trial's side of a parallel model keeps of its samples, in
    either form (the process's :class:`ModelLink`, or the inline model of
    virtual time): ``on_sample(t, positions (n, 3), lag)`` gets every sample;
    ``on_event(kind, data)`` gets ``model_started``, ``model_stopped``,
    ``model_error`` and ``model_done``; the lag is the trial clock's now
    minus the newest sample's time."""

    def __init__(self, clock,
                 on_sample: Callable[[float, np.ndarray, float], None] | None = None,
                 on_event: Callable[[str, dict], None] | None = None) -> None:
        self.clock = clock
        self.on_sample = on_sample or (lambda t, positions, lag: None)
        self.on_event = on_event or (lambda kind, data: None)
        self.started = False
        self.samples = 0
        self.lag = 0.0
        self.max_lag = 0.0
        self.stopped: str | None = None   # why the model stopped early
        self.done: dict | None = None

    def took(self, t: float, positions: np.ndarray) -> None:
        """A sample of trial time ``t``: counted, its lag measured, handed on."""
        self.samples += 1
        self.lag = max(0.0, self.clock.now() - t)
        self.max_lag = max(self.max_lag, self.lag)
        self.on_sample(t, positions, self.lag)

    def summary(self) -> dict:
        return {"samples": self.samples, "lag_s": self.lag, "max_lag_s": self.max_lag,
                "stopped": self.stopped, "done": self.done}


class ModelLink(ModelSamples):
    """See the module docstring and :class:`ModelSamples`."""

    def __init__(self, child: Child, clock,
                 on_sample: Callable[[float, np.ndarray, float], None] | None = None,
                 on_event: Callable[[str, dict], None] | None = None) -> None:
        super().__init__(clock, on_sample, on_event)
        self.child = child
        self._end_sent = False
        self._pipe_closed = False

    @property
    def alive(self) -> bool:
        return self.stopped is None and not self._pipe_closed and self.child.returncode is None

    def _send(self, obj: dict) -> None:
        """A line to the model. A closed pipe means the process has gone: the
        reader's end of output, or :meth:`finish`, says how it ended."""
        if self.stopped is None and not self._pipe_closed:
            if not self.child.write_line(json.dumps(obj)):
                self._pipe_closed = True
                log.warning("parallel model: its input pipe is closed")

    def start(self, t0: float, q0: np.ndarray, source: str) -> None:
        self.started = True
        self._send({"start": {"t": t0, "q": np.asarray(q0).tolist()}})
        self.on_event("model_started", {"t0": t0, "start": source,
                                        "q0": np.asarray(q0, dtype=float).tolist()})

    def send_refs(self, t: float, refs: np.ndarray) -> None:
        self._send({"ref": {"t": t, "refs": np.asarray(refs).tolist()}})

    def _stop(self, reason: str) -> None:
        if self.stopped is None and self.done is None:
            self.stopped = reason
            log.warning("parallel model stopped: %s", reason)
            self.on_event("model_stopped", {"reason": reason, "pid": self.child.pid})

    async def _read_one(self) -> bool:
        """Handle one line of the process's output; False at its end."""
        line = await self.child.readline()
        if line is None:
            await self.child.proc.wait()
            if self.done is None:
                self._stop(f"the model process {self.child.describe_exit()}")
            return False
        msg = _parse(line)
        if msg is None:
            return True
        if "sample" in msg:
            s = msg["sample"]
            self.took(float(s["t"]), np.asarray(s["positions"], dtype=float))
        elif "done" in msg:
            self.done = msg["done"]
            self.on_event("model_done", self.done)
        elif "error" in msg:
            self.on_event("model_error", {"error": msg["error"]})
        return True

    async def run(self) -> None:
        """Read the process's output until it ends (a task of the trial)."""
        while self.done is None and await self._read_one():
            pass

    def end(self, t_end: float) -> None:
        """Tell the model the references end at t_end (it simulates up to
        there without waiting for more); once."""
        if self.started and not self._end_sent:
            self._end_sent = True
            self._send({"end": {"t": t_end}})

    async def finish(self, t_end: float, timeout: float = 120.0) -> bool:
        """Ask the model to simulate up to t_end (unless :meth:`end` did),
        read its last samples, and return True once it is done (no reader task
        may run meanwhile)."""
        if not self.started or self.stopped is not None:
            return False
        if self._pipe_closed:  # it has gone; say how, once it is reaped
            try:
                await asyncio.wait_for(self.child.proc.wait(), 2.0)
            except TimeoutError:
                pass
            self._stop(f"the model process {self.child.describe_exit()}"
                       if self.child.returncode is not None else "its input pipe is closed")
            return False

        async def read_to_end() -> None:
            while self.done is None and await self._read_one():
                pass

        self.end(t_end)
        try:
            await asyncio.wait_for(read_to_end(), timeout)
        except TimeoutError:
            self._stop(f"did not finish within {timeout:g} s after the trial")
        return self.done is not None

    def summary(self) -> dict:
        return {**super().summary(), "pid": self.child.pid}
