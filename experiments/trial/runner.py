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

:func:`run_trial` starts the services in one TaskGroup with named tasks:
``can-dispatch`` (decodes every received frame for the supervisor, the streamer
and the log), ``supervisor`` (raises :class:`TrialFault`), ``streamer`` (ends the
trial after its duration), ``mocap``, ``telemetry``, ``status`` and, with a
parallel model, ``model`` (its samples into /model) and ``model-start`` (the
start alignment), and one ``watch-NAME`` per child process whose end is a
fault (the simulated Aiko). Whatever ends the trial (its duration, a fault,
Ctrl-C, SIGTERM), the ``finally`` sends the safe-state NMT, records why, lets
the parallel model finish the trial's last seconds, flushes the log and hands
the result to ``on_end``.

Steering (``config.steering``): each fresh motion-capture frame's tracked
point (the mean of the links where the source reports three or more, else
the tracked link) goes to a :class:`~aiko.control.steering.SteeringLoop`; the
streamer asks it for the offset at each gait period's send time; every
period's record goes to /steering and each change of mode to /events.

Start alignment: the parallel model starts at the gait's first period's send
time (the ramp's seconds are not the model's), from the joint angles of that
period's STATE replies (every node's, or the
gait's start angles for the nodes that did not answer within 0.3 s), placed
where motion capture sees the links (``link1`` ... ``linkN`` objects where the
source reports them), see :mod:`aiko.experiments.rig.alignment`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path

import numpy as np

from aiko.control.gait import JOINT_LIMIT, Gait, references
from aiko.control.preflight import OMEGA_MAX
from aiko.control.ramp import RAMP_DUTY, RAMP_SKIP, RAMP_TOLERANCE
from aiko.control.steering import SteeringConfig, steering_loop
from aiko.control.streamer import PeriodRecord, ReferenceStreamer, StreamStats
from aiko.control.supervisor import FaultPolicy, NodesMissingError, Supervisor, TrialFault
from aiko.drivers.mocap import MocapLogger, MocapSample
from aiko.firmware_interface.codec import (Emcy, FrameError, JointState, decode, frame_fields)
from aiko.firmware_interface.dbc import DBC_PATH
from aiko.model import SnakeParams

from aiko.experiments.rig.alignment import start_posture
from aiko.experiments.analysis.compare import Paths

__all__ = ["TrialConfig", "TrialResult", "run_trial", "trial_metadata", "LINK_OF_INTEREST"]

log = logging.getLogger(__name__)

LINK_OF_INTEREST = 6

END_CHOICES = ("hold", "straight")
"""How a trial that ran its duration ends: hold the last posture, or ramp
every joint to 0 first."""

SETTLE_TIMEOUT = 1.0
"""How long after a ramp's end the joints may take to come within tolerance, s."""


@dataclass(frozen=True)
class TrialConfig:
    """Everything that defines a trial (stored in the log's metadata)."""

    gait: str
    nodes: int = 10
    duration: float | None = None
    period: float = 0.1
    startup_timeout: float = 2.0
    rig: str = "robot"
    can_interface: str = "socketcan"
    can_channel: str = "can0"
    bitrate: int | None = None
    mocap: str = "none"
    mocap_subject: str = "link6"
    mocap_segment: str = "link6"
    mocap_rate: float = 20.0
    mqtt: str | None = None
    policy: FaultPolicy = field(default_factory=FaultPolicy)
    ramp_time: float | None = None   # None: the automatic duration
    end: str = "hold"                # or "straight"
    force: bool = False              # stream a gait the preflight refused
    steering: SteeringConfig | None = None   # close the loop through motion capture

    def __post_init__(self) -> None:
        if self.end not in END_CHOICES:
            raise ValueError(f"end must be one of {', '.join(END_CHOICES)}, got {self.end!r}")
        if self.ramp_time is not None and not self.ramp_time >= 0:
            raise ValueError(f"ramp_time must be >= 0, got {self.ramp_time!r}")


@dataclass
class TrialResult:
    reason: str                        # "completed", "fault", "interrupted"
    fault: TrialFault | None
    stream: StreamStats
    duration: float
    nodes_ok: int
    can: dict
    mocap: dict
    telemetry: dict
    last_link6: tuple[float, float, float] | None
    model: dict = field(default_factory=dict)
    paths: Paths | None = None
    t_gait0: float | None = None
    t_gait_end: float | None = None
    ramps: dict = field(default_factory=dict)     # phase -> RampReport.to_dict()
    phase: str | None = None                      # the last phase entered


