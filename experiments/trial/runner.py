"""One trial: bring the joints up, ramp them to the gait's start posture, stream
the gait, wind down, watch, log, stop safely.

Phases, each marked in /events (``phase``) and, where references are sent,
flagged in /references:

* ``bring-up``: wait for every node's heartbeat, NMT start (missing nodes end
  the trial here, the log records which);
* ``ramp``: read every joint's angle from STATE (SYNCs without REF: nothing
  moves), then move all joints together to the gait's references at t = 0
  along the profile of :mod:`aiko.control.ramp`, the fastest joint at
  ``RAMP_DUTY`` of the motors' full-duty speed (or in ``ramp_time`` s), and
  wait until every joint is within ``RAMP_TOLERANCE`` of them (no ramp when
  every joint is within ``RAMP_SKIP`` already);
* ``gait``: the gait's clock starts at the first period after the ramp;
* ``wind-down``: with ``end="straight"`` the joints ramp back to 0 first;
  then the safe state (with ``end="hold"``, at once: the robot freezes where
  it is). A fault or Ctrl-C in any phase goes straight to the safe state.

:func:`run_trial` wires the trial's parts (:mod:`.services`, :mod:`.mocap_sink`,
:mod:`.model_service`) and starts them in one TaskGroup with named tasks:
``can-dispatch`` (decodes every received frame for the supervisor, the
streamer and the log), ``supervisor`` (raises :class:`TrialFault`),
``streamer`` (ends the trial after its duration), ``status`` (the reporter),
``mocap`` and, with a parallel model, ``model`` (its samples)
and ``model-start`` (the start alignment), and one ``watch-NAME`` per child
process whose end is a fault (the simulated Aiko). Every record they make,
and every frame the CAN driver sends, goes through the session's
:class:`~.fanout.Fanout` to its listeners (:mod:`.listeners`: the trial log,
telemetry, the live views). Whatever ends the trial (its duration, a fault,
Ctrl-C, SIGTERM), the shut-down sends the safe-state NMT, records why, lets
the parallel model finish the trial's last seconds and hands the result to
``on_end``.

Steering (``config.steering``): see :mod:`.steering`. Start alignment: see
:mod:`.model_service`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import subprocess
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field
from functools import partial
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, cast

import numpy as np

from aiko.control.gait import Gait
from aiko.control.steering import steering_loop
from aiko.control.streamer import PeriodRecord, ReferenceStreamer, StreamStats
from aiko.control.supervisor import NodesMissingError, Supervisor, TrialFault
from aiko.drivers.mocap import MocapLogger
from aiko.drivers.priority import freeze_heap
from aiko.drivers.virtual_time import in_virtual_time
from aiko.experiments.analysis.compare import Paths
from aiko.experiments.analysis.simulate import LINK_OF_INTEREST
from aiko.firmware_interface.dbc import DBC_PATH, load_database
from aiko.model import SnakeParams

from .config import TrialConfig
from .fanout import EndReason, Fanout, FrameSent, PeriodSent, TrialEnded, TrialStarted
from .mocap_sink import MocapSink
from .model_service import ModelService
from .services import (
    CanDispatcher,
    GaitPeriods,
    Phases,
    Reporter,
    StreamPhases,
    TrialDone,
    blame_exited_child,
    watch_child,
)
from .steering import TrialSteering

__all__ = ["TrialConfig", "TrialResult", "run_trial", "trial_metadata", "LINK_OF_INTEREST"]

log = logging.getLogger(__name__)

@dataclass
class TrialResult:
    reason: EndReason
    fault: TrialFault | None
    stream: StreamStats
    duration: float
    nodes_ok: int
    can: dict
    mocap: dict
    last_link6: tuple[float, float, float] | None
    telemetry: dict = field(default_factory=dict)  # published, dropped: the session's
    model: dict = field(default_factory=dict)
    paths: Paths | None = None
    t_gait0: float | None = None
    t_gait_end: float | None = None
    ramps: dict = field(default_factory=dict)     # phase -> RampReport.to_dict()
    phase: str | None = None                      # the last phase entered


def _git_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def trial_metadata(config: TrialConfig, gait: Gait) -> dict:
    try:
        version = importlib_metadata.version("aiko-hil")
    except importlib_metadata.PackageNotFoundError:
        version = "unknown"
    cfg = asdict(config)
    return {"config": cfg, "gait": gait.to_toml_dict(), "gait_name": gait.name,
            "software_version": version, "git_revision": _git_revision(),
            "clock": "trial clock: integer ns since the trial's start, monotonic"}


def dbc_attachment() -> dict[str, bytes]:
    return {DBC_PATH.name: DBC_PATH.read_bytes()}


async def run_trial(config: TrialConfig, gait: Gait, can_io, clock, fanout: Fanout, *,
                    mocap_source=None, status: Callable[[dict], None] | None = None,
                    model=None, model_params: SnakeParams | None = None,
                    children=(), on_end: Callable[[TrialResult], None] | None = None,
                    mocap_links: bool = False) -> TrialResult:
    """Run one trial to its end; see the module docstring.

    ``fanout``: the session's :class:`~.fanout.Fanout`, started (every record
    of the trial goes through it, the frames the CAN driver sends too);
    ``model``: a :class:`aiko.experiments.trial.model_link.ModelLink` to the
    parallel model (``model_params`` its snake); ``children``: processes
    (:class:`aiko.experiments.trial.processes.Child`) whose exit stops the
    trial; ``on_end(result)`` runs at the end however the trial ended (also
    when it was interrupted, before the cancellation goes on); ``mocap_links``:
    look up every ``linkN`` object of each motion-capture frame (for live
    views; steering does anyway)."""
    load_database()   # the codec's DBC is read now, not at the bring-up's first frame
    nodes = list(range(1, config.nodes + 1))
    can_io.on_tx = lambda t, i, d: fanout.emit(FrameSent(t, i, d))
    parts = _TrialParts.wire(config, gait, can_io, clock, fanout, nodes, mocap_source,
                             model, model_params, mocap_links)
    return await _run(parts, partial(parts.tasks, children, status), on_end, children)


@dataclass
class _TrialParts:
    """The trial's services and the state they share, wired."""

    config: TrialConfig
    clock: Any
    can_io: Any
    fanout: Fanout
    nodes: list[int]
    phases: Phases
    periods: GaitPeriods
    supervisor: Supervisor
    streamer: ReferenceStreamer
    dispatcher: CanDispatcher
    stream: StreamPhases
    mocap: MocapSink | None
    mocap_source: Any
    model: ModelService | None
    mocap_logger: MocapLogger | None = None

    @classmethod
    def wire(cls, config: TrialConfig, gait: Gait, can_io, clock, fanout: Fanout,
             nodes: list[int], mocap_source, model, model_params: SnakeParams | None,
             mocap_links: bool = False) -> _TrialParts:
        phases = Phases(clock, fanout)
        periods = GaitPeriods(len(nodes), config.period)
        sup = Supervisor(can_io, nodes, clock, config.policy, on_event=fanout.event)
        steering = None if config.steering is None else TrialSteering(
            steering_loop(config.steering, gait, config.limit), fanout, config.mocap_subject)
        mocap = None if mocap_source is None else MocapSink(mocap_source, fanout, steering,
                                                             want_links=mocap_links)
        link = LINK_OF_INTEREST
        if model is not None and model_params is None:
            raise ValueError("a parallel model needs its model_params")
        model_service = None if model is None or model_params is None else ModelService(
            model, model_params, gait, periods, fanout, clock, link,
            dict if mocap is None else partial(mocap.start_markers, link))

        def on_period(rec: PeriodRecord) -> None:
            periods.on_period(rec)
            if model_service is not None:
                model_service.on_period(rec)
            fanout.emit(PeriodSent(rec, nodes))

        streamer = ReferenceStreamer(can_io, gait, nodes, clock, config.period,
                                     on_period=on_period,
                                     steer=None if steering is None else steering.offset)
        stream = StreamPhases(streamer, config, clock, phases, fanout,
                              on_gait_end=model_service.end_gait if model_service else lambda: None)
        dispatcher = CanDispatcher(can_io, fanout, sup, streamer, periods)
        return cls(config, clock, can_io, fanout, nodes, phases, periods, sup, streamer,
                   dispatcher, stream, mocap, mocap_source, model_service)

    def tasks(self, children, status: Callable[[dict], None] | None) -> dict[str, Coroutine]:
        """The trial's named tasks, made once the nodes are up."""
        tasks: dict[str, Coroutine] = {
            "can-dispatch": self.dispatcher.run(), "supervisor": self.supervisor.watch(),
            "streamer": self.stream.run(),
            "status": Reporter(self.clock, self.fanout, self.snapshot, status).run()}
        if self.mocap is not None:
            self.mocap_logger = MocapLogger(self.mocap_source, self.clock, self.mocap,
                                            self.config.mocap_rate)
            tasks["mocap"] = self.mocap_logger.run()
        if self.model is not None:
            tasks["model"] = self.model.run()
            tasks["model-start"] = self.model.start()
        for child in children:
            tasks[f"watch-{child.name}"] = watch_child(child)
        return tasks

    def snapshot(self) -> dict:
        """The trial's status now (the reporter's)."""
        st = self.streamer.stats
        snap = {"t": self.clock.now(), "phase": self.phases.current, "periods": st.periods,
                "late": st.late, "missed": st.missed, "nodes_ok": self.supervisor.nodes_ok(),
                "nodes": len(self.nodes),
                "link6": None if self.mocap is None else self.mocap.last_position}
        if self.model is not None:
            snap["model_lag"] = self.model.lag
        return snap


