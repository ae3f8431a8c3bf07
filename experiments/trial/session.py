"""A whole experiment as ``aiko run`` runs it: set up the rig, the parallel
model and the log, run the trial, compare, clean up.

``await run_session(config, gait, report)`` is what the command line calls
(and the tests): with ``rig="simulated"`` it starts the simulated Aiko
(``aiko emulate --plant``) as a child process and reaches it through the same
code paths as the robot (python-can's slcan over TCP, the Tracker UDP stream);
with the parallel model on it starts the model process. One
:class:`~aiko.experiments.trial.processes.ChildProcesses` owns both and ends them on
every way out. The kernels are compiled (first run only) before anything
starts, never during a trial. With ``time="virtual"`` (run on a
:class:`~aiko.drivers.virtual_time.VirtualTimeLoop`) the simulated Aiko and
the model run on the trial's own loop instead, in lockstep on one virtual
clock, and no child process starts.

Every record of the session (the preflight, the processes, the trial's, the
comparison, the outcome) goes through one fan-out to its listeners: the trial
log, telemetry, the live views and the caller's (``listeners``).

``report`` (a :class:`SessionReport`) is filled as the session goes, so that
the caller still has the comparison and the log's path when the session ends
by Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from aiko.control.gait import Gait, references
from aiko.control.preflight import Preflight, PreflightRefused, preflight
from aiko.control.steering import SteeringError, steering_loop
from aiko.drivers.can_bus import CanDriver, check_interface
from aiko.drivers.clock import TrialClock
from aiko.drivers.mocap import MocapSource, ViconUdpSource
from aiko.drivers.mocap_sources import SERVED_KINDS, open_served_source
from aiko.drivers.priority import request_normal, request_realtime
from aiko.drivers.vendor_mocap import split_address
from aiko.drivers.virtual_time import LoopClock, in_virtual_time
from aiko.experiments.analysis.compare import (
    ComparisonError,
    compare_paths,
    load_figure_library,
    save_comparison,
)
from aiko.experiments.files.scene_file import scene_json
from aiko.experiments.files.triallog import TrialLog, check_log_path
from aiko.experiments.rig.plant_params import PlantParams
from aiko.experiments.rig.simrig import RigConfig
from aiko.experiments.rig.virtual_rig import VirtualRig
from aiko.experiments.trial.config import TrialConfig
from aiko.experiments.trial.fanout import Compared, Fanout, Listener, TrialOutcome
from aiko.experiments.trial.listeners import PublishListener, TelemetryListener, TrialLogListener
from aiko.experiments.trial.model_inline import InlineModel
from aiko.experiments.trial.model_link import ModelLink, start_model_process
from aiko.experiments.trial.options import SettingsError
from aiko.experiments.trial.processes import Child, ChildProcesses, python_module, wait_all_ready
from aiko.experiments.trial.runner import TrialResult, dbc_attachment, run_trial, trial_metadata
from aiko.firmware_interface.faults import faults_by_node
from aiko.firmware_interface.loop_bus import LoopBus
from aiko.firmware_interface.protocol import ROBOT_BITRATE
from aiko.model import SnakeModel, SnakeParams, SolverParams, kernels_cached, warm_up
from aiko.model.errors import AikoError
from aiko.model.scene import Scene

if TYPE_CHECKING:
    from aiko.drivers.telemetry import MqttConfig

__all__ = ["SessionConfig", "SessionReport", "SessionError", "run_session", "plant_argv"]

log = logging.getLogger(__name__)


class SessionError(AikoError):
    """A session that cannot run as configured."""

CHILD_START_TIMEOUT = 120.0
"""Seconds the simulated Aiko and the parallel model may take to be ready
(loading their kernels, compiling them on a first run)."""


@dataclass(frozen=True)
class SessionConfig:
    """trial: the trial's configuration (rig, CAN, mocap, nodes, duration);
    out: the trial log; plant: the simulated Aiko's settings (simulated rig);
    parallel_model: run the model beside the trial; mocap_host/mocap_port:
    where a vicon-udp source listens (port 0: any free port, told to the
    simulated Aiko), or the DataStream host; mqtt: telemetry settings
    (mqtt_model: the parallel model's link 6 published too);
    live / foxglove: serve the live page / the Foxglove WebSocket protocol
    on (host, port) for the whole session (port 0: any free port); scene:
    the obstacles on the floor (the simulated Aiko's and the parallel
    model's; logged with the trial); settings: the rig settings as merged
    from defaults, the rig file and flags, with their sources (logged)."""

    trial: TrialConfig
    out: Path
    plant: PlantParams = field(default_factory=PlantParams)
    parallel_model: bool = True
    mocap_host: str | None = None
    mocap_port: int | None = None
    mqtt: MqttConfig | None = None
    mqtt_model: bool = False                   # publish the model's link 6 too
    time: Literal["real", "virtual"] = "real"   # the simulated rig in virtual time
    live: tuple[str, int] | None = None        # (host, port) of the live page
    foxglove: tuple[str, int] | None = None    # (host, port) of the Foxglove server
    scene: Scene = field(default_factory=Scene)
    settings: dict | None = None    # the merged rig settings and their sources (logged)


@dataclass
class SessionReport:
    """What a session produced, filled as it goes."""

    out: Path | None = None
    compile_s: float | None = None
    compiled: bool = False
    result: TrialResult | None = None
    metrics: dict | None = None
    figure: Path | None = None
    json: Path | None = None
    comparison_error: str | None = None
    plant: dict = field(default_factory=dict)
    children: dict = field(default_factory=dict)   # name -> pid
    preflight: Preflight | None = None
    live_url: str | None = None
    foxglove_url: str | None = None
    steering: dict | None = None          # steering metrics of a steered trial
    steering_figure: Path | None = None


def model_params_for(config: TrialConfig, gait: Gait) -> SnakeParams:
    """The parallel model's snake: one link more than joint modules, the gait's
    friction."""
    kw: dict[str, Any] = {"n": config.nodes + 1}
    if gait.mu_x is not None:
        kw["mu_x"] = gait.mu_x
    if gait.mu_y is not None:
        kw["mu_y"] = gait.mu_y
    return SnakeParams(**kw)


def plant_argv(config: TrialConfig, plant: PlantParams, params: SnakeParams,
               udp_port: int, scene: Scene | None = None,
               served: tuple[str, int] | None = None) -> list[str]:
    """``aiko emulate --plant`` for this trial, speaking JSON lines; the
    scene goes as JSON (its pegs become motion-capture objects); with
    ``served`` (a kind of :data:`~aiko.drivers.mocap_sources.SERVED_KINDS`, a
    port; 0: any free one) it serves that system's protocol too."""
    argv = ["emulate", "--plant", "--nodes", str(config.nodes), "--port", "0",
            "--udp-target", f"127.0.0.1:{udp_port}",
            "--mu-x", repr(params.mu_x), "--mu-y", repr(params.mu_y),
            "--servo", plant.servo, "--backlash-deg", repr(plant.backlash_deg),
            "--mocap-noise-mm", repr(plant.mocap_noise_mm),
            "--mocap-latency-ms", repr(plant.mocap_latency_ms),
            "--mocap-rate", repr(plant.mocap_rate), "--seed", str(plant.seed),
            "--u-tol", repr(plant.u_tol), "--max-iter", str(plant.max_iter),
            "--json-lines", "--parent-lifeline"]
    if plant.start_curve is not None:
        argv += ["--start-curve", plant.start_curve]
    if plant.start_joint_angles is not None:
        argv += ["--start-joint-angles-json", json.dumps(plant.start_joint_angles)]
    if plant.mu_x is not None:
        argv += ["--plant-mu-x", repr(plant.mu_x)]
    if plant.mu_y is not None:
        argv += ["--plant-mu-y", repr(plant.mu_y)]
    if scene is not None and not scene.empty:
        argv += ["--scene-json", scene_json(scene)]
    for spec in plant.faults:
        argv += ["--fault", spec]
    for t0, t1 in plant.mocap_occlusion:
        argv += ["--mocap-occlusion", f"{t0!r}:{t1!r}"]
    if served is not None:
        argv += [SERVED_KINDS[served[0]].flag, str(served[1])]
    return python_module("aiko.experiments.cli", *argv)


async def run_session(config: SessionConfig, gait: Gait, report: SessionReport, *,
                      say: Callable[[str], None] = lambda text: None,
                      status: Callable[[dict], None] | None = None,
                      listeners: Sequence[Listener] = ()) -> TrialResult:
    """Run one experiment; see the module docstring. ``say`` gets progress
    messages for the user; ``status`` the trial's status snapshots;
    ``listeners``: more listeners of the session's records (:mod:`.fanout`),
    after the trial log, telemetry and the live views."""
    report.out = Path(config.out)
    params = model_params_for(config.trial, gait)
    plant_cfg = _check(config, gait, params, report)
    _compile(config, report, say)
    if config.time == "virtual":
        return await _virtual_session(config, gait, report, plant_cfg, params, status=status,
                                      listeners=listeners)
    async with ChildProcesses() as procs, contextlib.AsyncExitStack() as stack:
        viewers = await _open_viewers(stack, config, gait, report, say)
        clock = TrialClock()
        mocap = await _open_mocap(stack, config, clock)
        children = await _start_children(procs, config, plant_cfg, params, mocap, report, say)
        if mocap is None and _served_by_plant(config):
            mocap = await _open_served_mocap(stack, config, report, clock)
        can_channel = config.trial.can_channel
        if config.trial.rig == "simulated":
            can_channel = report.plant["channel"]
        model = None
        if config.parallel_model:
            model = ModelLink(children.pop(), clock)
        tc = config.trial
        simulated = tc.rig == "simulated"
        can_io = CanDriver.open("slcan" if simulated else tc.can_interface, can_channel,
                                clock, tc.bitrate)
        tc_run = tc if not simulated else replace(tc, can_interface="slcan",
                                                  can_channel=can_channel)
        return await _run_logged_trial(config, tc_run, gait, report, clock, can_io, params,
                                       mocap=mocap, model=model, children=children,
                                       views=viewers, listeners=listeners, status=status)


async def _virtual_session(config: SessionConfig, gait: Gait, report: SessionReport,
                           plant_cfg: PlantParams, params: SnakeParams, *,
                           status: Callable[[dict], None] | None,
                           listeners: Sequence[Listener]) -> TrialResult:
    """The simulated rig in virtual time (:mod:`aiko.drivers.virtual_time`): the
    simulated Aiko (:class:`~aiko.experiments.rig.virtual_rig.VirtualRig`) and
    the parallel model (:class:`~.model_inline.InlineModel`) on this loop,
    the trial's code paths as in real time (the CAN driver on a loop bus, the
    Tracker datagrams decoded by the trial's source), no child process."""
    if not in_virtual_time():
        raise SessionError("a session in virtual time runs on a VirtualTimeLoop "
                           "(aiko.drivers.virtual_time.run_virtual)")
    tc = config.trial
    clock = LoopClock()
    mocap = ViconUdpSource(tc.mocap_subject, clock)       # fed by the rig, no socket
    bitrate = tc.bitrate or ROBOT_BITRATE    # the frames' time on the wire, as on CAN
    rig = VirtualRig(RigConfig(nodes=tc.nodes, faults=faults_by_node(list(plant_cfg.faults)),
                               plant=plant_cfg, mu_x=params.mu_x, mu_y=params.mu_y,
                               scene=config.scene),
                     clock, mocap.take_datagram, bitrate=bitrate)
    model = (InlineModel(SnakeModel(params, SolverParams(), config.scene), clock,
                         tc.mocap_rate) if config.parallel_model else None)
    report.children = {}
    report.plant = {"channel": rig.channel}
    pc_end = LoopBus(rig.channel, bitrate)
    can_io = CanDriver(pc_end, clock)
    tc_run = replace(tc, can_interface="loop", can_channel=rig.channel)
    try:
        async with asyncio.TaskGroup() as tg:
            serving = tg.create_task(rig.run(), name="simulated-aiko")
            try:
                await rig.ready()
                return await _run_logged_trial(config, tc_run, gait, report, clock, can_io,
                                               params, mocap=mocap, model=model, children=[],
                                               views=[], listeners=listeners, status=status)
            finally:
                report.plant = {"channel": rig.channel, **rig.status()}
                serving.cancel()
                pc_end.shutdown()
    except BaseExceptionGroup as group:   # the trial's own error, or the rig's, as raised
        raise _first_error(group) from None


def _check(config: SessionConfig, gait: Gait, params: SnakeParams,
           report: SessionReport) -> PlantParams:
    """The checks that cost nothing, before anything starts (a refusal leaves
    nothing behind); the simulated Aiko's settings with a gait-shaped start
    curve turned into its joint angles."""
    tc = config.trial
    simulated = tc.rig == "simulated"
    pre = report.preflight = preflight(gait, tc.nodes, tc.duration, tc.period, limit=tc.limit,
                                       omega_max=tc.omega_max)
    if not pre.ok:
        if not tc.force:
            raise PreflightRefused(pre)
        log.warning("%s: streamed anyway (--force)", pre.refusal)
    if tc.steering is not None:
        if tc.mocap == "none":
            raise SteeringError("steering needs motion capture (--mocap)")
        steering_loop(tc.steering, gait, tc.limit)  # the gait leaves room to steer
    start = None
    plant_cfg = config.plant
    if simulated and plant_cfg.start_curve is not None:   # a bad curve fails here
        from aiko.experiments.files.start_curve import load_start_curve, start_q
        curve = load_start_curve(plant_cfg.start_curve)
        start = start_q(curve, params, gait, source=plant_cfg.start_curve)
        if "gait" in curve:  # the gait's start posture: the plant gets its joint angles
            r0 = references(gait, 0.0, tc.nodes)
            plant_cfg = replace(plant_cfg, start_curve=None, start_joint_angles=tuple(
                (float(a), float(b)) for a, b in r0[:, :2]))
    if simulated and not config.scene.empty:   # so does a start inside an obstacle
        from aiko.experiments.files.scene_file import check_clear
        where = SnakeModel(params, SolverParams(), config.scene)
        check_clear(where, where.initial_state() if start is None else where.state_from_q(start),
                    "the simulated Aiko's start posture")
    if _served_by_plant(config):
        host = split_address(config.mocap_host or "", 0)[0]
        if host not in ("127.0.0.1", "localhost"):
            raise SettingsError(f"--mocap {config.trial.mocap}: the simulated Aiko serves "
                                "motion capture on loopback (127.0.0.1[:PORT])", "mocap")
    if not simulated:
        check_interface(tc.can_interface, tc.can_channel)
    check_log_path(config.out)
    return plant_cfg


def _compile(config: SessionConfig, report: SessionReport, say: Callable[[str], None]) -> None:
    """Compile the kernels (first run only) before anything starts, never during a
    trial. Once they are in numba's cache this process loads none: the
    simulated Aiko and the parallel model load their own, and the trial here
    uses the model's numpy code only (the start posture); loading them anyway
    took 0.8 s of every run's start."""
    if not (config.trial.rig == "simulated" or config.parallel_model):
        return
    cached = kernels_cached()
    report.compiled = not cached
    if cached:
        return
    say("compiling the model (first run only) ...")
    report.compile_s = warm_up()
    say(f"compiled in {report.compile_s:.1f} s")


async def _open_viewers(stack: contextlib.AsyncExitStack, config: SessionConfig, gait: Gait,
                        report: SessionReport, say: Callable[[str], None]) -> list:
    """The live page and the Foxglove server, served for the whole session."""
    viewers: list = []
    if config.live is not None:
        from aiko.drivers.live import LiveView
        live = await stack.enter_async_context(LiveView(
            *config.live, title=f"{gait.name} ({Path(config.out).stem})",
            **_obstacles_drawn(config.scene)))
        report.live_url = live.url
        viewers.append(live)
        say(f"live view: {live.url}")
    if config.foxglove is not None:
        from aiko.drivers.foxglove_view import FoxgloveView
        fox = await stack.enter_async_context(FoxgloveView(
            *config.foxglove, **_obstacles_drawn(config.scene)))
        report.foxglove_url = f"ws://{fox.host}:{fox.port}"
        viewers.append(fox)
        say(f"foxglove: open a connection to {report.foxglove_url}")
    return viewers


async def _open_mocap(stack: contextlib.AsyncExitStack, config: SessionConfig, clock):
    """The trial's motion-capture source, open (None: none)."""
    tc = config.trial
    mocap: MocapSource | None = None
    if tc.mocap.startswith("vicon-udp"):
        simulated = tc.rig == "simulated"
        mocap = ViconUdpSource(tc.mocap_subject, clock,
                               host=config.mocap_host or ("127.0.0.1" if simulated
                                                          else "0.0.0.0"),
                               port=config.mocap_port if config.mocap_port is not None else 0)
    elif (kind := _served_kind(config)) is not None and not _served_by_plant(config):
        assert config.mocap_host is not None  # KIND:HOST names it
        mocap = open_served_source(kind, config.mocap_host, tc.mocap_subject, clock)
    if mocap is not None:
        await stack.enter_async_context(mocap)
    return mocap


def _served_kind(config: SessionConfig) -> str | None:
    """The trial's motion capture if it is read from a server (KIND:HOST)."""
    kind = config.trial.mocap.partition(":")[0]
    return kind if kind in SERVED_KINDS else None


def _served_by_plant(config: SessionConfig) -> bool:
    """Whether the simulated Aiko serves the trial's motion capture (read once it is up)."""
    return config.trial.rig == "simulated" and _served_kind(config) is not None


def _server_port(config: SessionConfig) -> int:
    """The port the simulated Aiko serves on: the spec's, else any free one."""
    assert config.mocap_host is not None  # KIND:HOST names it
    address = config.mocap_host
    return split_address(address, 0)[1] if ":" in address else 0


async def _open_served_mocap(stack: contextlib.AsyncExitStack, config: SessionConfig,
                             report: SessionReport, clock) -> MocapSource:
    """The simulated Aiko's server, through the vendor's client."""
    kind = _served_kind(config)
    assert kind is not None
    host, port = report.plant[SERVED_KINDS[kind].server]
    source = open_served_source(kind, f"{host}:{port}", config.trial.mocap_subject, clock)
    await stack.enter_async_context(source)
    return source


async def _start_children(procs: ChildProcesses, config: SessionConfig,
                          plant_cfg: PlantParams, params: SnakeParams, mocap,
                          report: SessionReport, say: Callable[[str], None]) -> list[Child]:
    """Start the simulated Aiko (on the simulated rig) and the parallel model
    (when asked), both at once, and wait until both are ready: [plant, model]
    as started. The plant's ready line goes into ``report.plant``, its status
    lines after it."""
    started: list[Child] = []
    if config.trial.rig == "simulated":
        say("starting the simulated Aiko ...")
        udp_port = mocap.port if isinstance(mocap, ViconUdpSource) else 51001
        kind = _served_kind(config)
        served = (kind, _server_port(config)) if kind is not None else None
        started.append(await procs.start("simulated Aiko", plant_argv(
            config.trial, plant_cfg, params, udp_port, config.scene, served)))
    if config.parallel_model:
        say("starting the parallel model ...")
        started.append(await start_model_process(
            procs, SnakeModel(params, SolverParams(), config.scene),
            rate=config.trial.mocap_rate))
        load_figure_library()   # while the children load their kernels
    ready = await wait_all_ready(started, CHILD_START_TIMEOUT)
    for child, said in zip(started, ready, strict=True):
        report.children[child.name] = child.pid
        if "priority" in said:
            log.info("%s: scheduling %s", child.name, said["priority"])
        if "awake" in said:
            log.info("%s: processors: %s", child.name, said["awake"])
    if config.trial.rig == "simulated":
        report.plant = ready[0]
        procs.drain_stdout(started[0], lambda line: _plant_line(report, line))
    return started


async def _run_logged_trial(config: SessionConfig, tc_run: TrialConfig, gait: Gait,
                            report: SessionReport, clock, can_io: CanDriver,
                            params: SnakeParams, *, mocap, model,
                            children: list[Child], views: list,
                            listeners: Sequence[Listener],
                            status: Callable[[dict], None] | None) -> TrialResult:
    """Open the CAN bus, the trial log and the record stream, run the trial
    (``tc_run``: the trial's configuration with the bus it runs on), compare
    at its end. ``views``: the live page and Foxglove (each a sink with
    ``publish``); ``listeners``: the caller's own."""
    telemetry = None
    async with can_io:
        with TrialLog(config.out, _metadata(tc_run, gait, config), dbc_attachment()) as tlog:
            fanout = Fanout([TrialLogListener(tlog)])
            if config.mqtt is not None:
                from aiko.drivers.telemetry import MqttTelemetry
                telemetry = MqttTelemetry(config.mqtt, Path(config.out).stem)
                fanout.add(TelemetryListener(telemetry, model=config.mqtt_model))
            for view in views:
                fanout.add(PublishListener(view, full=True))
            for listener in listeners:
                fanout.add(listener)
            try:
                async with fanout:
                    return await _logged_trial(config, gait, report, clock, tc_run, params,
                                               fanout, tlog, can_io, mocap=mocap, model=model,
                                               children=children, viewers=bool(views),
                                               status=status)
            finally:
                if telemetry is not None and report.result is not None:
                    report.result.telemetry = {"published": telemetry.published,
                                               "dropped": telemetry.dropped}


async def _logged_trial(config: SessionConfig, gait: Gait, report: SessionReport, clock,
                        tc: TrialConfig, params: SnakeParams, fanout: Fanout, tlog: TrialLog,
                        can_io: CanDriver, *, mocap, model, children: list[Child], viewers: bool,
                        status: Callable[[dict], None] | None) -> TrialResult:
    """The session's first records, the trial, and at its end the comparison,
    the steering report and the outcome, every record through ``fanout``."""
    pre = report.preflight
    assert pre is not None  # _check ran it
    fanout.event(clock.now(), "preflight", {**pre.to_dict(), "forced": tc.force and not pre.ok})
    for name, pid in report.children.items():
        fanout.event(clock.now(), "process_started", {"name": name, "pid": pid})

    def on_end(result: TrialResult) -> None:
        request_normal()          # the comparison and figure are no hurry
        report.result = result
        _compare(report, result, gait, tlog.path, fanout, clock, config.scene)
        if tc.steering is not None:
            _steering_report(report, tlog, gait, fanout, clock)
        fanout.emit(TrialOutcome(clock.now(), result.reason, result.fault, report.metrics,
                                 report.comparison_error))

    if config.time == "real":
        priority = request_realtime()
        log.info("trial runner: %s", priority)
        fanout.event(clock.now(), "priority", {"runner": str(priority)})
    try:
        return await run_trial(tc, gait, can_io, clock, fanout,
                               mocap_source=mocap, status=status, model=model,
                               model_params=params, children=children, on_end=on_end,
                               mocap_links=viewers)
    finally:
        request_normal()


def _first_error(group: BaseExceptionGroup) -> BaseException:
    """The first exception of a group, looked for inside nested groups."""
    first = group.exceptions[0]
    return _first_error(first) if isinstance(first, BaseExceptionGroup) else first


def _obstacles_drawn(scene: Scene) -> dict:
    """What the viewers draw of the scene: pegs (x, y, radius) and steps (x0,
    level above), m."""
    return {"pegs": [(p.x, p.y, p.radius) for p in scene.pegs],
            "steps": [(s[0], s[2]) for s in scene.step_array(0.0)]}


def _metadata(tc: TrialConfig, gait: Gait, config: SessionConfig) -> dict:
    meta = trial_metadata(tc, gait)
    meta["plant"] = asdict(config.plant) if tc.rig == "simulated" else None
    meta["parallel_model"] = config.parallel_model
    meta["scene"] = json.loads(scene_json(config.scene))
    meta["time"] = config.time
    if config.settings is not None:
        meta["rig_settings"] = config.settings
    return meta


def _plant_line(report: SessionReport, line: str) -> None:
    try:
        msg = json.loads(line)
    except ValueError:
        return
    if isinstance(msg, dict) and "status" in msg:
        report.plant.update(msg["status"])


def _compare(report: SessionReport, result: TrialResult, gait: Gait, log_path: Path,
             fanout: Fanout, clock, scene: Scene | None = None) -> None:
    """Comparison at the end of a trial: the figure and JSON beside the log,
    the metrics as a :class:`~.fanout.Compared` record."""
    if result.paths is None:
        report.comparison_error = "the parallel model produced no output"
        return
    try:
        metrics = compare_paths(result.paths)
    except ComparisonError as exc:
        report.comparison_error = str(exc)
        fanout.event(clock.now(), "comparison_failed", {"reason": str(exc)})
        return
    report.metrics = metrics
    title = f"{gait.name}: experiment and model, link 6 ({Path(log_path).stem})"
    try:
        report.figure, report.json = save_comparison(log_path, result.paths, title, metrics,
                                                     scene=scene)
    except OSError as exc:
        report.comparison_error = f"cannot write the figure: {exc.strerror}"
    fanout.emit(Compared(clock.now(), metrics, report.figure.name if report.figure else "",
                         report.json.name if report.json else ""))


def _steering_report(report: SessionReport, tlog: TrialLog, gait: Gait, fanout: Fanout,
                     clock) -> None:
    """A steered trial's metrics as a ``steering_report`` event, its figure
    beside the log (read back from the log, flushed first)."""
    from aiko.experiments.analysis.steering_report import (
        save_steering_figure,
        steering_metrics,
        steering_series,
    )
    from aiko.experiments.files.triallog import read_trial

    tlog.flush()
    try:
        data = read_trial(tlog.path)
        series = steering_series(data)
        if series is None or not series.t.size:
            return
        report.steering = steering_metrics(series)
        t, p = data.mocap()
        t0 = report.result.t_gait0 if report.result is not None else None
        keep = t >= (t0 if t0 is not None else -float("inf"))
        report.steering_figure = save_steering_figure(
            tlog.path, series, f"{gait.name}: steering ({Path(tlog.path).stem})",
            report.steering, (p[keep, 0], p[keep, 1]))
    except (OSError, ValueError) as exc:
        log.warning("steering report: %s", exc)
        return
    fanout.event(clock.now(), "steering_report", {**report.steering,
                                                  "figure": report.steering_figure.name})