class _TrialEnded(Exception):
    """The streamer has sent its last period."""


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


START_STATE_WAIT = 0.3
"""How long the start alignment waits for every node's first STATE reply, s."""


async def run_trial(config: TrialConfig, gait: Gait, can_io, clock, trial_log, *,
                    mocap_source=None, telemetry=None,
                    status: Callable[[dict], None] | None = None,
                    model=None, model_params: SnakeParams | None = None,
                    children=(), on_end: Callable[[TrialResult], None] | None = None,
                    viewers=()) -> TrialResult:
    """Run one trial to its end; see the module docstring.

    ``model``: a :class:`aiko.experiments.trial.model_link.ModelLink` to the parallel
    model (``model_params`` its snake); ``children``: processes
    (:class:`aiko.experiments.trial.processes.Child`) whose exit stops the trial;
    ``on_end(result)`` runs at the end however the trial ended (also when it
    was interrupted, before the cancellation goes on); ``viewers``: live
    views, each a ``publish(topic, payload)`` that never blocks nor raises
    (their owner serves them, before and after the trial), fed what the
    telemetry gets plus the model's links, the steering and the trial's end."""
    nodes = list(range(1, config.nodes + 1))
    sinks = [v for v in (telemetry, *viewers) if v is not None]

    def publish(topic: str, payload: dict, to_telemetry: bool = True) -> None:
        for sink in sinks:
            if to_telemetry or sink is not telemetry:
                sink.publish(topic, payload)

    def event(t: float, kind: str, data: dict) -> None:
        trial_log.write("/events", t, {"kind": kind, "data": data})
        if kind == "fault":
            publish("fault", {"t": t, "kind": data.get("fault"),
                              "node": data.get("node"), "reason": data.get("reason")})

    sup = Supervisor(can_io, nodes, clock, config.policy, on_event=event)

    first_period: list[PeriodRecord] = []
    first_states: dict[int, JointState] = {}
    first_state_event = asyncio.Event()
    period_event = asyncio.Event()
    last_period: list[PeriodRecord] = []
    mocap_t: list[float] = []
    mocap_p: list[tuple] = []
    mocap_frames: set[int] = set()
    model_t: list[float] = []
    model_p: list[np.ndarray] = []
    link = LINK_OF_INTEREST

    def on_period(rec: PeriodRecord) -> None:
        if rec.phase == "gait":
            if not first_period:
                first_period.append(rec)
                period_event.set()
            last_period[:] = [rec]
            if model is not None:
                model.send_refs(rec.sent, rec.refs)
        trial_log.write("/references", rec.sent, {
            "k": rec.k, "phase": rec.phase, "t_gait": rec.t_gait, "deadline": rec.deadline,
            "sent": rec.sent, "counter": rec.counter, "nodes": nodes,
            "alpha_h": rec.refs[:, 0].tolist(), "alpha_v": rec.refs[:, 1].tolist(),
            "omega_h": rec.refs[:, 2].tolist(), "omega_v": rec.refs[:, 3].tolist(),
            "offset": rec.offset})

    steer_loop = None if config.steering is None else steering_loop(config.steering, gait)
    steer_loop_mode: list[str | None] = [None]
    tracked: list[str | None] = [None]

    def steer(t: float, t_gait: float) -> float:
        rec = steer_loop.command(t)
        if rec.mode != steer_loop_mode[0]:
            event(t, "steering", {"mode": rec.mode, "was": steer_loop_mode[0],
                                  "age": rec.age})
            if rec.mode in ("hold", "open"):
                log.warning("steering: motion capture stale (%s s): %s",
                            "none" if rec.age is None else f"{rec.age:.2f}",
                            "holding the last offset" if rec.mode == "hold"
                            else "open loop")
            steer_loop_mode[0] = rec.mode
        data = rec.to_dict()
        data["t_gait"] = t_gait
        data["tracked"] = tracked[0]
        trial_log.write("/steering", t, data)
        publish("steering", data)
        return rec.offset

    streamer = ReferenceStreamer(can_io, gait, nodes, clock, config.period, on_period=on_period,
                                 steer=None if steer_loop is None else steer)
    last_link6: list[tuple | None] = [None]
    mocap_logger: MocapLogger | None = None

    def log_rx(rx, error: str | None = None) -> None:
        rec = {"id": rx.arbitration_id, "data": rx.data.hex()}
        if error:
            rec["error"] = error
        trial_log.write("/can/rx", rx.t, rec)

    async def dispatch() -> None:
        while True:
            rx = await can_io.receive()
            try:
                frame = decode(rx.arbitration_id, rx.data)
            except FrameError as exc:
                log_rx(rx, str(exc))
                continue
            log_rx(rx)
            sup.on_frame(rx.t, frame)
            if isinstance(frame, JointState):
                streamer.on_state(rx.t, frame)
                if (first_period and frame.sync_echo == first_period[0].counter
                        and frame.node not in first_states):
                    first_states[frame.node] = frame
                    if len(first_states) == len(nodes):
                        first_state_event.set()
                rec = frame_fields(frame)
                rec["status"] = int(rec["status"])
                trial_log.write("/joint_state", rx.t, rec)
            elif isinstance(frame, Emcy):
                rec = frame_fields(frame)
                rec["error_register"] = int(rec["error_register"])
                trial_log.write("/emcy", rx.t, rec)

    phase: list[str | None] = [None]
    ramps: dict[str, dict] = {}

    def enter(name: str, **data) -> None:
        phase[0] = name
        event(clock.now(), "phase", {"phase": name, **data})
        log.info("phase %s", name)

    async def stream() -> None:
        """The ramp to the start posture, the gait, the wind-down's ramp."""
        enter("ramp", ramp_time=config.ramp_time, duty=RAMP_DUTY,
              tolerance_deg=math.degrees(RAMP_TOLERANCE))
        goal = streamer.refs_at(0.0)[:, :2]
        rep = await streamer.ramp_to(goal, duration=config.ramp_time,
                                     speed=RAMP_DUTY * OMEGA_MAX, max_speed=OMEGA_MAX,
                                     skip=RAMP_SKIP,
                                     settle_timeout=SETTLE_TIMEOUT, phase="ramp",
                                     read_timeout=config.startup_timeout)
        ramps["ramp"] = rep.to_dict()
        event(clock.now(), "ramp_done", ramps["ramp"])
        enter("gait", duration=config.duration)
        await streamer.run(config.duration)
        if model is not None and last_period:  # the model need not wait for the wind-down
            model.end(last_period[0].sent + config.period)
        if config.end == "straight" and streamer.last is not None:
            enter("wind-down", end="straight")
            last = streamer.last.refs
            start = np.clip(last[:, :2] + last[:, 2:] * config.period,
                            -JOINT_LIMIT, JOINT_LIMIT)
            rep = await streamer.ramp_to(np.zeros_like(start), start=start,
                                         speed=RAMP_DUTY * OMEGA_MAX,
                                         settle_timeout=SETTLE_TIMEOUT, phase="wind-down")
            ramps["wind-down"] = rep.to_dict()
            event(clock.now(), "ramp_done", ramps["wind-down"])
        else:
            # the last SYNC's replies are on their way: give them one period
            await clock.sleep_until(clock.now() + config.period)
        raise _TrialEnded

    def mocap_sink(t: float, s: MocapSample | None) -> None:
        if s is None:
            trial_log.write("/mocap", t, {"frame": None, "x": None, "y": None, "z": None,
                                          "occluded": True, "stale": True, "latency": None,
                                          "t_receive": None})
            return
        x, y, z = s.position if s.position is not None else (None, None, None)
        trial_log.write("/mocap", t, {"frame": s.frame, "x": x, "y": y, "z": z,
                                      "occluded": s.occluded, "stale": s.stale,
                                      "latency": s.latency, "t_receive": s.t_receive})
        wanted = not s.stale and (steer_loop is not None or viewers)
        links = link_objects(s.frame) if wanted else {}
        if s.position is not None:
            last_link6[0] = s.position
            if not s.stale and s.frame not in mocap_frames:
                mocap_frames.add(s.frame)
                mocap_t.append(s.t_receive)
                mocap_p.append(s.position)
                if steer_loop is not None:
                    steer_loop.observe(s.t_receive, tracked_point(s, links))
        if not s.stale:
            publish("link6", {"t": t, "frame": s.frame, "x": x, "y": y, "z": z}
                    if s.position is not None else {"t": t, "frame": s.frame, "occluded": True})
            if viewers and len(links) > 1:
                publish("mocap_links", {"t": t, "frame": s.frame,
                                        "positions": [list(links[i]) for i in sorted(links)]},
                        to_telemetry=False)

    def link_objects(frame: int | None = None) -> dict[int, tuple]:
        """{N: (x, y, z)} of the ``linkN`` objects in the source's newest
        datagram (of this frame, if given); empty where it has none."""
        objs = getattr(mocap_source, "latest_objects", lambda: None)()
        if objs is None or (frame is not None and objs[1] != frame):
            return {}
        return {int(name[4:]): pos for name, pos in objs[2].items()
                if name.startswith("link") and name[4:].isdigit()}

    def tracked_point(s: MocapSample, links: dict[int, tuple]) -> tuple:
        """What the steering loop tracks: the mean of the links where motion
        capture carries at least three of them (their centre of mass), else
        the tracked link alone."""
        if len(links) >= 3:
            tracked[0] = f"mean of {len(links)} links"
            return tuple(np.mean(np.asarray(list(links.values())), axis=0))
        tracked[0] = config.mocap_subject
        return s.position

    def snapshot() -> dict:
        st = streamer.stats
        snap = {"t": clock.now(), "phase": phase[0], "periods": st.periods, "late": st.late,
                "missed": st.missed,
                "nodes_ok": sup.nodes_ok(), "nodes": len(nodes), "link6": last_link6[0]}
        if model is not None:
            snap["model_lag"] = model.lag if model.alive else None
        return snap

    def on_model_sample(t: float, positions: np.ndarray, lag: float) -> None:
        p = positions[min(link, positions.shape[0]) - 1]
        model_t.append(t)
        model_p.append(p)
        rec = {"t": t, "x": float(p[0]), "y": float(p[1]), "z": float(p[2]), "lag": lag,
               "positions": positions.tolist()}
        trial_log.write("/model", t, rec)
        publish("model", rec, to_telemetry=False)

    if model is not None:
        model.on_sample = on_model_sample
        model.on_event = lambda kind, data: event(clock.now(), kind, data)

    async def start_model() -> None:
        """Start alignment (module docstring), then start the parallel model."""
        await period_event.wait()
        rec = first_period[0]
        try:
            await asyncio.wait_for(first_state_event.wait(), START_STATE_WAIT)
        except TimeoutError:
            pass
        n_joints = model_params.n - 1
        gait0 = references(gait, 0.0, n_joints)
        ah, av = gait0[:, 0].copy(), gait0[:, 1].copy()
        if gait.start != "curved":
            ah[:] = 0.0
            av[:] = 0.0
        for node, st in first_states.items():
            if node <= n_joints:
                ah[node - 1], av[node - 1] = st.alpha_h, st.alpha_v
        markers = link_objects()
        if not markers and last_link6[0] is not None:
            markers[link] = last_link6[0]
        q0 = start_posture(model_params, ah, av, markers)
        source = (f"joint angles from STATE of {len(first_states)}/{len(nodes)} nodes, "
                  f"placed on {len(markers)} mocap link(s)")
        model.start(rec.sent, q0, source)

    async def watch_child(child) -> None:
        await child.proc.wait()
        raise TrialFault("process_exited", None,
                         f"the {child.name} (pid {child.pid}) stopped: {child.describe_exit()}")

    async def report() -> None:
        k = 0
        t0 = clock.now()
        while True:
            k += 1
            await clock.sleep_until(t0 + 0.5 * k)
            trial_log.flush()  # at least twice a second, even when nothing is written
            snap = snapshot()
            if status is not None:
                status(snap)
            publish("status", {key: v for key, v in snap.items() if key != "link6"},
                    to_telemetry=k % 2 == 0)

    reason = "completed"
    fault: TrialFault | None = None
    t_start = clock.now()
    event(t_start, "trial_start", {"nodes": nodes, "gait": gait.name,
                                   "wall_start": getattr(clock, "wall_start", None)})
    publish("event", {"t": t_start, "kind": "trial_start", "gait": gait.name,
                      "steering": None if config.steering is None else config.steering.mode,
                      "heading_target": None if config.steering is None
                      else config.steering.heading,
                      "waypoints": None if config.steering is None
                      else config.steering.waypoints})
    try:
        try:
            # A full pass of the garbage collector over everything imported so far
            # takes 14 ms to several 100 ms (a process that compiled the model or
            # runs matplotlib and dask: 90 ms and more), enough to make a period
            # late or, after NMT start, a node look lost: collect and freeze that
            # heap now, before the nodes are started, so the collector only scans
            # what the trial makes.
            gc.collect()
            gc.freeze()
            enter("bring-up", nodes=nodes, timeout=config.startup_timeout)
            await sup.bring_up(config.startup_timeout, on_frame=log_rx)
            async with asyncio.TaskGroup() as tg:
                tg.create_task(dispatch(), name="can-dispatch")
                tg.create_task(sup.watch(), name="supervisor")
                tg.create_task(stream(), name="streamer")
                tg.create_task(report(), name="status")
                if mocap_source is not None:
                    mocap_logger = MocapLogger(mocap_source, clock, mocap_sink, config.mocap_rate)
                    tg.create_task(mocap_logger.run(), name="mocap")
                if telemetry is not None:
                    tg.create_task(telemetry.run(), name="telemetry")
                if model is not None:
                    tg.create_task(model.run(), name="model")
                    tg.create_task(start_model(), name="model-start")
                for child in children:
                    tg.create_task(watch_child(child), name=f"watch-{child.name}")
        except* _TrialEnded:
            pass
        except* TrialFault as eg:
            reason = "fault"
            fault = eg.exceptions[0]
    except asyncio.CancelledError:
        reason = "interrupted"
        raise
    except NodesMissingError:
        reason = "nodes_missing"
        raise
    finally:
        gc.unfreeze()
        if phase[0] != "wind-down" or reason != "completed":
            enter("wind-down", end="safe state" if reason != "completed" else config.end,
                  after=phase[0])
        if sup.started_at is not None:
            sup.safe_stop(reason)
            try:
                await sup.confirm_safe_state(on_frame=log_rx)
            except asyncio.CancelledError:  # a second Ctrl-C: stop waiting
                pass
        event(clock.now(), "trial_end", {"reason": reason,
                                         "fault": None if fault is None else fault.reason})
        publish("event", {"t": clock.now(), "kind": "trial_end", "reason": reason,
                          "fault": None if fault is None else str(fault)}, to_telemetry=False)
        t_gait0 = first_period[0].sent if first_period else None
        t_gait_end = last_period[0].sent + config.period if last_period else None
        if model is not None and model.started and t_gait_end is not None:
            try:
                await model.finish(t_gait_end)
            except asyncio.CancelledError:  # a second Ctrl-C: stop waiting
                pass
        trial_log.flush()
        result = _result(reason, fault, streamer, clock.now() - t_start, sup, can_io,
                         mocap_logger, mocap_source, telemetry, last_link6[0])
        if model is not None:
            result.model = model.summary()
            if model_t:
                te, pe = np.array(mocap_t), np.array(mocap_p).reshape(-1, 3)
                keep = te >= (t_gait0 if t_gait0 is not None else -np.inf)  # not the ramp
                result.paths = Paths(te[keep], pe[keep], np.array(model_t),
                                     np.array(model_p).reshape(-1, 3))
        result.t_gait0, result.t_gait_end = t_gait0, t_gait_end
        result.ramps, result.phase = ramps, phase[0]
        if on_end is not None:
            on_end(result)
    return result


