"""The simulated Aiko in virtual time: the same parts as the real-time rig
(:mod:`.simrig`), on the trial's own event loop.

The emulated joint modules serve a :class:`~aiko.firmware_interface.loop_bus.LoopBus`
(the trial's CAN driver holds its other end) and tick every 2 ms on the
loop's clock; after every tick the physics (:class:`~.plant.SimulatedAiko`)
steps to the tick's time with the motors' angles the tick recorded, in this
process, and hands the links' angles back to the modules; motion capture's
view of the links goes out as Vicon Tracker datagrams at the plant's rate,
encoded as the real stream is and handed to the trial's
:class:`~aiko.drivers.mocap.ViconUdpSource` without a socket. Run on a
:class:`~aiko.drivers.virtual_time.VirtualTimeLoop`, every part has done its
work up to now before time moves: the physics never lags, a datagram is never
late, and the same trial gives the same records on any machine.

``await rig.run()`` serves until cancelled (tasks ``joints`` and
``mocap-sender`` in one TaskGroup).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from aiko.drivers.mocap import ViconUdpSender
from aiko.firmware_interface.bank import ModuleBank
from aiko.firmware_interface.dbc import load_database
from aiko.firmware_interface.loop_bus import LoopBus
from aiko.firmware_interface.service import EmulatedJoints

from .plant import SimulatedAiko
from .simrig import RigConfig, rig_parts

__all__ = ["VirtualRig"]


class VirtualRig:
    """See the module docstring. ``channel``: the loop bus's channel name (the
    trial opens its end with ``LoopBus(channel)``); ``deliver``: where the
    Tracker datagrams go (the trial's source's ``take_datagram``); ``clock``:
    the trial's clock (its time 0 is when the modules power up)."""

    def __init__(self, config: RigConfig, clock, deliver: Callable[[bytes], None],
                 channel: str | None = None, bitrate: int | None = None) -> None:
        if config.plant is None:
            raise ValueError("a virtual rig needs its plant (the simulated Aiko)")
        self.config = config
        self.clock = clock
        self.channel = channel or f"aiko-virtual-{os.getpid()}-{id(self)}"
        parts = rig_parts(config)
        assert parts.model is not None and parts.view is not None
        self.bank = ModuleBank(parts.modules)   # one compiled tick for all modules
        self.view = parts.view
        self.aiko = SimulatedAiko(parts.model, self.bank, parts.start_state)
        self.bus = LoopBus(self.channel, bitrate)
        self.joints = EmulatedJoints(self.bus, self.bank, clock=clock.now,
                                     after_tick=self._after_tick)
        self.sender = ViconUdpSender(config.udp_target, self.view.objects, clock,
                                     config.plant.mocap_rate, deliver=deliver)

    @property
    def modules(self):
        """The joint modules, as of now."""
        return self.bank.modules

    def _after_tick(self, now: float) -> None:
        """The physics to the tick's time with the motors the tick left."""
        self.aiko.note_motors(now)
        self.aiko.advance(now)
        self.view.record(self.aiko.t, self.aiko.positions(), self.aiko.rotations())

    async def ready(self) -> None:
        """Return once the first motion-capture frame is out: as the real-time
        rig, which powers its modules up and streams before a trial connects,
        so that a trial's first motion-capture sample finds a frame."""
        while self.sender.sent == 0:
            await asyncio.sleep(0.5 / self.sender.rate)

    async def run(self) -> None:
        """Serve until cancelled; the bus is shut down at the end."""
        load_database()
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.joints.run(), name="joints")
                tg.create_task(self.sender.run(), name="mocap-sender")
        finally:
            self.bus.shutdown()

    def status(self) -> dict:
        """The rig's counters, as the real-time rig reports them (no lag: the
        physics is always at the modules' time)."""
        a = self.aiko
        return {"t": self.clock.now(), "physics_t": a.t, "steps": a.steps,
                "unconverged": a.unconverged, "late_updates": 0, "max_lag_ms": 0.0,
                "frames_in": self.joints.frames_in, "frames_out": self.joints.frames_out,
                "mocap_frames": self.sender.sent, "mocap_held": self.view.held}
