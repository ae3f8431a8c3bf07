"""Joint modules in virtual time, without a bus: a test double for the PC side.

``rig = VirtualJointRig.with_nodes(10)``; ``rig.power_up()``; ``rig.send(Nmt(1))``;
``rig.advance(0.1)``; ``rig.received(JointState)``. Time moves only when the caller
advances it, so timing behaviour (heartbeats, SYNC timeout, current limit) is
tested exactly and instantly.
"""

from __future__ import annotations

import heapq
import itertools
import uuid
from collections.abc import Iterable

import can

from .codec import Frame, FrameError, RawFrame, decode, encode
from .emulator import FaultConfig, JointModelParams, JointModule, Outgoing

__all__ = ["VirtualJointRig", "BusJointRig"]


class VirtualJointRig:
    """Modules on a perfect, instantaneous bus, driven in virtual time."""

    def __init__(self, modules: Iterable[JointModule], t0: float = 0.0) -> None:
        self.modules = list(modules)
        self.t = t0
        self.log: list[tuple[float, Frame | RawFrame]] = []   # RawFrame: not the protocol's
        self._pending: list[tuple[float, int, Frame | RawFrame]] = []
        self._seq = itertools.count()

    @classmethod
    def with_nodes(cls, n: int, faults: dict[int, FaultConfig] | None = None,
                   params: JointModelParams | None = None) -> VirtualJointRig:
        faults = faults or {}
        return cls(JointModule(i, params=params or JointModelParams(),
                               faults=faults.get(i, FaultConfig())) for i in range(1, n + 1))

    def module(self, node: int) -> JointModule:
        return next(m for m in self.modules if m.node == node)

    def _collect(self, items: list[Outgoing]) -> None:
        for o in items:
            heapq.heappush(self._pending, (o.at, next(self._seq), o.frame))
        while self._pending and self._pending[0][0] <= self.t + 1e-12:
            at, _, frame = heapq.heappop(self._pending)
            self.log.append((at, frame))

    def power_up(self) -> None:
        for m in self.modules:
            self._collect(m.power_up(self.t))

    def send(self, frame: Frame) -> None:
        """Deliver a protocol frame to every module at the current time."""
        self.send_raw(*encode(frame))

    def send_raw(self, arbitration_id: int, data: bytes, *, is_extended: bool = False,
                 is_remote: bool = False) -> None:
        """Deliver any frame (also malformed ones) at the current time."""
        for m in self.modules:
            self._collect(m.receive(self.t, arbitration_id, bytes(data), is_extended=is_extended,
                                    is_remote=is_remote))

    def advance(self, dt: float, step: float = 0.001) -> None:
        """Move time forward by dt, ticking the modules every ``step``."""
        end = self.t + dt
        while self.t < end - 1e-12:
            self.t = min(end, self.t + step)
            for m in self.modules:
                self._collect(m.tick(self.t))
        self._collect([])

    def received(self, kind: type | tuple[type, ...] | None = None, node: int | None = None,
                 since: float | None = None) -> list[tuple[float, Frame | RawFrame]]:
        """Frames the modules sent, filtered by type, node and time."""
        out = []
        for at, f in self.log:
            if kind is not None and not isinstance(f, kind):
                continue
            if node is not None and getattr(f, "node", None) != node:
                continue
            if since is not None and at < since - 1e-12:
                continue
            out.append((at, f))
        return out


class BusJointRig(VirtualJointRig):
    """The same, but every frame crosses a python-can bus both ways (by default
    a fresh virtual channel): the PC's frames are sent on one bus object and read
    by the modules from another; their answers travel back the same way. Time is
    still virtual: the rig reads the bus without waiting."""

    def __init__(self, modules: Iterable[JointModule], t0: float = 0.0, *,
                 pc_bus: can.BusABC | None = None, node_bus: can.BusABC | None = None) -> None:
        super().__init__(modules, t0)
        if pc_bus is None or node_bus is None:
            channel = f"aiko-rig-{uuid.uuid4()}"
            pc_bus = can.Bus(interface="virtual", channel=channel, ignore_config=True)
            node_bus = can.Bus(interface="virtual", channel=channel, ignore_config=True)
        self.pc_bus = pc_bus
        self.node_bus = node_bus

    def close(self) -> None:
        self.pc_bus.shutdown()
        self.node_bus.shutdown()

    def _collect(self, items: list[Outgoing]) -> None:
        for o in items:
            heapq.heappush(self._pending, (o.at, next(self._seq), o.frame))
        while self._pending and self._pending[0][0] <= self.t + 1e-12:
            at, _, frame = heapq.heappop(self._pending)
            ident, data = encode(frame)
            self.node_bus.send(can.Message(arbitration_id=ident, data=data, is_extended_id=False))
            msg = self.pc_bus.recv(timeout=1.0)
            assert msg is not None, "the virtual bus lost a frame"
            try:
                got: Frame | RawFrame = decode(msg.arbitration_id, bytes(msg.data))
            except FrameError:   # a babbling module's frame
                got = RawFrame(msg.arbitration_id, bytes(msg.data))
            self.log.append((at, got))

    def send_raw(self, arbitration_id: int, data: bytes, *, is_extended: bool = False,
                 is_remote: bool = False) -> None:
        self.pc_bus.send(can.Message(arbitration_id=arbitration_id, data=data,
                                     is_extended_id=is_extended, is_remote_frame=is_remote,
                                     dlc=len(data), check=False))
        msg = self.node_bus.recv(timeout=1.0)
        assert msg is not None, "the virtual bus lost a frame"
        for m in self.modules:
            self._collect(m.receive(self.t, msg.arbitration_id, bytes(msg.data[:msg.dlc]),
                                    is_extended=msg.is_extended_id,
                                    is_remote=msg.is_remote_frame))
