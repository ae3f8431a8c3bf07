"""The model in parallel with a trial: fed the references as they are sent,
it simulates the ideal robot from the same start and reports its links at 20 Hz.

:class:`ParallelModel` is the pure core (references with their send times in,
samples out). ``python -m aiko.experiments.rig.parallel_model`` runs it as its own
process (the trial's event loop must never wait on physics), speaking JSON
lines:

* in (stdin): ``{"start": {"t": T0, "q": [[...7] * n]}}``,
  ``{"ref": {"t": T, "refs": [[alpha_h, alpha_v, omega_h, omega_v] * (n-1)]}}``,
  ``{"end": {"t": T}}``; end of input without ``end`` (the trial's process died)
  stops it at once;
* out (stdout): ``{"ready": {...}}`` once the kernels are loaded,
  ``{"sample": {"t": T, "positions": [[x, y, z] * n]}}`` every 1/rate s of
  trial time from T0, ``{"done": {...}}`` at the end, ``{"error": "..."}`` for
  input it cannot use (it then goes on).

It steps in the real-time class (``--priority``, :data:`MODEL_PRIORITY`:
below the simulated Aiko's physics, above every normal process) while it
keeps up, and leaves it after :data:`BEHIND_LIMIT` s of periods it simulated
slower than they lasted (:class:`~aiko.drivers.priority.RealtimeGovernor`);
``ready`` says what it got and ``done`` how often it left.

How references act, as the joint modules apply them: a period's references
(sent at t_k) hold from t_k until the next period's send time, and each angle
moves on with its rate reference meanwhile, clamped to the joint limit (the
emulated firmware's ramp between SYNCs), i.e. for t in [t_k, t_k+1):
alpha_ref(t) = clip(alpha_k + omega_k (t - t_k), -limit, limit), with a zero
rate reference where clamped. The PD laws (68)-(69) take these at the start
of every time step.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from aiko.control.gait import JOINT_LIMIT
from aiko.drivers.priority import REALTIME_PRIORITY, RealtimeGovernor, freeze_heap
from aiko.model import (
    SnakeModel,
    SnakeParams,
    SnakeState,
    SolverParams,
    warm_up,
)
from aiko.model.errors import JointReferenceError, StateError

__all__ = ["ParallelModel", "ModelSample", "ramped_references", "main", "MODEL_PRIORITY",
           "BEHIND_LIMIT"]

MODEL_PRIORITY = REALTIME_PRIORITY - 7
"""The parallel model's ``SCHED_FIFO`` priority: below the trial runner's
and the emulated modules' (10) and the simulated Aiko's physics (5), whose
timing comes first, above every normal process. At nice 10 in the normal
class it waited behind all of them and a browser too: its lag rose from
90-130 to 120-220 ms once the physics stepped in the real-time class."""

BEHIND_LIMIT = 1.0
"""Wall time (s) the model may spend simulating periods slower than they
last before it leaves the real-time class (a machine too slow for it keeps
its processors for the rest); it asks again after a period it kept up with."""


def ramped_references(refs: np.ndarray, elapsed: np.ndarray,
                      limit: float = JOINT_LIMIT) -> np.ndarray:
    """References (m, nJ, 4) at ``elapsed`` (m,) seconds after a period's
    references ``refs`` (nJ, 4) took effect: each angle advanced by its rate,
    clamped to +-limit (zero rate where clamped)."""
    out = np.empty((elapsed.size,) + refs.shape)
    e = elapsed[:, None]
    for k in (0, 1):
        a = refs[None, :, k] + refs[None, :, k + 2] * e
        clamped = np.abs(a) > limit
        out[..., k] = np.clip(a, -limit, limit)
        out[..., k + 2] = np.where(clamped, 0.0, refs[None, :, k + 2])
    return out


@dataclass(frozen=True)
class ModelSample:
    """The model's links at trial time t: positions (n, 3), m."""

    t: float
    positions: np.ndarray