async def _run(parts: _TrialParts, make_tasks: Callable[[], dict[str, Coroutine]],
               on_end: Callable[[TrialResult], None] | None, children=()) -> TrialResult:
    """Bring up, run the tasks in one TaskGroup until one ends the trial, then
    the safe state and the result, on every way out; a fault named by a
    child of ``children`` that has ended, if one has
    (:func:`~.services.blame_exited_child`)."""
    cfg, clock, sup = parts.config, parts.clock, parts.supervisor
    reason: EndReason = "completed"
    fault: TrialFault | None = None
    t_start = clock.now()
    # the heap frozen for the trial and unfrozen after it, unless its process
    # froze it before (gc.unfreeze would thaw that too); in virtual time
    # without the full pass first, which costs what a frozen heap saves
    froze = gc.get_freeze_count() == 0
    parts.fanout.emit(TrialStarted(t_start, parts.stream.streamer.gait.name, parts.nodes,
                                   clock.wall_start, cfg.steering))
    try:
        try:
            if froze:
                freeze_heap(collect=not in_virtual_time())   # before the nodes are started
            parts.phases.enter("bring-up", nodes=parts.nodes, timeout=cfg.startup_timeout)
            await sup.bring_up(cfg.startup_timeout, on_frame=parts.dispatcher.on_raw)
            async with asyncio.TaskGroup() as tg:
                for name, coro in make_tasks().items():
                    tg.create_task(coro, name=name)
        except* TrialDone:
            pass
        except* TrialFault as eg:
            reason, fault = "fault", cast(TrialFault, eg.exceptions[0])
    except asyncio.CancelledError:
        reason = "interrupted"
        raise
    except NodesMissingError:
        reason = "nodes_missing"
        raise
    finally:
        if froze:   # what this trial froze: nothing was frozen before it
            gc.unfreeze()
        result = await _shut_down(parts, reason, fault, t_start, children)
        if on_end is not None:
            on_end(result)
    return result


