"""The simulated Aiko in virtual time: the same parts as the real-time rig
(:mod:`.simrig`), on the trial's own event loop.

The emulated joint modules serve a :class:`~aiko.firmware_interface.loop_bus.LoopBus`
(the trial's CAN driver holds its other end) and tick every 2 ms on the
loop's clock; after every tick the physics (:class:`~.plant.SimulatedAiko`)
steps to the tick's time with the motors' angles the tick left, in this
process, and hands the links' angles back to the modules. Where nothing on
the loop can happen before a later time (no frame on the wire or waiting
to go out, no timer of another party: :meth:`~aiko.drivers.virtual_time.LoopClock.next_event`),
the ticks before it run in one compiled call
(:meth:`~.plant.SimulatedAiko.run_ticks`) instead of one by one from the
loop: the same ticks at the same times, with the state that motion capture
may show recorded, and stopping at a tick in which a module has frames to
send, which go out at that tick's time. Motion capture's
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
from aiko.drivers.virtual_time import LoopClock
from aiko.firmware_interface.bank import ModuleBank
from aiko.firmware_interface.dbc import load_database
from aiko.firmware_interface.loop_bus import LoopBus
from aiko.firmware_interface.service import EmulatedJoints

from .plant import SAME_TIME, SimulatedAiko
from .simrig import RigConfig, rig_parts

__all__ = ["VirtualRig", "AHEAD", "MAX_AHEAD"]

AHEAD = True
"""Whether a virtual rig runs its ticks between the loop's events compiled
(the default of :class:`VirtualRig`'s ``ahead``; off, every tick is served
from the loop, one by one)."""

MAX_AHEAD = 1.0
"""The longest run of ticks computed in one call (s of trial time)."""


class _JointsAhead(EmulatedJoints):
    """The emulated modules' service, whose ticks between the loop's events
    the rig runs compiled (:meth:`VirtualRig.tick_ahead`)."""

    def __init__(self, rig: VirtualRig) -> None:
        super().__init__(rig.bus, rig.bank, clock=rig.clock.now, after_tick=rig._after_tick)
        self._rig = rig

    def _serve_tick(self, now: float, next_tick: float) -> float:
        if self._rig.takes_due_ticks():
            return next_tick        # _ahead runs it, compiled with those after it
        return super()._serve_tick(now, next_tick)

    def _ahead(self, now: float, next_tick: float) -> tuple[float, float]:
        after, wake = self._rig.tick_ahead(now, next_tick)
        if after == next_tick <= now:     # a tick due now that no compiled call ran
            after = super()._serve_tick(now, next_tick)
            self._flush(now)
            return after, after
        return after, wake


class VirtualRig:
    """See the module docstring. ``channel``: the loop bus's channel name (the
    trial opens its end with ``LoopBus(channel)``); ``deliver``: where the
    Tracker datagrams go (the trial's source's ``take_datagram``); ``clock``:
    the trial's clock (its time 0 is when the modules power up); ``ahead``:
    run the ticks between the loop's events compiled (default :data:`AHEAD`;
    only on a :class:`~aiko.drivers.virtual_time.LoopClock`)."""

    def __init__(self, config: RigConfig, clock, deliver: Callable[[bytes], None],
                 channel: str | None = None, bitrate: int | None = None,
                 ahead: bool | None = None) -> None:
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
        self.ahead = (AHEAD if ahead is None else ahead) and isinstance(clock, LoopClock)
        self.ticks_ahead = 0        # ticks run compiled, ahead of the loop's clock
        self.joints = (_JointsAhead(self) if self.ahead else
                       EmulatedJoints(self.bus, self.bank, clock=clock.now,
                                      after_tick=self._after_tick))
        self._first_frame = asyncio.Event()

        def handover(datagram: bytes) -> None:
            self._first_frame.set()
            deliver(datagram)

        self.sender = ViconUdpSender(config.udp_target, self.view.objects, clock,
                                     config.plant.mocap_rate, deliver=handover)

    @property
    def modules(self):
        """The joint modules, as of now."""
        return self.bank.modules

    def _after_tick(self, now: float) -> None:
        """The physics to the tick's time with the motors the tick left (the
        physics is always at the last tick: no record of the motors)."""
        self.aiko.advance(now)
        self.view.record(self.aiko.t, self.aiko.positions(), self.aiko.rotations())

    def takes_due_ticks(self) -> bool:
        """Whether :meth:`tick_ahead` runs a tick due now (compiled, before the
        ticks after it): always, but where a module babbles (a frame at every
        tick) or motion capture shows the past (its latency: a frame may need
        a state from before the next event, which a tick due now must record
        from the loop)."""
        return not self.bank.babbling and self.view.latency == 0

    def tick_ahead(self, now: float, next_tick: float) -> tuple[float, float]:
        """After the modules' service served at ``now``: the ticks from
        ``next_tick`` on (a tick due now among them, :meth:`takes_due_ticks`)
        that fall before the loop's next event (less the motion capture's
        latency, so that every state a frame may show is recorded), compiled.
        Returns (the next tick, when the service wakes: at the last tick's
        time if it left frames to send)."""
        tick = self.joints.tick_period
        # the ticks before the next event (a tick at its time is not: the
        # event may be a frame of motion capture, which shows the state before
        # its time), and a tick due now (which no frame of now shows)
        stop = min(self.clock.next_event(), self.joints.next_due(), now + MAX_AHEAD)
        stop -= SAME_TIME + self.view.latency
        if next_tick <= now + SAME_TIME and self.takes_due_ticks():
            stop = max(stop, next_tick + SAME_TIME)
        if self.bank.babbling:
            return next_tick, next_tick
        t_last, rows = self.aiko.run_ticks(next_tick - tick, stop, tick)
        done = int(round((t_last - next_tick) / tick)) + 1
        if done <= 0:
            return next_tick, next_tick
        self.ticks_ahead += done
        self.view.record(self.aiko.t, self.aiko.positions(), self.aiko.rotations())
        if rows >= 0:
            self.joints.queue(self.bank.ticked(t_last, rows))
            return t_last + tick, t_last
        return t_last + tick, t_last + tick

    async def ready(self) -> None:
        """Return once the first motion-capture frame is out: as the real-time
        rig, which powers its modules up and streams before a trial connects,
        so that a trial's first motion-capture sample finds a frame."""
        await self._first_frame.wait()

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
                "ticks_ahead": self.ticks_ahead,
                "frames_in": self.joints.frames_in, "frames_out": self.joints.frames_out,
                "mocap_frames": self.sender.sent, "mocap_held": self.view.held}
