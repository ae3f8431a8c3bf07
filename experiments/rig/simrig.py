"""The simulated rig: emulated joint modules behind an slcan adapter on TCP and,
with a plant, the simulated Aiko's physics behind them and a Vicon Tracker UDP
Object Stream of its links.

From outside it looks like the robot in the lab: CAN through a serial-line
adapter (python-can's ``slcan`` interface, ``socket://HOST:PORT``), motion
capture as UDP datagrams. ``aiko emulate`` runs it; ``aiko run`` starts it as
a child process.

:class:`SimulatedRig` is an asyncio service: ``await rig.run(on_ready)`` serves
until cancelled. Its tasks, in one TaskGroup: ``joints`` (the modules, which
advance the physics after each of their 2 ms ticks), ``mocap-sender`` and
``status``. The physics always advances to the clock's present: when it cannot
keep up its lag grows and is counted, the robot's time never slows.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import can
import numpy as np

from aiko.drivers.clock import TrialClock
from aiko.drivers.mocap import VICON_UDP_PORT, ViconUdpSender
from aiko.experiments.rig.plant import MocapView, PlantParams, SimulatedAiko, peg_objects
from aiko.firmware_interface.emulator import FaultConfig, JointModule
from aiko.firmware_interface.service import EmulatedJoints
from aiko.firmware_interface.slcan import SlcanAdapter
from aiko.model import SnakeModel, SnakeParams
from aiko.model.errors import AikoError
from aiko.model.posture import posture_from_joint_angles
from aiko.model.scene import Scene

__all__ = ["RigConfig", "SimulatedRig", "RigStartError"]

log = logging.getLogger(__name__)

LATE_LAG = 0.010
"""A physics update that ends this far (s) behind the clock counts as late."""

UPDATE_BUDGET = 0.004
"""Wall time (s) one physics update may take before it yields to the modules
and the network; what it could not do waits for the next tick (lag)."""

LAG_BIN = 0.0005
LAG_BINS = 4000
"""The lag after every update goes into a histogram of 0.5 ms bins up to 2 s
(the last bin holds everything longer): its 99th percentile goes into the
status."""

CHUNK_STEPS = 8
"""Steps per model call inside an update (2 ms at dt 0.25 ms)."""


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
    scene: obstacles on the floor (the plant's; motion capture streams each
    peg as a fixed object ``peg1``, ``peg2``, ... in the scene's order);
    status_interval: seconds between status reports."""

    nodes: int = 10
    host: str = "127.0.0.1"
    port: int = 0
    faults: dict[int, FaultConfig] = field(default_factory=dict)
    plant: PlantParams | None = None
    udp_target: tuple[str, int] = ("127.0.0.1", VICON_UDP_PORT)
    mu_x: float = 0.2
    mu_y: float = 0.2
    scene: Scene = field(default_factory=Scene)
    status_interval: float = 5.0


