"""The simulated rig: emulated joint modules behind an slcan adapter on TCP and,
with a plant, the simulated Aiko's physics behind them and a Vicon Tracker UDP
Object Stream of its links.

From outside it looks like the robot in the lab: CAN through a serial-line
adapter (python-can's ``slcan`` interface, ``socket://HOST:PORT``), motion
capture as UDP datagrams. ``aiko emulate`` runs it; ``aiko run`` starts it as
a child process.

:class:`SimulatedRig` is an asyncio service: ``await rig.run(on_ready)`` serves
until cancelled. Its tasks, in one TaskGroup: ``joints`` (the modules, which
record their motors for the physics after each of their 2 ms ticks),
``mocap-sender`` and ``status``; the loop takes each physics update as it
arrives (a reader on the physics' told pipe). The physics runs in
a process of its own (:class:`~aiko.experiments.rig.physics.PhysicsProcess`)
and always advances toward the modules' present, each step with the motors'
angles of its own time: the modules answer the bus on their own clock whatever
the physics costs, and when the physics cannot keep up its lag grows and is
counted; the robot's time never slows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aiko.drivers.awake import Awake, AwakeMode, KeepAwake
from aiko.drivers.clock import TrialClock
from aiko.drivers.datastream import tracker_poses
from aiko.drivers.datastream_server import DataStreamServer
from aiko.drivers.frame_server import FrameServer
from aiko.drivers.mocap import VICON_UDP_PORT, ViconUdpSender
from aiko.drivers.mocap_sources import SERVED_KINDS
from aiko.drivers.priority import Priority, freeze_heap, request_realtime
from aiko.drivers.qtm_server import QtmServer
from aiko.experiments.rig.physics import PhysicsError, PhysicsProcess, PhysicsUpdate
from aiko.experiments.rig.plant import MocapView, PlantParams, peg_objects
from aiko.firmware_interface.bank import ModuleBank
from aiko.firmware_interface.dbc import load_database
from aiko.firmware_interface.delays import DelayHistogram
from aiko.firmware_interface.emulator import FaultConfig, JointModule
from aiko.firmware_interface.group import JointModules
from aiko.firmware_interface.loop_bus import LoopBus
from aiko.firmware_interface.service import EmulatedJoints
from aiko.firmware_interface.slcan import SlcanAdapter
from aiko.model import SnakeModel, SnakeParams, SnakeState
from aiko.model.errors import AikoError
from aiko.model.posture import posture_from_joint_angles
from aiko.model.scene import Scene

__all__ = ["RigConfig", "SimulatedRig", "RigStartError", "RigParts", "rig_parts"]

log = logging.getLogger(__name__)

LATE_LAG = 0.010
"""A physics update that ends this far (s) behind the clock counts as late."""

LAG_BIN = 0.0005
LAG_BINS = 4000
"""The lag after every update goes into a histogram of 0.5 ms bins up to 2 s
(the last bin holds everything longer): its 99th percentile goes into the
status."""

MOCAP_MAX_AGE_FRAMES = 1.0
"""Motion capture holds back a frame whose physics is more than this many
frame periods older than the frame (10 ms at 100 Hz): the age a real camera
frame has when the next one is due
(:class:`~aiko.experiments.rig.plant.MocapView`, ``max_age``)."""


class RigStartError(AikoError):
    def __init__(self, what: str, reason: str) -> None:
        self.what = what
        super().__init__(f"simulated rig: {what}: {reason}")


@dataclass(frozen=True)
class RigConfig:
    """nodes: joint modules 1..nodes; host, port: the slcan adapter's TCP
    address (port 0: any free port); faults per node; plant: None for the joint
    modules alone (their own first-order servo and free play), else the
    simulated Aiko's settings; udp_target: where the Tracker stream goes;
    mu_x, mu_y: the floor (the plant's own mu, if it sets one, wins);
    datastream_port, qtm_port: where a Vicon DataStream server and a
    Qualisys QTM RT server serve the same frames on ``host`` (None: none; 0:
    any free port);
    scene: obstacles on the floor (the plant's; motion capture streams each
    peg as a fixed object ``peg1``, ``peg2``, ... in the scene's order);
    status_interval: seconds between status reports; keep_awake: whether the
    processors are kept from halting while the rig serves
    (:class:`~aiko.drivers.awake.KeepAwake`'s mode)."""

    nodes: int = 10
    host: str = "127.0.0.1"
    port: int = 0
    faults: dict[int, FaultConfig] = field(default_factory=dict)
    plant: PlantParams | None = None
    udp_target: tuple[str, int] = ("127.0.0.1", VICON_UDP_PORT)
    datastream_port: int | None = None
    qtm_port: int | None = None
    mu_x: float = 0.2
    mu_y: float = 0.2
    scene: Scene = field(default_factory=Scene)
    status_interval: float = 5.0
    keep_awake: AwakeMode = "auto"


@dataclass
class RigParts:
    """What a rig is made of: the joint modules, and with a plant the model,
    its start state (the modules' angles set to it) and motion capture's view."""

    modules: list[JointModule]
    model: SnakeModel | None = None
    start_state: SnakeState | None = None
    view: MocapView | None = None


def rig_parts(config: RigConfig) -> RigParts:
    """The modules (with their faults) and, with a plant, the simulated Aiko's
    model on the floor and scene of ``config``, at its start posture (the
    start curve, the start joint angles, else straight), and motion capture's
    view of it with the scene's pegs (RigStartError for what cannot be)."""
    plant = config.plant
    jp = plant.joint_params() if plant is not None else None
    module_kw: dict[str, Any] = {"params": jp} if jp is not None else {}
    modules = [JointModule(i, **module_kw, faults=config.faults.get(i, FaultConfig()))
               for i in range(1, config.nodes + 1)]
    if plant is None:
        return RigParts(modules)
    if config.nodes + 1 + len(config.scene.pegs) > 255:
        raise RigStartError("scene", f"{len(config.scene.pegs)} pegs and "
                                     f"{config.nodes + 1} links: a Tracker datagram "
                                     "carries at most 255 objects")
    mu_x = plant.mu_x if plant.mu_x is not None else config.mu_x
    mu_y = plant.mu_y if plant.mu_y is not None else config.mu_y
    model = SnakeModel(SnakeParams(n=config.nodes + 1, mu_x=mu_x, mu_y=mu_y),
                       plant.solver_params(), config.scene)
    state = _start_state(config, model)
    for m, a in zip(modules, model.joint_angles(state), strict=True):
        m.set_angles(a[0], a[1])
    view = MocapView(plant.mocap_noise_mm, plant.mocap_latency_ms / 1000.0,
                     seed=plant.seed, fixed=peg_objects(config.scene),
                     max_age=MOCAP_MAX_AGE_FRAMES / plant.mocap_rate,
                     occluded=plant.mocap_occlusion)
    view.record(0.0, state.positions, model.rotations(state))
    return RigParts(modules, model, state, view)


def _start_state(config: RigConfig, model: SnakeModel) -> SnakeState:
    plant = config.plant
    assert plant is not None
    if plant.start_curve is not None:
        from aiko.experiments.files.start_curve import load_start_curve, start_q
        return model.state_from_q(start_q(load_start_curve(plant.start_curve), model.params,
                                          source=plant.start_curve))
    if plant.start_joint_angles is not None:
        angles = np.array(plant.start_joint_angles, dtype=float).reshape(-1, 2)
        if angles.shape[0] != config.nodes:
            raise RigStartError("start posture", f"{angles.shape[0]} joint angle pairs "
                                                 f"for {config.nodes} joints")
        return model.state_from_q(posture_from_joint_angles(model.params, angles[:, 0],
                                                            angles[:, 1]))
    return model.initial_state()


class SimulatedRig:
    """See the module docstring. Counters: ``late_updates`` (physics updates
    that ended more than 10 ms behind the clock), ``lag`` (a
    :class:`~aiko.firmware_interface.delays.DelayHistogram` of every update's
    lag, with its maximum)."""

    def __init__(self, config: RigConfig, physics: PhysicsProcess | None = None) -> None:
        """``physics``: a physics process spawned early
        (:meth:`~aiko.experiments.rig.physics.PhysicsProcess.spawn`, so that it
        loads its kernels while this process sets up), for a rig with a plant;
        the rig owns it from here and ends it when it stops."""
        self.config = config
        parts = rig_parts(config)
        # with a plant, the modules tick in one compiled call (the physics,
        # in its own process, already costs a core); without, as they are
        self.group = (ModuleBank(parts.modules) if parts.model is not None
                      else JointModules(parts.modules))
        self.model: SnakeModel | None = parts.model
        self.start_state: SnakeState | None = parts.start_state
        self.view: MocapView | None = parts.view
        self.physics: PhysicsProcess | None = None
        self.last: PhysicsUpdate | None = None      # the physics' newest update
        self._physics_error: PhysicsError | None = None
        if parts.model is not None:
            self.physics = physics if physics is not None else PhysicsProcess()
        self.clock = TrialClock()
        self.late_updates = 0
        self.lag = DelayHistogram(LAG_BIN, LAG_BINS)
        self.channel: str | None = None
        self.priority: Priority | None = None
        self.sender: ViconUdpSender | None = None
        self.servers: dict[str, FrameServer] = {}   # "datastream", "qtm": serving
        self.joints: EmulatedJoints | None = None
        self.awake: Awake | None = None

    @property
    def modules(self) -> list[JointModule]:
        """The joint modules, as of now."""
        return self.group.modules

    def _after_tick(self, now: float) -> None:
        physics = self.physics
        assert physics is not None  # hooked only with a plant
        if self._physics_error is not None:
            raise self._physics_error     # seen between ticks: raised in the joints task
        physics.note_motors(now, self.group.motor_angles(), self.group.motor_speeds(),
                            self.group.motors_driven())
        self._take_updates()

    def _take_updates(self) -> None:
        """Count the lag of every update the physics published since the last
        call and take the newest."""
        assert self.physics is not None
        updates = self.physics.updates()
        for update in updates:
            self._count_lag(update)
        if updates:
            self._take(updates[-1])

    def _on_told(self) -> None:
        """The physics published an update: take it now, not at the next tick."""
        try:
            self._take_updates()
        except PhysicsError as exc:
            self._physics_error = exc
            told = None if self.physics is None else self.physics.told_fd
            if told is not None:          # an ended child's pipe stays readable
                asyncio.get_running_loop().remove_reader(told)

    def _take(self, update: PhysicsUpdate) -> None:
        """The physics' newest update into the modules' link side and motion
        capture (which keeps the newest, or with a latency the history it
        needs: an entry every update, one a tick of the physics, or one a
        tick of wall time while it catches up)."""
        assert self.view is not None
        self.group.set_link_angles(update.angles)
        self.view.record(update.t, update.positions, update.rotations)
        self.last = update

    def _count_lag(self, update: PhysicsUpdate) -> None:
        lag = self.clock.now() - update.t
        self.lag.add(lag)
        if lag > LATE_LAG:
            self.late_updates += 1

    def lag_percentile(self, q: float) -> float | None:
        """The q-th percentile of the physics' lag after its updates so far, ms
        (the upper edge of its 0.5 ms bin, never above the maximum); None
        before the first update."""
        p = self.lag.percentile(q)
        return None if p is None else 1000.0 * p

    def status(self) -> dict:
        out: dict[str, Any] = {"t": self.clock.now(), "pid": os.getpid()}
        if self.joints is not None:
            j = self.joints
            p50, p99 = j.answers.percentile(50), j.answers.percentile(99)
            out.update(frames_in=j.frames_in, frames_out=j.frames_out,
                       answer_p50_ms=None if p50 is None else 1000.0 * p50,
                       answer_p99_ms=None if p99 is None else 1000.0 * p99,
                       answer_max_ms=1000.0 * j.answers.max)
        if self.physics is not None:
            last = self.last
            out.update(physics_t=last.t if last else 0.0, steps=last.steps if last else 0,
                       unconverged=last.unconverged if last else 0,
                       late_updates=self.late_updates, max_lag_ms=1000.0 * self.lag.max,
                       lag_p50_ms=self.lag_percentile(50), lag_p99_ms=self.lag_percentile(99),
                       physics_pid=self.physics.pid, physics_priority=self.physics.granted,
                       physics_demoted=last.demoted if last else 0)
        out["cpu_s"] = time.process_time()
        if self.sender is not None and self.view is not None:
            out.update(mocap_frames=self.sender.sent, mocap_held=self.view.held)
        for key, server in self.servers.items():
            out[f"{key}_clients"] = server.clients
        return out

    async def run(self, on_ready: Callable[[dict], None] | None = None,
                  on_status: Callable[[dict], None] | None = None) -> None:
        """Serve until cancelled, the processors kept awake
        (``config.keep_awake``). ``on_ready`` gets the CAN channel and the UDP
        target once the adapter listens."""
        with KeepAwake(self.config.keep_awake) as self.awake:
            await self._run(on_ready, on_status)

    async def _run(self, on_ready: Callable[[dict], None] | None,
                   on_status: Callable[[dict], None] | None) -> None:
        if self.physics is None:
            await self._serve(on_ready, on_status)
            return
        try:
            assert self.model is not None and self.start_state is not None
            backlash = self.group.backlash()
            self.last = await asyncio.to_thread(self.physics.start, self.model,
                                                self.start_state, backlash)
            self.priority = request_realtime()
            log.info("joint modules' process: %s; physics: %s; %s", self.priority,
                     self.physics.granted, self.awake)
            await self._serve(on_ready, on_status)
        finally:
            await asyncio.to_thread(self.physics.close)

    async def _serve(self, on_ready: Callable[[dict], None] | None,
                     on_status: Callable[[dict], None] | None) -> None:
        cfg = self.config
        load_database()   # the codec's DBC is read before the modules power up
        freeze_heap()
        name = f"aiko-rig-{os.getpid()}-{id(self)}"
        node_bus = LoopBus(name)          # the modules' end, read on this loop
        adapter_bus = LoopBus(name)       # the adapter's
        try:
            try:
                adapter = SlcanAdapter(adapter_bus, host=cfg.host, port=cfg.port)
                await adapter.__aenter__()
            except OSError as exc:
                raise RigStartError(f"slcan adapter on {cfg.host}:{cfg.port}",
                                    f"cannot listen ({exc.strerror})") from exc
            try:
                self.channel = adapter.channel
                self.clock = TrialClock()  # time 0: the modules power up now
                self.joints = EmulatedJoints(
                    node_bus, self.group, clock=self.clock.now,
                    after_tick=self._after_tick if self.physics is not None else None)
                await self._open_servers()
                if self.physics is not None and cfg.plant is not None and self.view is not None:
                    self.sender = ViconUdpSender(cfg.udp_target, self.view.objects, self.clock,
                                                 cfg.plant.mocap_rate,
                                                 on_frame=self._serve_frame)
                if on_ready is not None:
                    on_ready({"channel": self.channel, "nodes": cfg.nodes,
                              "udp_target": cfg.udp_target if self.physics is not None else None,
                              **{key: None if key not in self.servers else
                                 (self.servers[key].host, self.servers[key].port)
                                 for key in (k.server for k in SERVED_KINDS.values())},
                              "awake": str(self.awake)})
                with self._updates_on_arrival():
                    await self._serve_tasks(on_status)
            finally:
                for server in self.servers.values():
                    await server.__aexit__(None, None, None)
                await adapter.__aexit__(None, None, None)
        finally:
            node_bus.shutdown()
            adapter_bus.shutdown()

    async def _open_servers(self) -> None:
        """The DataStream and QTM RT servers the config asks for (with a
        plant), listening; RigStartError if one cannot."""
        cfg, plant = self.config, self.config.plant
        if self.physics is None or plant is None:
            return
        names = [f"link{i}" for i in range(1, cfg.nodes + 2)]
        if self.view is not None:
            names += list(self.view.fixed)              # the scene's pegs
        wanted: list[tuple[str, FrameServer]] = []
        if cfg.datastream_port is not None:
            wanted.append(("vicon-datastream", DataStreamServer(
                cfg.host, cfg.datastream_port, 1.0 / plant.mocap_rate,
                plant.mocap_latency_ms / 1000.0, names)))
        if cfg.qtm_port is not None:
            wanted.append(("qualisys", QtmServer(cfg.host, cfg.qtm_port, plant.mocap_rate,
                                                 names)))
        for kind, server in wanted:
            served = SERVED_KINDS[kind]
            try:
                await server.__aenter__()
            except OSError as exc:
                raise RigStartError(f"{served.server_what} on {cfg.host}:{server.port}",
                                    f"cannot listen ({exc.strerror})") from exc
            self.servers[served.server] = server

    def _serve_frame(self, frame: int, t: float, objects: dict) -> None:
        """Each Tracker frame also to the servers' clients."""
        if self.servers:
            poses = tracker_poses(objects)
            for server in self.servers.values():
                server.publish(frame, t, poses)

    @contextlib.contextmanager
    def _updates_on_arrival(self) -> Iterator[None]:
        """The loop takes each physics update when the physics tells of it."""
        told = None if self.physics is None else self.physics.told_fd
        if told is None:
            yield
            return
        loop = asyncio.get_running_loop()
        loop.add_reader(told, self._on_told)
        try:
            yield
        finally:
            loop.remove_reader(told)

    async def _serve_tasks(self, on_status: Callable[[dict], None] | None) -> None:
        """The rig's tasks; a failed physics ends them all and is raised
        itself (not in a group), as the commands report an error."""
        assert self.joints is not None
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.joints.run(), name="joints")
                if self.sender is not None:
                    tg.create_task(self.sender.run(), name="mocap-sender")
                if on_status is not None:
                    tg.create_task(self._report(on_status), name="status")
        except* PhysicsError as group:
            raise group.exceptions[0] from None

    async def _report(self, on_status: Callable[[dict], None]) -> None:
        k = 0
        while True:
            k += 1
            await self.clock.sleep_until(k * self.config.status_interval)
            on_status(self.status())