class ParallelModel:
    """Simulates the references of a trial as they arrive.

    ``start(t0, q0)`` sets the start (trial time and coordinates (n, 7), at rest);
    ``add_refs(t, refs)`` takes a period's references (n-1, 4) sent at t and
    simulates up to t with the previous period's; ``finish(t_end)`` simulates the
    last period to t_end. Each returns the samples (every 1/rate s from t0) it
    produced. References that arrive before ``start`` wait for it; those sent
    before t0 are dropped.
    """

    def __init__(self, model: SnakeModel, rate: float = 20.0, limit: float = JOINT_LIMIT) -> None:
        per_sample = 1.0 / (rate * model.dt)
        if abs(per_sample - round(per_sample)) > 1e-6 or per_sample < 1:
            raise ValueError(f"1/rate = {1 / rate:g} s is not a whole number of steps of "
                             f"{model.dt:g} s")
        self.model = model
        self.rate = rate
        self.limit = limit
        self.sample_steps = int(round(per_sample))
        self.state: SnakeState | None = None
        self.t0: float | None = None
        self.i = 0                      # steps taken since t0
        self.steps = 0
        self.iterations = 0
        self.unconverged = 0
        self.wall = 0.0
        self._current: tuple[float, np.ndarray] | None = None
        self._waiting: list[tuple[float, np.ndarray]] = []

    @property
    def t(self) -> float | None:
        """Trial time the simulation has reached."""
        return None if self.t0 is None else self.t0 + self.i * self.model.dt

    def _check_refs(self, refs) -> np.ndarray:
        r = np.asarray(refs, dtype=float)
        nj = self.model.n - 1
        if r.shape != (nj, 4) or not np.all(np.isfinite(r)):
            raise JointReferenceError(f"expected finite references of shape ({nj}, 4), "
                                      f"got shape {r.shape}")
        return r

    def start(self, t0: float, q0) -> list[ModelSample]:
        if self.t0 is not None:
            raise StateError("start", "the model has already started")
        self.state = self.model.state_from_q(q0, t=0.0)
        self.t0 = float(t0)
        out = [self._sample()]
        waiting, self._waiting = self._waiting, []
        for t, r in waiting:
            out += self.add_refs(t, r)
        return out

    def add_refs(self, t: float, refs) -> list[ModelSample]:
        r = self._check_refs(refs)
        if self.t0 is None:
            self._waiting.append((float(t), r))
            return []
        if t < self.t0 - 1e-9:
            return []
        out = self._simulate_to(t)
        self._current = (float(t), r)
        return out

    def finish(self, t_end: float) -> list[ModelSample]:
        if self.t0 is None:
            return []
        return self._simulate_to(t_end)

    def _sample(self) -> ModelSample:
        assert self.state is not None and self.t is not None, "sampled before start"
        return ModelSample(self.t, self.state.positions)

    def _simulate_to(self, t: float) -> list[ModelSample]:
        assert self.t0 is not None and self.state is not None, "simulated before start"
        t0, dt = self.t0, self.model.dt
        # every step that starts before t (its references are those in force then)
        target = int(math.ceil((t - t0) / dt - 1e-9))
        out = []
        nj = self.model.n - 1
        while self.i < target:
            end = min(target, (self.i // self.sample_steps + 1) * self.sample_steps)
            times = t0 + np.arange(self.i, end) * dt
            if self._current is None:   # before the first period: hold still
                refs = np.zeros((end - self.i, nj, 4))
            else:
                t_k, r = self._current
                refs = ramped_references(r, times - t_k, self.limit)
            w0 = time.perf_counter()
            self.state, st = self.model.run_steps(self.state, refs, warn=False)  # counted below
            self.wall += time.perf_counter() - w0
            self.steps += st.steps
            self.iterations += st.iterations
            self.unconverged += st.unconverged
            self.i = end
            if self.i % self.sample_steps == 0:
                out.append(self._sample())
        return out

    def stats(self) -> dict:
        return {"steps": self.steps, "unconverged": self.unconverged,
                "mean_iterations": self.iterations / self.steps if self.steps else 0.0,
                "wall_s": self.wall, "t": self.t}


# ------------------------------------------------------------------ process

def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _samples(samples: list[ModelSample]) -> None:
    for s in samples:
        _emit({"sample": {"t": s.t, "positions": np.round(s.positions, 9).tolist()}})


def _refs(pm: ParallelModel, body: dict, rt: RealtimeGovernor | None) -> None:
    """Simulate up to a period's send time; kept up if that took less wall
    time than the trial time it covered."""
    t_before, w0 = pm.t, time.monotonic()
    _samples(pm.add_refs(float(body["t"]), body["refs"]))
    if rt is not None and t_before is not None and pm.t is not None:
        now = time.monotonic()
        rt.stepped(now)
        if now - w0 < pm.t - t_before:
            rt.caught_up()


def serve(pm: ParallelModel, lines, rt: RealtimeGovernor | None = None) -> bool:
    """Handle JSON lines until ``end`` (True) or the end of input (False);
    ``rt`` keeps the process in the real-time class while it keeps up."""
    for line in lines:
        try:
            msg = json.loads(line)
            if not isinstance(msg, dict) or len(msg) != 1:
                raise ValueError("expected one of start, ref, end")
            (kind, body), = msg.items()
            if kind == "start":
                _samples(pm.start(float(body["t"]), body["q"]))
            elif kind == "ref":
                _refs(pm, body, rt)
            elif kind == "end":
                _samples(pm.finish(float(body["t"])))
                _emit({"done": pm.stats() | {"demoted": rt.demoted if rt else 0}})
                return True
            else:
                raise ValueError(f"unknown message {kind!r}")
        except (ValueError, KeyError, TypeError, StateError, JointReferenceError) as exc:
            _emit({"error": f"{type(exc).__name__}: {exc}"})
    return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m aiko.experiments.rig.parallel_model")
    p.add_argument("--params", default="{}", help="SnakeParams fields as JSON")
    p.add_argument("--solver", default="{}", help="SolverParams fields as JSON")
    p.add_argument("--rate", type=float, default=20.0)
    p.add_argument("--scene", default=None, help="the obstacles as JSON (scene_file.scene_json)")
    p.add_argument("--priority", type=int, default=None,
                   help="SCHED_FIFO priority to simulate at while keeping up (default: normal)")
    args = p.parse_args(argv)
    try:
        from aiko.experiments.files.scene_file import scene_from_json
        model = SnakeModel(SnakeParams(**json.loads(args.params)),
                           SolverParams(**json.loads(args.solver)), scene_from_json(args.scene))
        pm = ParallelModel(model, args.rate)
    except (ValueError, TypeError) as exc:
        _emit({"error": f"cannot set up the model: {exc}"})
        return 2
    compile_s = warm_up()
    freeze_heap()
    rt = RealtimeGovernor(args.priority, BEHIND_LIMIT)
    granted = rt.request()
    _emit({"ready": {"n": model.n, "dt": model.dt, "load_s": compile_s,
                     "priority": str(granted)}})
    return 0 if serve(pm, sys.stdin, rt) else 1


if __name__ == "__main__":
    sys.exit(main())
