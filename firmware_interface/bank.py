"""The joint modules of one bus ticked by one compiled call: a bank.

:class:`ModuleBank` runs the firmware of :class:`~aiko.firmware_interface.emulator.JointModule`
for all modules at once. The servos' substeps and the conditions they raise
(SYNC timeout, current limit, encoder fault) live in arrays and advance in a
numba kernel (:mod:`._bank_kernel`); what the bus delivers (NMT, SYNC, REF)
and what goes out (heartbeats, EMCY, STATE, with the faults' drops and
delays) stays with each module's own Python code, run on that module's row
of the arrays. The same frames come out at the same times, bit for bit, as
from :class:`~aiko.firmware_interface.group.JointModules`, the readable
reference the tests compare it with.

The arrays are the truth for the motors, links, targets and conditions; a
module object is brought up to date when it is handed out
(:attr:`ModuleBank.modules`, :meth:`ModuleBank.module`): read it, and change
the modules through the bank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ._bank_kernel import MAX_SUBSTEP, bank_tick
from .codec import Emcy
from .emulator import _DRIVING, JointModule, Outgoing
from .group import JointModules
from .protocol import EmcyCode, Motor, NodeState, error_register_bit

__all__ = ["ModuleBank"]

_CODES = np.array([EmcyCode.SYNC_TIMEOUT, EmcyCode.CURRENT_LIMIT, EmcyCode.ERROR_RESET,
                   EmcyCode.ENCODER_FAULT, Motor.NONE,
                   error_register_bit(EmcyCode.JOINT_LIMIT),
                   error_register_bit(EmcyCode.ENCODER_FAULT),
                   error_register_bit(EmcyCode.CURRENT_LIMIT),
                   error_register_bit(EmcyCode.SYNC_TIMEOUT)], dtype=np.int64)


def _in_order(sent: dict[int, list[Outgoing]]) -> list[Outgoing]:
    """The frames of a tick, module by module."""
    return [o for frames in sent.values() for o in frames]


class ModuleBank(JointModules):
    """See the module docstring: the modules' servos in arrays, one compiled
    tick for all."""

    def __init__(self, modules: Sequence[JointModule]) -> None:
        super().__init__(modules)
        n = len(self._modules)
        self._t = np.zeros(n)
        self._live = np.zeros(n, dtype=bool)
        self._driving = np.zeros(n, dtype=bool)
        self._operational = np.zeros(n, dtype=bool)
        self._clamped = np.zeros(n, dtype=bool)
        self._holding = np.zeros(n, dtype=bool)
        self._seen_sync = np.zeros(n, dtype=bool)
        self._last_sync = np.zeros(n)
        self._enc_reported = np.zeros(n, dtype=bool)
        self._next_hb = np.zeros(n)
        self._par = np.zeros((n, 4))
        self._ideal = np.zeros(n, dtype=bool)
        self._fault = np.zeros((n, 4))
        self._theta, self._link, self._duty, self._speed, self._strength, self._reported = (
            np.zeros((n, 2)) for _ in range(6))
        self._target, self._omega, self._sat_since = (np.zeros((n, 2)) for _ in range(3))
        self._enc_ok = np.ones((n, 2), dtype=bool)
        self._cur_lim = np.zeros((n, 2), dtype=bool)
        self._n_sub = np.zeros(n, dtype=np.int64)
        self._t_start = np.zeros(n)
        self._attention = np.zeros(n, dtype=bool)
        self._events = np.zeros((64, 5), dtype=np.int64)
        self._babbling = [m.faults.babble_from is not None for m in self._modules]
        for j in range(n):
            self._push(j)
        self._call(0, 0, 0.0)   # the compiled tick loaded now, not at the first tick

    # ------------------------------------------------ module <-> arrays
    def _push(self, j: int) -> None:
        """Module j's state into the arrays (after its Python code ran). The
        bank reads and writes the modules' private state here and in
        :meth:`_pull`: it is their firmware, run from arrays."""
        m = self._modules[j]
        self._t[j] = m._t
        self._live[j] = m.powered
        self._driving[j] = m.state in _DRIVING
        self._operational[j] = m.state == NodeState.OPERATIONAL
        self._clamped[j] = any(m._clamped)
        self._holding[j] = m._holding
        self._seen_sync[j] = m._seen_sync
        self._last_sync[j] = m._last_sync
        self._enc_reported[j] = m._encoder_reported
        self._next_hb[j] = m._next_heartbeat
        p, f = m.params, m.faults
        self._par[j] = (p.omega_max, p.k_p, p.backlash, m.limit)
        self._ideal[j] = p.ideal
        self._fault[j] = (math.inf if f.saturate_from is None else f.saturate_from,
                          int(f.saturate_motor),
                          math.inf if f.encoder_fault_at is None else f.encoder_fault_at,
                          int(f.encoder_motor))
        for k, ax in enumerate(m.axes):
            self._theta[j, k] = ax.theta
            self._link[j, k] = ax.link
            self._duty[j, k] = ax.duty
            self._speed[j, k] = ax.speed
            self._strength[j, k] = ax.strength
            self._enc_ok[j, k] = ax.encoder_ok
            self._reported[j, k] = ax.reported
            self._target[j, k] = m._target[k]
            self._omega[j, k] = m._omega[k]
            since = m._sat_since[k]
            self._sat_since[j, k] = math.nan if since is None else since
            self._cur_lim[j, k] = m._current_limit[k]

    def _pull(self, j: int) -> None:
        """What the kernel changed into module j's object."""
        m = self._modules[j]
        m._t = float(self._t[j])
        m._holding = bool(self._holding[j])
        m._encoder_reported = bool(self._enc_reported[j])
        for k, ax in enumerate(m.axes):
            ax.theta = float(self._theta[j, k])
            ax.link = float(self._link[j, k])
            ax.duty = float(self._duty[j, k])
            ax.speed = float(self._speed[j, k])
            ax.strength = float(self._strength[j, k])
            ax.encoder_ok = bool(self._enc_ok[j, k])
            ax.reported = float(self._reported[j, k])
        m._target = [float(x) for x in self._target[j]]
        m._omega = [float(x) for x in self._omega[j]]
        m._sat_since = [None if math.isnan(x) else float(x) for x in self._sat_since[j]]
        m._current_limit = [bool(x) for x in self._cur_lim[j]]

    @property
    def modules(self) -> list[JointModule]:
        for j in range(len(self._modules)):
            self._pull(j)
        return list(self._modules)

    def module(self, node: int) -> JointModule:
        j = self._index[node]
        self._pull(j)
        return self._modules[j]

    # ----------------------------------------------------------- the bus side
    def power_up(self, t: float) -> list[Outgoing]:
        out: list[Outgoing] = []
        for j, m in enumerate(self._modules):
            self._pull(j)
            out += m.power_up(t)
            self._push(j)
        return out

    def receive(self, t: float, arbitration_id: int, data: bytes, *, is_extended: bool = False,
                is_remote: bool = False) -> list[Outgoing]:
        listeners = self.listeners(arbitration_id)
        if len(listeners) == len(self._modules):   # all: one compiled tick for all
            ticked = self._tick_each(0, len(self._modules), float(t))
        else:
            ticked = {j: self._tick_each(j, j + 1, float(t)).get(j, []) for j in listeners}
        out: list[Outgoing] = []
        for j in listeners:   # as each module does: its tick's frames, then its answer
            out += ticked.get(j, [])
            self._pull(j)
            out += self._modules[j].receive(t, arbitration_id, data, is_extended=is_extended,
                                            is_remote=is_remote)
            self._push(j)
        return out

    def tick(self, t: float) -> list[Outgoing]:
        return self._tick(0, len(self._modules), t)

    def _tick(self, lo: int, hi: int, t: float) -> list[Outgoing]:
        return _in_order(self._tick_each(lo, hi, float(t)))

    def _tick_each(self, lo: int, hi: int, t: float) -> dict[int, list[Outgoing]]:
        """Modules lo..hi-1 advanced to t: the frames of each that sent any,
        in module order."""
        count = self._call(lo, hi, t)
        if count < 0:         # a long interval: room for its events, then again
            self._events = np.zeros((-count, 5), dtype=np.int64)
            count = self._call(lo, hi, t)
        return self._frames(lo, hi, t, count)

    def ticked(self, t: float, count: int) -> list[Outgoing]:
        """The frames of a tick of all modules to t (s) that compiled code
        ran on :meth:`kernel_arrays` (``count``: the event rows its
        ``bank_tick`` wrote), as :meth:`tick` sends them."""
        return _in_order(self._frames(0, len(self._modules), float(t), count))

    @property
    def babbling(self) -> bool:
        """Whether a module babbles (a fault that sends at every tick)."""
        return any(self._babbling)

    def _frames(self, lo: int, hi: int, t: float, count: int) -> dict[int, list[Outgoing]]:
        """The frames of modules lo..hi-1 after the kernel's tick to t."""
        sent: dict[int, list[Outgoing]] = {}
        e = 0
        for j in range(lo, hi):
            if self._attention[j] or (self._babbling[j] and self._n_sub[j]):
                frames: list[Outgoing] = []
                e = self._emit(j, t, e, count, frames)
                if frames:
                    sent[j] = frames
        return sent

    def kernel_arrays(self, until: float) -> tuple[tuple, np.ndarray, np.ndarray]:
        """(the bank's arrays in ``bank_tick``'s order, from the modules'
        times to ``attention``; the codes; event rows enough for any tick
        that ends by ``until`` (s)), for compiled code that ticks the bank
        itself (the simulated Aiko's offline loop). Ticks made so send no
        frames; the arrays stay the bank's."""
        span = until - float(self._t.min(initial=until))
        rows = 4 * len(self._modules) * (math.ceil(span / MAX_SUBSTEP) + 1)
        if rows > len(self._events):
            self._events = np.zeros((rows, 5), dtype=np.int64)
        return ((self._t, self._live, self._driving, self._operational, self._clamped,
                 self._holding, self._seen_sync, self._last_sync, self._enc_reported,
                 self._next_hb, self._par, self._ideal, self._fault, self._theta, self._link,
                 self._duty, self._speed, self._strength, self._enc_ok, self._reported,
                 self._target, self._omega, self._sat_since, self._cur_lim, self._n_sub,
                 self._t_start, self._attention), _CODES, self._events)

    def _call(self, lo: int, hi: int, t: float) -> int:
        return bank_tick(lo, hi, t, self._t, self._live, self._driving, self._operational,
                         self._clamped, self._holding, self._seen_sync, self._last_sync,
                         self._enc_reported, self._next_hb, self._par, self._ideal, self._fault,
                         self._theta, self._link, self._duty, self._speed, self._strength,
                         self._enc_ok, self._reported, self._target, self._omega,
                         self._sat_since, self._cur_lim, _CODES, self._events, self._n_sub,
                         self._t_start, self._attention)

    def _emit(self, j: int, t: float, e: int, count: int, out: list[Outgoing]) -> int:
        """Module j's frames of the tick to t, in the order its own tick sends
        them: per substep the events, the heartbeats due, the babble."""
        m = self._modules[j]
        ev = self._events
        n = int(self._n_sub[j])
        t0 = float(self._t_start[j])
        h = (t - t0) / n
        babble = self._babbling[j]
        for i in range(1, n + 1):
            now = t if i == n else t0 + i * h
            while e < count and ev[e, 0] == j and ev[e, 1] == i:
                out += m._send(now, Emcy(m.node, int(ev[e, 2]), int(ev[e, 4]), int(ev[e, 3])))
                e += 1
            if m._next_heartbeat <= now + 1e-12:
                out += m._heartbeats(now)
            if babble:
                out += m._babble(now)
        self._next_hb[j] = m._next_heartbeat
        return e

    # -------------------------------------------------- motors and links
    def motor_angles(self) -> np.ndarray:
        return self._theta.copy()

    def motor_speeds(self) -> np.ndarray:
        return self._speed.copy()

    def motors_driven(self) -> np.ndarray:
        on = self._live & self._driving
        return on[:, None] & self._enc_ok

    def link_angles(self) -> np.ndarray:
        return self._link.copy()

    def set_link_angles(self, angles: np.ndarray) -> None:
        self._link[:] = np.asarray(angles, dtype=float)[:, :2]

    def set_angles(self, angles: np.ndarray) -> None:
        a = np.asarray(angles, dtype=float)[:, :2]
        self._theta[:] = a
        self._link[:] = a
        self._reported[:] = a
        self._target[:] = a

    def backlash(self) -> np.ndarray:
        return self._par[:, 2].copy()
