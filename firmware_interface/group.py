"""The joint modules of one bus, as one object: what a bus delivers to them
and what their ticks emit, and their motors and links as arrays.

:class:`JointModules` is the readable group: each module is a
:class:`~aiko.firmware_interface.emulator.JointModule` that handles its own
frames and ticks. :class:`~aiko.firmware_interface.bank.ModuleBank` is the
same firmware ticked by one compiled call for all modules at once (the
simulated Aiko's modules tick 500 times a simulated second); the two have
the same methods and give the same frames at the same times, which the tests
check against each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from .emulator import JointModule, Outgoing
from .protocol import MAX_NODE_ID, REF_BASE

__all__ = ["JointModules", "Motors"]


class Motors(Protocol):
    """What a plant reads and writes of the modules: their motors and links
    as arrays (modules, 2), rad and rad/s."""

    def __len__(self) -> int: ...

    def motor_angles(self) -> np.ndarray: ...

    def motor_speeds(self) -> np.ndarray: ...

    def motors_driven(self) -> np.ndarray: ...

    def backlash(self) -> np.ndarray: ...

    def set_angles(self, angles: np.ndarray) -> None: ...

    def set_link_angles(self, angles: np.ndarray) -> None: ...


class JointModules:
    """Joint modules sharing one bus, each ticked in Python (the reference).

    A REF reaches only the node it names (the others would decode it only to
    ignore it), and the modules that lose frames (they draw for every frame
    they hear); every other frame reaches every module.
    """

    def __init__(self, modules: Sequence[JointModule]) -> None:
        self._modules = list(modules)
        nodes = [m.node for m in self._modules]
        if len(set(nodes)) != len(nodes):
            raise ValueError(f"node ids must be distinct, got {nodes}")
        self.nodes = tuple(nodes)
        self._index = {node: j for j, node in enumerate(nodes)}
        self._lossy = [j for j, m in enumerate(self._modules) if m.faults.drop_fraction]

    def __len__(self) -> int:
        return len(self._modules)

    @property
    def modules(self) -> list[JointModule]:
        """The modules, as of now (read them; change them through the group)."""
        return list(self._modules)

    def module(self, node: int) -> JointModule:
        """The module with node id ``node`` (KeyError if none)."""
        return self._modules[self._index[node]]

    def listeners(self, arbitration_id: int) -> list[int]:
        """Indices of the modules a frame with this identifier reaches."""
        if REF_BASE < arbitration_id <= REF_BASE + MAX_NODE_ID:
            j = self._index.get(arbitration_id - REF_BASE)
            named = [] if j is None else [j]
            return named + [k for k in self._lossy if k != j]
        return list(range(len(self._modules)))

    # ----------------------------------------------------------- the bus side
    def power_up(self, t: float) -> list[Outgoing]:
        out: list[Outgoing] = []
        for m in self._modules:
            out += m.power_up(t)
        return out

    def receive(self, t: float, arbitration_id: int, data: bytes, *, is_extended: bool = False,
                is_remote: bool = False) -> list[Outgoing]:
        """One frame heard at t by every module it reaches (:meth:`listeners`)."""
        out: list[Outgoing] = []
        for j in self.listeners(arbitration_id):
            out += self._modules[j].receive(t, arbitration_id, data, is_extended=is_extended,
                                            is_remote=is_remote)
        return out

    def tick(self, t: float) -> list[Outgoing]:
        """Every module advanced to t, in node order."""
        out: list[Outgoing] = []
        for m in self._modules:
            out += m.tick(t)
        return out

    # -------------------------------------------------- motors and links
    def motor_angles(self) -> np.ndarray:
        """(modules, 2) motor angles (H, V), rad."""
        return np.array([m.motor_angles for m in self._modules], dtype=float).reshape(-1, 2)

    def motor_speeds(self) -> np.ndarray:
        """(modules, 2) motor speeds of the last substep, rad/s."""
        return np.array([m.motor_speeds for m in self._modules], dtype=float).reshape(-1, 2)

    def motors_driven(self) -> np.ndarray:
        """(modules, 2) bool: the motor holds or tracks a target."""
        return np.array([m.motors_driven for m in self._modules], dtype=bool).reshape(-1, 2)

    def link_angles(self) -> np.ndarray:
        """(modules, 2) link angles (alpha_h, alpha_v), rad."""
        return np.array([m.link_angles for m in self._modules], dtype=float).reshape(-1, 2)

    def set_link_angles(self, angles: np.ndarray) -> None:
        """The link side of every module from ``angles`` (modules, >= 2), rad."""
        for m, a in zip(self._modules, angles, strict=True):
            m.set_link_angles(a[0], a[1])

    def set_angles(self, angles: np.ndarray) -> None:
        """Motors and links placed at ``angles`` (modules, >= 2), rad."""
        for m, a in zip(self._modules, angles, strict=True):
            m.set_angles(a[0], a[1])

    def backlash(self) -> np.ndarray:
        """(modules,) each module's free play, rad."""
        return np.array([m.params.backlash for m in self._modules], dtype=float)
