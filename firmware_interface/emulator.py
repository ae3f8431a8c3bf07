"""Emulated joint modules: the firmware's behaviour as a pure state machine.

One :class:`JointModule` per node. It owns no clock and no bus: the caller passes
the time with every call and sends what it returns, so the same object runs in
virtual time in tests and on a real bus in :mod:`aiko.firmware_interface.service`.

* ``receive(t, arbitration_id, data, ...)`` handles one received frame;
* ``tick(t)`` advances the joints to t and emits what falls due (heartbeats,
  SYNC timeout, current-limit and encoder-fault EMCY);
* both return a list of :class:`Outgoing` (a send time and a frame): replies can
  be delayed by fault injection.

The joint behind each motor is a first-order servo with a duty limit: duty (%) =
clip(100 (k_p (ref - theta) + omega_ref / omega_max)), the motor turns at
duty/100 * omega_max; saturation shows in the duty and the status bits. Between
motor and link there is free play (backlash) of ``backlash`` rad that the
encoder, on the motor, does not see. The link angles can be read and set from
outside (on the simulated rig a physics model drives the link side).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from .codec import (
    Emcy,
    Frame,
    FrameError,
    Heartbeat,
    JointState,
    Nmt,
    RawFrame,
    Ref,
    Sync,
    decode,
)
from .protocol import (
    CURRENT_LIMIT_TIME,
    HEARTBEAT_PERIOD,
    JOINT_LIMIT,
    MAX_NODE_ID,
    SYNC_TIMEOUT,
    EmcyCode,
    Motor,
    NmtCommand,
    NodeState,
    Status,
    error_register_bit,
)

__all__ = ["JointModelParams", "FaultConfig", "Outgoing", "MotorAxis", "JointModule"]

_MAX_SUBSTEP = 0.00125
"""The servo's longest integration step (s): a tick's interval is cut into
the fewest equal substeps no longer than this (two of 1 ms in a 2 ms tick;
the servo's time constant is 1 / (k_p omega_max), 17 ms)."""

_SATURATED = 100.0 - 1e-9
"""|duty| (%) from which a motor counts as saturated."""

_DRIVING = frozenset((NodeState.OPERATIONAL, NodeState.PRE_OPERATIONAL))


@dataclass(frozen=True)
class JointModelParams:
    """The joint behind one motor.

    omega_max: motor speed at full duty (rad/s); k_p: duty per rad of error
    (1/rad, times 100 %); backlash: free play between motor and link (rad,
    3-5 degrees on Aiko). ``ideal``: the motor is at its target at every
    instant (no tracking lag, no duty or speed limit, never saturated), for a
    simulated rig without the servo's imperfections.
    """

    omega_max: float = 3.0
    k_p: float = 20.0
    backlash: float = math.radians(4.0)
    ideal: bool = False

    def __post_init__(self) -> None:
        if not (self.omega_max > 0 and self.k_p > 0 and self.backlash >= 0):
            raise ValueError("omega_max and k_p must be positive, backlash >= 0")


@dataclass(frozen=True)
class FaultConfig:
    """Faults to inject into one node (times on the caller's clock, s).

    drop_fraction: share of frames lost, both received and sent;
    silent_from: from then on the node transmits nothing (no heartbeat, STATE
    or EMCY); encoder_fault_at: the encoder of ``encoder_motor`` fails then;
    saturate_from: from then on ``saturate_motor`` has a tenth of its torque and
    saturates; reply_delay: every transmission is delayed by this;
    babble_from: from then on the node also sends ``babble_rate`` random
    frames a second (any identifier, 0-8 random bytes: a broken node or a
    fuzzer on the bus); seed: of the drop decisions and the babble.
    """

    drop_fraction: float = 0.0
    silent_from: float | None = None
    encoder_fault_at: float | None = None
    encoder_motor: int = Motor.H
    saturate_from: float | None = None
    saturate_motor: int = Motor.V
    reply_delay: float = 0.0
    babble_from: float | None = None
    babble_rate: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.drop_fraction <= 1.0:
            raise ValueError(f"drop_fraction must lie in [0, 1], got {self.drop_fraction}")
        if self.reply_delay < 0:
            raise ValueError(f"reply_delay must be >= 0, got {self.reply_delay}")
        if not (0.0 <= self.babble_rate <= 5000.0):
            raise ValueError(f"babble_rate must lie in [0, 5000] frames/s, got {self.babble_rate}")
        if self.encoder_motor not in (Motor.H, Motor.V) or self.saturate_motor not in (Motor.H,
                                                                                        Motor.V):
            raise ValueError("a fault's motor must be 0 (H) or 1 (V)")


@dataclass(frozen=True)
class Outgoing:
    """A frame to transmit at time ``at``."""

    at: float
    frame: Frame | RawFrame


@dataclass
class MotorAxis:
    """One motor, its encoder and the link behind the free play."""

    params: JointModelParams
    theta: float = 0.0          # motor (encoder side) angle, rad
    link: float = 0.0           # link angle, rad
    duty: float = 0.0           # %
    speed: float = 0.0          # motor speed of the last substep, rad/s
    strength: float = 1.0       # share of the motor's torque available
    encoder_ok: bool = True
    reported: float = 0.0       # what the encoder reports

    def advance(self, dt: float, target: float | None, omega_ref: float) -> None:
        """Integrate dt seconds: servo to ``target`` (None: motor off, limp)."""
        p = self.params
        if target is None or not self.encoder_ok:
            self.duty = 0.0
            self.speed = 0.0
            # a limp motor is back-driven by the link, inside the free play
            self._couple(move_motor=True)
        elif p.ideal:
            self.duty = 0.0
            self.speed = omega_ref
            self.theta = target
            self._couple(move_motor=False)
        else:   # the hot path of every emulated tick: written out, no calls
            theta = self.theta
            err = target - theta
            duty = 100.0 * (p.k_p * err + omega_ref / p.omega_max)
            if duty > 100.0:
                duty = 100.0
            elif duty < -100.0:
                duty = -100.0
            self.duty = duty
            step = duty / 100.0 * p.omega_max * self.strength * dt
            # the servo does not overshoot its target within one substep
            if (err > 0 and step > err and omega_ref <= 0) or (err < 0 and step < err
                                                              and omega_ref >= 0):
                step = err
            self.speed = step / dt if dt > 0 else 0.0
            theta += step
            self.theta = theta
            half = 0.5 * p.backlash
            d = self.link - theta
            if d > half:
                self.link = theta + half
            elif d < -half:
                self.link = theta - half
        if self.encoder_ok:
            self.reported = self.theta

    def _couple(self, move_motor: bool) -> None:
        half = 0.5 * self.params.backlash
        d = self.link - self.theta
        if move_motor:
            if d > half:
                self.theta = self.link - half
            elif d < -half:
                self.theta = self.link + half
        else:
            if d > half:
                self.link = self.theta + half
            elif d < -half:
                self.link = self.theta - half

    @property
    def saturated(self) -> bool:
        return abs(self.duty) >= _SATURATED


@dataclass
class JointModule:
    """The firmware of one joint module (node ids 1..63), in virtual time."""

    node: int
    params: JointModelParams = field(default_factory=JointModelParams)
    faults: FaultConfig = field(default_factory=FaultConfig)
    limit: float = JOINT_LIMIT

    def __post_init__(self) -> None:
        if not 1 <= self.node <= MAX_NODE_ID:
            raise ValueError(f"node id must lie in 1..{MAX_NODE_ID}, got {self.node}")
        self.axes = (MotorAxis(self.params), MotorAxis(self.params))
        self.state = NodeState.BOOT_UP
        self.powered = False
        self._rng = random.Random(self.faults.seed * 1009 + self.node)
        self._t = 0.0
        self._next_heartbeat = math.inf
        self._hb_origin = 0.0
        self._hb_count = 0
        self._stored_ref: Ref | None = None      # latest REF received
        self._target = [0.0, 0.0]                # reference being applied
        self._omega = [0.0, 0.0]
        self._clamped = [False, False]
        self._seen_sync = False
        self._last_sync = 0.0
        self._holding = False
        self._holding_reported = False           # bit5 still owed to the next STATE
        self._sat_since: list[float | None] = [None, None]
        self._current_limit = [False, False]
        self._encoder_reported = False
        self._babbled = 0                        # random frames sent so far
        self.nmt_obeyed: list[int] = []            # NMT commands obeyed (for tests and demos)

    # --------------------------------------------------------------- outside
    @property
    def link_angles(self) -> tuple[float, float]:
        """(alpha_h, alpha_v) of the link side, rad."""
        return self.axes[0].link, self.axes[1].link

    def set_link_angles(self, alpha_h: float, alpha_v: float) -> None:
        """Set the link side (e.g. from a physics model); the motors stay."""
        self.axes[0].link = float(alpha_h)
        self.axes[1].link = float(alpha_v)

    @property
    def motor_angles(self) -> tuple[float, float]:
        return self.axes[0].theta, self.axes[1].theta

    @property
    def motor_speeds(self) -> tuple[float, float]:
        """(H, V) motor speed of the last substep, rad/s."""
        return self.axes[0].speed, self.axes[1].speed

    @property
    def motors_driven(self) -> tuple[bool, bool]:
        """Whether each motor holds or tracks a target (pre-operational or
        operational, encoder working); a motor that is not driven is limp."""
        on = self.powered and self.state in (NodeState.OPERATIONAL, NodeState.PRE_OPERATIONAL)
        return on and self.axes[0].encoder_ok, on and self.axes[1].encoder_ok

    def set_angles(self, alpha_h: float, alpha_v: float) -> None:
        """Place motors and links at the given angles (no free play taken up)."""
        for ax, a in zip(self.axes, (alpha_h, alpha_v), strict=True):
            ax.theta = ax.link = ax.reported = float(a)
        self._target = [float(alpha_h), float(alpha_v)]

    @property
    def status(self) -> Status:
        s = Status(0)
        if self.state == NodeState.OPERATIONAL:
            s |= Status.OPERATIONAL
        if self.axes[0].saturated:
            s |= Status.H_SATURATED
        if self.axes[1].saturated:
            s |= Status.V_SATURATED
        if self._clamped[0]:
            s |= Status.H_CLAMPED
        if self._clamped[1]:
            s |= Status.V_CLAMPED
        if self._holding or self._holding_reported:
            s |= Status.HOLDING
        return s

    # -------------------------------------------------------------- lifecycle
    def power_up(self, t: float) -> list[Outgoing]:
        """Switch the module on at t: boot-up heartbeat, then pre-operational."""
        self.powered = True
        self._t = t
        return self._boot(t, restart_controller=True)

    def _boot(self, t: float, restart_controller: bool) -> list[Outgoing]:
        """Boot-up heartbeat, then pre-operational. Power-up and reset node restart
        the motor controller (its saturation timers start over); reset
        communication leaves it running."""
        out = self._send(t, Heartbeat(self.node, NodeState.BOOT_UP))
        self._stored_ref = None
        if restart_controller:
            self._sat_since = [None, None]
        self._enter(t, NodeState.PRE_OPERATIONAL, out)
        self._hb_origin = t
        self._hb_count = 1
        self._next_heartbeat = t + HEARTBEAT_PERIOD
        if not self.axes[self.faults.encoder_motor].encoder_ok:
            self._encoder_reported = False  # re-detected after the restart
        return out

    def _enter(self, t: float, new: NodeState, out: list[Outgoing]) -> None:
        old = self.state
        if old == NodeState.OPERATIONAL and new != NodeState.OPERATIONAL:
            was_active = any(self._clamped) or self._holding
            self._clamped = [False, False]
            self._holding = False
            self._holding_reported = False
            if was_active:
                out += self._emcy(t, EmcyCode.ERROR_RESET, Motor.NONE)
        self.state = new
        if new in (NodeState.PRE_OPERATIONAL, NodeState.OPERATIONAL):
            # hold the angle the motors have now
            self._target = [self.axes[0].theta, self.axes[1].theta]
            self._omega = [0.0, 0.0]
        if new == NodeState.OPERATIONAL:
            self._seen_sync = False
            self._stored_ref = None

    # -------------------------------------------------------------- receiving
    def receive(self, t: float, arbitration_id: int, data: bytes, *, is_extended: bool = False,
                is_remote: bool = False) -> list[Outgoing]:
        """Handle one frame received at t (the joints are advanced to t first)."""
        out = self.tick(t)
        if not self.powered or is_extended or is_remote:
            return out
        if self.faults.drop_fraction and self._rng.random() < self.faults.drop_fraction:
            return out
        try:
            frame = decode(arbitration_id, data)
        except FrameError:  # unknown id or wrong DLC: ignored, never answered
            return out
        if isinstance(frame, Nmt):
            if frame.node_id in (0, self.node):
                out += self._nmt(t, frame.command)
        elif isinstance(frame, Sync):
            if self.state == NodeState.OPERATIONAL:
                out += self._sync(t, frame.counter)
        elif isinstance(frame, Ref) and frame.node == self.node:
            if self.state == NodeState.OPERATIONAL:
                self._stored_ref = frame
        return out

    def _nmt(self, t: float, command: int) -> list[Outgoing]:
        out: list[Outgoing] = []
        if command == NmtCommand.START:
            if self.state != NodeState.OPERATIONAL:
                self._enter(t, NodeState.OPERATIONAL, out)
        elif command == NmtCommand.STOP:
            self._enter(t, NodeState.STOPPED, out)
        elif command == NmtCommand.ENTER_PRE_OPERATIONAL:
            if self.state != NodeState.PRE_OPERATIONAL:
                self._enter(t, NodeState.PRE_OPERATIONAL, out)
        elif command in (NmtCommand.RESET_NODE, NmtCommand.RESET_COMMUNICATION):
            self._enter(t, NodeState.BOOT_UP, out)
            out += self._boot(t, restart_controller=command == NmtCommand.RESET_NODE)
        else:
            return out
        self.nmt_obeyed.append(command)
        return out

    def _sync(self, t: float, counter: int) -> list[Outgoing]:
        out: list[Outgoing] = []
        self._seen_sync = True
        self._last_sync = t
        if self._holding:
            self._holding = False
            self._holding_reported = True
            out += self._emcy(t, EmcyCode.ERROR_RESET, Motor.NONE)
        if self._stored_ref is not None:
            self._apply(t, self._stored_ref, out)
        out += self._send(t, self._state_frame(counter))
        self._holding_reported = False
        return out

    def _apply(self, t: float, ref: Ref, out: list[Outgoing]) -> None:
        for k, (a, w) in enumerate(((ref.alpha_h, ref.omega_h), (ref.alpha_v, ref.omega_v))):
            clamped = abs(a) > self.limit
            self._target[k] = max(-self.limit, min(self.limit, a))
            self._omega[k] = 0.0 if clamped else w
            if clamped and not self._clamped[k]:
                self._clamped[k] = True
                out += self._emcy(t, EmcyCode.JOINT_LIMIT, Motor(k))
            elif not clamped and self._clamped[k]:
                self._clamped[k] = False
                out += self._emcy(t, EmcyCode.ERROR_RESET, Motor(k))

    def _state_frame(self, counter: int) -> JointState:
        lim = 32767e-4
        ah = max(-lim, min(lim, self.axes[0].reported))
        av = max(-lim, min(lim, self.axes[1].reported))
        return JointState(self.node, ah, av, int(round(self.axes[0].duty)),
                          int(round(self.axes[1].duty)), self.status, counter)

    # --------------------------------------------------------------- ticking
    def tick(self, t: float) -> list[Outgoing]:
        """Advance the joints to t, in equal substeps of at most 1.25 ms, and
        emit what is due by then."""
        out: list[Outgoing] = []
        if not self.powered or t <= self._t:
            return out
        t0 = self._t
        n = max(1, math.ceil((t - t0) / _MAX_SUBSTEP - 1e-9))
        h = (t - t0) / n
        f = self.faults
        timed = f.saturate_from is not None or f.encoder_fault_at is not None
        for i in range(1, n + 1):
            now = t if i == n else t0 + i * h
            if timed:
                self._timed_faults(now)
            self._substep(h)
            self._t = now
            out += self._conditions(now)
            out += self._heartbeats(now)
            if f.babble_from is not None:
                out += self._babble(now)
        return out

    def _heartbeats(self, now: float) -> list[Outgoing]:
        """The heartbeats due by ``now``, each at its own time."""
        out: list[Outgoing] = []
        while self._next_heartbeat <= now + 1e-12:
            out += self._send(self._next_heartbeat, Heartbeat(self.node, self.state))
            self._hb_count += 1
            self._next_heartbeat = self._hb_origin + self._hb_count * HEARTBEAT_PERIOD
        return out

    def _timed_faults(self, now: float) -> None:
        f = self.faults
        if f.saturate_from is not None and now >= f.saturate_from:
            self.axes[f.saturate_motor].strength = 0.1
        if f.encoder_fault_at is not None and now >= f.encoder_fault_at:
            self.axes[f.encoder_motor].encoder_ok = False

    def _substep(self, h: float) -> None:
        """Both motors over h seconds: tracking the reference (moving at its
        speed unless holding), or limp when the node does not drive them."""
        if self.state not in _DRIVING:
            for ax in self.axes:
                ax.advance(h, None, 0.0)
            return
        target, omega, holding = self._target, self._omega, self._holding
        for k, ax in enumerate(self.axes):
            w = 0.0 if holding else omega[k]
            ax.advance(h, target[k], w)
            if w:
                target[k] = max(-self.limit, min(self.limit, target[k] + w * h))

    def _babble(self, now: float) -> list[Outgoing]:
        """The random frames due by ``now`` (the ``babble`` fault)."""
        f = self.faults
        if f.babble_from is None or f.babble_rate <= 0 or now < f.babble_from:
            return []
        out: list[Outgoing] = []
        while f.babble_from + self._babbled / f.babble_rate <= now + 1e-12:
            t = f.babble_from + self._babbled / f.babble_rate
            self._babbled += 1
            rng = self._rng
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(9)))
            out += self._send(t, RawFrame(rng.randrange(0x800), data))
        return out

    def _conditions(self, t: float) -> list[Outgoing]:
        out: list[Outgoing] = []
        if (self._seen_sync and not self._holding and self.state == NodeState.OPERATIONAL
                and t - self._last_sync >= SYNC_TIMEOUT - 1e-12):
            self._holding = True
            self._target = [self.axes[0].theta, self.axes[1].theta]
            self._omega = [0.0, 0.0]
            out += self._emcy(t, EmcyCode.SYNC_TIMEOUT, Motor.NONE)
        sat_since, limited = self._sat_since, self._current_limit
        for k, ax in enumerate(self.axes):
            if abs(ax.duty) >= _SATURATED:
                since = sat_since[k]
                if since is None:
                    since = sat_since[k] = t
                if not limited[k] and t - since > CURRENT_LIMIT_TIME:
                    limited[k] = True
                    out += self._emcy(t, EmcyCode.CURRENT_LIMIT, Motor(k))
            elif sat_since[k] is not None or limited[k]:
                sat_since[k] = None
                if limited[k]:
                    limited[k] = False
                    out += self._emcy(t, EmcyCode.ERROR_RESET, Motor(k))
        if not self._encoder_reported and not self.axes[self.faults.encoder_motor].encoder_ok:
            self._encoder_reported = True
            out += self._emcy(t, EmcyCode.ENCODER_FAULT, Motor(self.faults.encoder_motor))
        return out

    # --------------------------------------------------------------- sending
    def error_register(self) -> int:
        reg = 0
        if any(self._clamped):
            reg |= error_register_bit(EmcyCode.JOINT_LIMIT)
        if any(not ax.encoder_ok for ax in self.axes):
            reg |= error_register_bit(EmcyCode.ENCODER_FAULT)
        if any(self._current_limit):
            reg |= error_register_bit(EmcyCode.CURRENT_LIMIT)
        if self._holding:
            reg |= error_register_bit(EmcyCode.SYNC_TIMEOUT)
        return reg

    def _emcy(self, t: float, code: int, motor: int) -> list[Outgoing]:
        return self._send(t, Emcy(self.node, int(code), self.error_register(), int(motor)))

    def _send(self, t: float, frame: Frame | RawFrame) -> list[Outgoing]:
        f = self.faults
        if f.silent_from is not None and t >= f.silent_from:
            return []
        if f.drop_fraction and self._rng.random() < f.drop_fraction:
            return []
        return [Outgoing(t + f.reply_delay, frame)]