def _result(reason, fault, streamer, duration, sup, can_io, mocap_logger, mocap_source,
            telemetry, last_link6) -> TrialResult:
    st = streamer.stats
    return TrialResult(
        reason, fault, st, duration, sup.nodes_ok(),
        {k: getattr(can_io.counters, k) for k in ("tx", "rx", "tx_errors", "rx_errors",
                                                   "rx_dropped")},
        {} if mocap_logger is None else {"samples": mocap_logger.samples,
                                         "stale": mocap_logger.stale,
                                         "occluded": mocap_logger.occluded,
                                         "empty": mocap_logger.empty,
                                         **({"malformed": mocap_source.malformed}
                                            if hasattr(mocap_source, "malformed") else {})},
        {} if telemetry is None else {"published": telemetry.published,
                                      "dropped": telemetry.dropped},
        last_link6)


def jitter_summary(stats: StreamStats) -> dict:
    j = np.array(stats.jitter) * 1e3
    rt = np.array(stats.round_trips) * 1e3
    out = {}
    if j.size:
        out.update(jitter_p50_ms=float(np.percentile(j, 50)), jitter_p99_ms=float(np.percentile(j, 99)),
                   jitter_max_ms=float(j.max()))
    if rt.size:
        out.update(rtt_p50_ms=float(np.percentile(rt, 50)), rtt_p99_ms=float(np.percentile(rt, 99)),
                   rtt_max_ms=float(rt.max()))
    return out