class SimulatedRig:
    """See the module docstring. Counters: ``late_updates`` (physics updates
    that ended more than 10 ms behind the clock), ``max_lag`` (s)."""

    def __init__(self, config: RigConfig) -> None:
        self.config = config
        plant = config.plant
        jp = plant.joint_params() if plant is not None else None
        module_kw: dict[str, Any] = {"params": jp} if jp is not None else {}
        self.modules = [JointModule(i, **module_kw,
                                    faults=config.faults.get(i, FaultConfig()))
                        for i in range(1, config.nodes + 1)]
        self.aiko: SimulatedAiko | None = None
        self.view: MocapView | None = None
        if plant is not None and config.nodes + 1 + len(config.scene.pegs) > 255:
            raise RigStartError("scene", f"{len(config.scene.pegs)} pegs and "
                                         f"{config.nodes + 1} links: a Tracker datagram "
                                         "carries at most 255 objects")
        if plant is not None:
            mu_x = plant.mu_x if plant.mu_x is not None else config.mu_x
            mu_y = plant.mu_y if plant.mu_y is not None else config.mu_y
            model = SnakeModel(SnakeParams(n=config.nodes + 1, mu_x=mu_x, mu_y=mu_y),
                               plant.solver_params(), config.scene)
            state = None
            if plant.start_curve is not None:
                from aiko.experiments.files.start_curve import load_start_curve, start_q
                state = model.state_from_q(start_q(load_start_curve(plant.start_curve),
                                                   model.params, source=plant.start_curve))
            elif plant.start_joint_angles is not None:
                angles = np.array(plant.start_joint_angles, dtype=float).reshape(-1, 2)
                if angles.shape[0] != config.nodes:
                    raise RigStartError("start posture", f"{angles.shape[0]} joint angle pairs "
                                                         f"for {config.nodes} joints")
                state = model.state_from_q(posture_from_joint_angles(
                    model.params, angles[:, 0], angles[:, 1]))
            self.aiko = SimulatedAiko(model, self.modules, state=state)
            self.view = MocapView(plant.mocap_noise_mm, plant.mocap_latency_ms / 1000.0,
                                  seed=plant.seed, fixed=peg_objects(config.scene))
            self.view.record(0.0, self.aiko.positions(), self.aiko.rotations())
        self.clock = TrialClock()
        self.late_updates = 0
        self.max_lag = 0.0
        self.lag_counts = np.zeros(LAG_BINS, dtype=np.int64)   # lag after each update
        self.updates = 0
        self.channel: str | None = None
        self.sender: ViconUdpSender | None = None
        self.joints: EmulatedJoints | None = None

    def _after_tick(self, now: float) -> None:
        aiko = self.aiko
        assert aiko is not None and self.view is not None  # hooked only with a plant
        aiko.note_motors(now)
        stop = time.monotonic() + UPDATE_BUDGET
        while aiko.advance(now, CHUNK_STEPS) and time.monotonic() < stop:
            pass
        self.view.record(aiko.t, aiko.positions(), aiko.rotations())
        lag = self.clock.now() - aiko.t
        self.lag_counts[min(int(lag / LAG_BIN), LAG_BINS - 1) if lag > 0 else 0] += 1
        self.updates += 1
        if lag > self.max_lag:
            self.max_lag = lag
        if lag > LATE_LAG:
            self.late_updates += 1

    def lag_percentile(self, q: float) -> float | None:
        """The q-th percentile of the physics' lag after its updates so far, ms
        (the upper edge of its 0.5 ms bin); None before the first update."""
        total = int(self.lag_counts.sum())
        if total == 0:
            return None
        k = int(np.searchsorted(np.cumsum(self.lag_counts), q / 100.0 * total))
        return 1000.0 * LAG_BIN * (min(k, LAG_BINS - 1) + 1)

    def status(self) -> dict:
        out: dict[str, Any] = {"t": self.clock.now(), "pid": os.getpid()}
        if self.joints is not None:
            out.update(frames_in=self.joints.frames_in, frames_out=self.joints.frames_out)
        if self.aiko is not None:
            out.update(physics_t=self.aiko.t, steps=self.aiko.steps,
                       unconverged=self.aiko.unconverged, late_updates=self.late_updates,
                       max_lag_ms=1000.0 * self.max_lag, lag_p99_ms=self.lag_percentile(99))
        out["cpu_s"] = time.process_time()
        if self.sender is not None:
            out.update(mocap_frames=self.sender.sent)
        return out

    async def run(self, on_ready: Callable[[dict], None] | None = None,
                  on_status: Callable[[dict], None] | None = None) -> None:
        """Serve until cancelled. ``on_ready`` gets the CAN channel and the UDP
        target once the adapter listens."""
        cfg = self.config
        name = f"aiko-rig-{os.getpid()}-{id(self)}"
        node_bus = can.Bus(interface="virtual", channel=name, ignore_config=True)
        adapter_bus = can.Bus(interface="virtual", channel=name, ignore_config=True)
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
                    node_bus, self.modules, clock=self.clock.now,
                    after_tick=self._after_tick if self.aiko is not None else None)
                if self.aiko is not None and cfg.plant is not None and self.view is not None:
                    self.sender = ViconUdpSender(cfg.udp_target, self.view.objects, self.clock,
                                                 cfg.plant.mocap_rate)
                if on_ready is not None:
                    on_ready({"channel": self.channel, "nodes": cfg.nodes,
                              "udp_target": cfg.udp_target if self.aiko is not None else None})
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(self.joints.run(), name="joints")
                    if self.sender is not None:
                        tg.create_task(self.sender.run(), name="mocap-sender")
                    if on_status is not None:
                        tg.create_task(self._report(on_status), name="status")
            finally:
                await adapter.__aexit__(None, None, None)
        finally:
            node_bus.shutdown()
            adapter_bus.shutdown()

    async def _report(self, on_status: Callable[[dict], None]) -> None:
        k = 0
        while True:
            k += 1
            await self.clock.sleep_until(k * self.config.status_interval)
            on_status(self.status())