async def _shut_down(parts: _TrialParts, reason: EndReason, fault: TrialFault | None,
                     t_start: float, children=()) -> TrialResult:
    """The wind-down after any end: safe state, the trial's end (its fault
    named by an exited child of ``children``, if one has ended), the
    model's last seconds; the result."""
    clock, sup, phases = parts.clock, parts.supervisor, parts.phases
    if phases.current != "wind-down" or reason != "completed":
        phases.enter("wind-down", end="safe state" if reason != "completed" else parts.config.end,
                     after=phases.current)
    if sup.started_at is not None:
        sup.safe_stop(reason)
        try:
            await sup.confirm_safe_state(on_frame=parts.dispatcher.on_raw)
        except asyncio.CancelledError:  # a second Ctrl-C: stop waiting
            pass
    fault = blame_exited_child(fault, children)
    parts.fanout.emit(TrialEnded(clock.now(), reason, fault))
    t_gait0, t_gait_end = parts.periods.t_gait0, parts.periods.t_gait_end
    model = parts.model
    if model is not None and model.started and t_gait_end is not None:
        try:
            await model.finish(t_gait_end)
        except asyncio.CancelledError:  # a second Ctrl-C: stop waiting
            pass
    result = _result(reason, fault, parts, clock.now() - t_start)
    if model is not None:
        result.model = model.summary()
        model_path = model.path()
        if model_path is not None:
            t_exp, p_exp = ((np.zeros(0), np.zeros((0, 3))) if parts.mocap is None
                            else parts.mocap.path(since=t_gait0))
            result.paths = Paths(t_exp, p_exp, *model_path)
    result.t_gait0, result.t_gait_end = t_gait0, t_gait_end
    result.ramps, result.phase = parts.stream.ramps, phases.current
    return result


def _result(reason: EndReason, fault: TrialFault | None, parts: _TrialParts,
            duration: float) -> TrialResult:
    src, logger, sink = parts.mocap_source, parts.mocap_logger, parts.mocap
    counters = parts.can_io.counters
    mocap: dict = {}
    if logger is not None:
        mocap = {"samples": logger.samples, "stale": logger.stale,
                 "occluded": logger.occluded, "empty": logger.empty,
                 "malformed": src.malformed, "errors": getattr(src, "errors", 0)}
    return TrialResult(
        reason, fault, parts.streamer.stats, duration, parts.supervisor.nodes_ok(),
        {k: getattr(counters, k) for k in ("tx", "rx", "tx_errors", "rx_errors", "rx_dropped")},
        mocap, None if sink is None else sink.last_position)


def jitter_summary(stats: StreamStats) -> dict:
    """The period jitter's and the SYNC->STATE round trips' p50, p99 and max,
    ms (a percentile to its 0.05 ms bin's upper edge, never above the
    maximum, which is exact)."""
    out: dict[str, float] = {}
    for name, h in (("jitter", stats.jitter), ("rtt", stats.round_trips)):
        p50, p99 = h.percentile(50), h.percentile(99)
        if p50 is not None and p99 is not None:
            out.update({f"{name}_p50_ms": p50 * 1e3, f"{name}_p99_ms": p99 * 1e3,
                        f"{name}_max_ms": h.max * 1e3})
    return out
