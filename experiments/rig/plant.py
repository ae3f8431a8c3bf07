"""The simulated Aiko's physics: the non-smooth model behind the emulated joint
modules, and what motion capture sees of it.

Pure: no clock, no sockets. The caller (``aiko emulate --plant``) advances it in
real time after every tick of the joint modules.

One source of truth for every joint angle, the physics:

* each module's servo decides what its motor does (the firmware's tracking
  loop with its duty and speed limit, the reference applied on SYNC, the hold
  after a SYNC timeout or in pre-operational, a limp motor when stopped);
* the motor drives the link through the free play: the model's PD joint law
  (68)-(69) pulls the link toward the edge of the play around the motor angle
  and exerts nothing while the link is inside the play (the paper's error
  sources VIII-F 1 and 2). A limp motor exerts nothing;
* the encoder reports the motor side, motion capture the model's links (with
  optional noise and latency, VIII-F 7).

With every imperfection off (:meth:`PlantParams.ideal`: an ideal servo, no free
play, no noise, no latency) the plant is the ideal model driven by the
references as the modules apply them on SYNC.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aiko.control.gait import JOINT_LIMIT
from aiko.experiments.rig.plant_params import PlantParams
from aiko.experiments.rig.references import pd_references, recorded_motors
from aiko.firmware_interface.bank import ModuleBank
from aiko.firmware_interface.codec import Nmt, Ref, Sync, encode
from aiko.firmware_interface.emulator import JointModelParams, JointModule
from aiko.firmware_interface.group import JointModules, Motors
from aiko.firmware_interface.protocol import NmtCommand
from aiko.model import SnakeModel, SnakeParams, SnakeState
from aiko.model.errors import ParameterError

__all__ = ["PlantParams", "SimulatedAiko", "MocapView", "euler_xyz", "drive_plant",
           "drive_plant_reference", "warm_up_plant", "PlantRun", "PLANT_TICK", "SAME_TIME"]

SAME_TIME = 1e-9
"""Times closer than this (s) are one. The physics' time (a sum of its steps)
and a clock's (a sum of the loop's jumps) drift apart by round-off (1.8e-12 s
after 15 s of a virtual trial)."""

RECORD_START = 64
"""Entries the simulated Aiko's motor record holds before it grows (it keeps
the ticks the physics has not reached: a few while it keeps up)."""


class SimulatedAiko:
    """The model's links driven by the emulated modules' motors.

    ``modules[i]`` drives joint i + 1 (between links i + 1 and i + 2); there are
    ``model.n - 1`` of them: a list (ticked one by one, in Python) or a group
    (:class:`~aiko.firmware_interface.bank.ModuleBank` for speed), whose
    arrays the plant reads and writes. :meth:`advance` steps the physics to time t (the
    modules' clock, s) with the motors' motion over the interval, then hands
    the links' angles back to the modules.

    Where the physics runs behind the modules (the simulated rig on a busy
    machine), :meth:`note_motors` records the motors' angles at each of the
    modules' ticks, and the steps take the motor angle of their own time from
    that record: a lagging plant computes the same motion, later, instead of
    pulling the links toward where the motors are by now. Without a record
    the motor moves linearly from where the physics last saw it to its angle
    now (exact when the physics keeps up, as offline).
    """

    def __init__(self, model: SnakeModel, modules: Sequence[JointModule] | Motors,
                 state: SnakeState | None = None) -> None:
        if len(modules) != model.n - 1:
            raise ParameterError("modules", len(modules),
                                 f"a {model.n}-link snake has {model.n - 1} joint modules")
        self.model = model
        self.group: Motors = (JointModules(modules) if isinstance(modules, Sequence)
                              else modules)
        self.state = model.initial_state() if state is None else state
        self.steps = 0
        self.iterations = 0
        self.unconverged = 0
        self.work = 0.0          # the drives' positive work, J (StepStats.work)
        self._angles = model.joint_angles(self.state)       # (n-1, 4)
        self.group.set_angles(self._angles)
        self._theta = self.group.motor_angles()
        # the motors' record: entries lo..hi of (times, [angle, speed] (n-1, 2, 2))
        self._rec_t = np.empty(RECORD_START)
        self._rec_x = np.empty((RECORD_START, len(self.group), 2, 2))
        self._rec_lo = self._rec_hi = 0
        self._half = _half_play(self.group.backlash())
        self._play = _play_array(self._half)     # the compiled loop's, kept
        self._loop_state: SnakeState | None = None   # the state the loop steps in place
        self._kin: tuple[np.ndarray, ...] = ()

    @property
    def t(self) -> float:
        return self.state.t

    def joint_angles(self) -> np.ndarray:
        """(n-1, 4) alpha_h, alpha_v, omega_h, omega_v of the physics (65)-(67)."""
        return self._angles.copy()

    def positions(self) -> np.ndarray:
        """(n, 3) centres of gravity, m."""
        return self.state.positions

    def rotations(self) -> np.ndarray:
        return self.model.rotations(self.state)

    def note_motors(self, t: float, motors: np.ndarray | None = None) -> None:
        """Record the motors' angles at the modules' time t (s), after a tick:
        read from the modules, or ``motors`` (n-1, 2, 2) [angle, speed]."""
        x = (np.stack([self.group.motor_angles(), self.group.motor_speeds()], axis=-1)
             if motors is None
             else np.asarray(motors, dtype=float))
        self.note_motor_rows(np.array([t], dtype=float), x[None])

    def note_motor_rows(self, t: np.ndarray, x: np.ndarray) -> None:
        """:meth:`note_motors` for k ticks at once: times t (k,) s, ascending
        and after the last one noted, and [angle, speed] x (k, n-1, 2, 2)."""
        k = len(t)
        if self._rec_hi + k > len(self._rec_t):
            self._make_room(k)
        self._rec_t[self._rec_hi:self._rec_hi + k] = t
        self._rec_x[self._rec_hi:self._rec_hi + k] = x
        self._rec_hi += k
        self._drop_passed()

    def _make_room(self, k: int) -> None:
        """Move the live entries to the front, growing the arrays if they
        would still not hold k more."""
        live = self._rec_hi - self._rec_lo
        size = len(self._rec_t)
        while live + k > size // 2:
            size *= 2
        t, x = self._rec_t, self._rec_x
        if size != len(t):
            self._rec_t = np.empty(size)
            self._rec_x = np.empty((size,) + x.shape[1:])
        self._rec_t[:live] = t[self._rec_lo:self._rec_hi]
        self._rec_x[:live] = x[self._rec_lo:self._rec_hi]
        self._rec_lo, self._rec_hi = 0, live

    def _drop_passed(self) -> None:
        """Forget the entries at or before the physics' time (it is past them)."""
        self._rec_lo += int(np.searchsorted(self._rec_t[self._rec_lo:self._rec_hi],
                                            self.state.t, side="right"))

    def step_motors(self, m: int, total: int | None = None) -> np.ndarray:
        """The motors (m, n-1, 4) [angle h, v, speed h, v] over the next m of
        ``total`` steps to the modules' present: each step's motor angle from
        the record (:meth:`note_motors`), or, without one, moving linearly
        from where the physics last saw it to where it is now."""
        total = m if total is None else total
        lo, hi = self._rec_lo, self._rec_hi
        recorded = None if lo == hi else recorded_motors(
            self.state.t, self.model.dt, m, self._rec_t[lo:hi], self._rec_x[lo:hi], self._theta)
        if recorded is not None:
            motors, self._theta = recorded
            return motors
        theta_new = self.group.motor_angles()
        frac = (np.arange(1, m + 1) / total)[:, None, None]
        theta = self._theta[None] + (theta_new - self._theta)[None] * frac  # (m, n-1, 2)
        self._theta = theta[-1]
        speed = np.broadcast_to(self.group.motor_speeds()[None], theta.shape)
        return np.concatenate([theta, speed], axis=-1)

    def step_references(self, m: int, total: int | None = None) -> np.ndarray:
        """References (m, n-1, 4) for the PD law over the next m of ``total``
        steps (:meth:`step_motors`) with the links' angles of now held over
        them: the link pulled to the edge of the free play around the motor,
        or left alone inside the play or by a limp motor
        (:func:`~aiko.experiments.rig.references.pd_references`). The physics
        itself takes the play up at every step (:meth:`advance`)."""
        motors = self.step_motors(m, total)
        return pd_references(motors[..., :2], motors[..., 2:], self._angles, self._half,
                             self.group.motors_driven())

    def advance(self, t: float, max_steps: int | None = None) -> int:
        """Step the physics toward the time step nearest t, at most
        ``max_steps`` steps; returns the steps taken. Each step's drive takes
        the free play up or leaves it from the links' angles at that step
        (:meth:`~aiko.model.SnakeModel.run_steps_through_play`): the motion
        does not depend on how many steps a call takes."""
        total = self.model.steps_until(self.state, t)
        m = total if max_steps is None else min(total, max_steps)
        if m <= 0:
            return 0
        motors = self.step_motors(m, total)
        self.state, st = self.model.run_steps_through_play(   # counted: self.unconverged
            self.state, motors, self._half, self.group.motors_driven(), warn=False)
        self.steps += st.steps
        self.iterations += st.iterations
        self.unconverged += st.unconverged
        self.work += st.work
        self._angles = self.model.joint_angles(self.state)
        self.group.set_link_angles(self._angles)
        return m

    def run_ticks(self, t_last: float, stop: float, tick: float) -> tuple[float, int]:
        """The modules' ticks every ``tick`` s after ``t_last`` (the last
        tick, which the physics has reached) that fall before ``stop``, each
        followed by :meth:`advance` to it, compiled in one call
        (:func:`~aiko.experiments.rig._plant_loop.plant_ticks`, whose readable
        twin is the bank's :meth:`~aiko.firmware_interface.bank.ModuleBank.tick`
        then :meth:`advance`, tick by tick). It stops after a tick in which a
        module has frames to send. The modules are a
        :class:`~aiko.firmware_interface.bank.ModuleBank`, and no record of the
        motors is kept (:meth:`note_motors`): the physics is at each tick's
        time before the next. Returns (the last tick's time, and for a tick
        with frames to send its event rows for the bank's
        :meth:`~aiko.firmware_interface.bank.ModuleBank.ticked`, else -1);
        ``t_last`` when no tick falls before ``stop``."""
        from aiko.experiments.rig._plant_loop import ATTENTION, plant_ticks

        bank = self.group
        assert isinstance(bank, ModuleBank), "compiled ticks need a ModuleBank"
        if t_last + tick >= stop - 1e-12:
            return t_last, -1
        state, kin = self._loop_inputs()
        arrays, codes, events = bank.kernel_arrays(stop)
        clock = np.array([t_last, state.t, self.work, np.inf])   # work summed as advance does
        motion = _loop_motion(self._theta, self._play)
        counts = np.zeros(3, dtype=np.int64)
        attend = np.array([1, -1], dtype=np.int64)
        code = plant_ticks(stop, np.inf, tick, np.inf, clock, arrays, codes, events,
                           (state.q, state.u, state.P, state.active, state.dP), kin, motion,
                           counts, _NO_SAMPLES, np.zeros(1, dtype=np.int64), self.model.dt,
                           attend)
        if code < 0:
            _plant_failed(code, self.model, clock)
        self.state = state
        if counts[0] > 0:
            state.t = float(clock[1])
            self._theta, self._angles = motion[0], motion[3]
        self.steps += int(counts[0])
        self.iterations += int(counts[1])
        self.unconverged += int(counts[2])
        self.work = float(clock[2])
        return float(clock[0]), int(attend[1]) if code == ATTENTION else -1

    def _loop_inputs(self) -> tuple[SnakeState, tuple[np.ndarray, ...]]:
        """The state :meth:`run_ticks` steps in place and the model's arrays
        (:meth:`~aiko.model.SnakeModel.kernel_inputs`): a checked copy of
        :attr:`state` where it is not the one the last call left (a state a
        caller handed over, or :meth:`advance` made, stays as it was), else
        that one again, with no copy or check."""
        if self.state is not self._loop_state:
            self._loop_state, self._kin = self.model.kernel_inputs(self.state)
        return self._loop_state, self._kin


def _loop_motion(theta: np.ndarray, play: np.ndarray) -> tuple[np.ndarray, ...]:
    """plant_ticks's ``motion`` for n-1 joints: the motors' angles where the
    physics last saw them (a copy of theta (n-1, 2), updated), the play
    (:func:`_play_array`, whose driven flags the loop sets at every tick),
    and scratch for the links' rotations (n, 3, 3) and joint angles (n-1, 4),
    which hold the last tick's."""
    nj = theta.shape[0]
    return (np.array(theta, dtype=float), play, np.empty((nj + 1, 3, 3)), np.empty((nj, 4)))


def _half_play(backlash: np.ndarray) -> np.ndarray:
    """Half of each joint's free play (n-1,), rad, for both of its axes: (n-1, 2)."""
    return np.repeat(0.5 * np.asarray(backlash, dtype=float)[:, None], 2, axis=1)


def _play_array(half: np.ndarray) -> np.ndarray:
    """The play [half_h, half_v, driven_h, driven_v] (n-1, 4) plant_ticks
    takes, from half (n-1, 2) (the driven flags are set at every tick)."""
    return np.column_stack([half, np.ones((half.shape[0], 2))])


_NO_SAMPLES = (np.zeros(0), np.zeros((0, 1, 3)), np.zeros(0))
"""plant_ticks's samples when none are taken (the rig records its own)."""


def euler_xyz(R: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """XYZ Euler angles (rx, ry, rz) of rotation matrices (k, 3, 3) with
    R = Rx(rx) Ry(ry) Rz(rz), rad (the Tracker stream's rotation); into
    ``out`` (k, 3) when given."""
    if out is None:
        out = np.empty((R.shape[0], 3))
    np.arctan2(-R[:, 1, 2], R[:, 2, 2], out=out[:, 0])
    np.arcsin(np.clip(R[:, 0, 2], -1.0, 1.0), out=out[:, 1])
    np.arctan2(-R[:, 0, 1], R[:, 0, 0], out=out[:, 2])
    return out


class MocapView:
    """What the simulated motion capture reports: the links' positions (mm)
    and rotations, ``latency`` seconds old, with white noise of ``noise_mm``.

    ``record(t, positions_m, rotations)`` after each physics update;
    ``objects(t)`` gives {"link1": (x, y, z mm, rx, ry, rz), ...} as of t -
    latency: the newest state recorded before that time (a state recorded
    at that very time, within :data:`SAME_TIME`, is the next frame's, so
    that a frame does not depend on whether the physics' update of its
    instant came first; None before anything that old), then the ``fixed``
    objects (name -> (x, y, z mm)), e.g. the scene's pegs (:func:`peg_objects`),
    with the same noise. ``occluded``: windows (t0, t1) of capture time (t -
    latency) in which no link is seen (the fixed objects stay).

    ``max_age`` (s, None: no limit): a frame whose due time (t - latency) is
    further than this past the newest recorded state is held back
    (``objects`` gives None and :attr:`held` counts it). The simulated Aiko's
    physics can fall behind the clock; a camera frame must show the robot of
    its own time, so a frame the physics has not reached yet is not sent, as
    a Vicon drops a frame, instead of showing an older robot as the present
    one (which, at link 6's 0.1-0.3 m/s in sidewinding, put 5-15 mm of the
    physics' lag into the comparison).
    """

    def __init__(self, noise_mm: float = 0.0, latency: float = 0.0, seed: int = 0,
                 prefix: str = "link", fixed: dict[str, tuple[float, float, float]] | None = None,
                 max_age: float | None = None,
                 occluded: tuple[tuple[float, float], ...] = ()) -> None:
        self.noise_mm = noise_mm
        self.occluded = tuple(occluded)
        self.latency = latency
        self.max_age = max_age
        self.held = 0
        self.prefix = prefix
        self.fixed = dict(fixed or {})
        self._rng = np.random.default_rng(seed)
        self._history: deque[tuple[float, np.ndarray, np.ndarray]] = deque()
        self._link_names: list[str] = []

    def record(self, t: float, positions: np.ndarray, rotations: np.ndarray) -> None:
        """The links' positions (n, 3) m and rotations (n, 3, 3) at t (s); kept
        as given (not copied) and converted only for the frames sent."""
        self._history.append((t, positions, rotations))
        # keep what a frame due at t - latency or later may show
        while (len(self._history) > 1
               and self._history[1][0] < t - self.latency - SAME_TIME):
            self._history.popleft()

    def _names(self, n: int) -> list[str]:
        """The links' names, link1 ... link<n> with this view's prefix."""
        if len(self._link_names) != n:
            self._link_names = [f"{self.prefix}{i + 1}" for i in range(n)]
        return self._link_names

    def objects(self, t: float) -> dict[str, tuple[float, ...]] | None:
        due = t - self.latency
        chosen = None
        for entry in self._history:
            if entry[0] < due - SAME_TIME:
                chosen = entry
            else:
                break
        if chosen is None:
            return None
        _, pos_m, rotations = chosen
        reached = self._history[-1][0]     # how far the physics has got
        if self.max_age is not None and reached < due - self.max_age - 1e-12:
            self.held += 1
            return None
        rows = np.empty((pos_m.shape[0], 6))      # x, y, z mm, rx, ry, rz per link
        pos = rows[:, :3]
        np.multiply(pos_m, 1000.0, out=pos)
        if self.noise_mm > 0:
            pos += self._rng.normal(0.0, self.noise_mm, pos.shape)
        euler_xyz(rotations, out=rows[:, 3:])
        hidden = any(t0 <= due < t1 for t0, t1 in self.occluded)
        out = {} if hidden else dict(zip(self._names(rows.shape[0]),
                                         map(tuple, rows.tolist()), strict=True))
        for name, xyz in self.fixed.items():
            p = np.asarray(xyz, dtype=float)
            if self.noise_mm > 0:
                p = p + self._rng.normal(0.0, self.noise_mm, 3)
            out[name] = (*p, 0.0, 0.0, 0.0)
        return out


def peg_objects(scene) -> dict[str, tuple[float, float, float]]:
    """The scene's pegs as motion-capture objects, as a lab tracks them (a
    marker cluster on each peg's top, here its axis at the floor): ``peg1``
    ... in the scene's order, (x, y, z) mm."""
    return {f"peg{k}": (1000.0 * p.x, 1000.0 * p.y, 0.0)
            for k, p in enumerate(scene.pegs, 1)}


PLANT_TICK = 0.002
"""The emulated modules' tick (s) when a plant is driven offline."""


@dataclass
class PlantRun:
    """Samples of :func:`drive_plant`: t (k,) s from its start, positions
    (k, n, 3) m, the drives' positive work since the start (k,) J, and the
    solver's counters."""

    t: np.ndarray
    positions: np.ndarray
    work: np.ndarray
    steps: int
    iterations: int
    unconverged: int


def drive_plant(model: SnakeModel, state: SnakeState, t_refs: np.ndarray, refs: np.ndarray,
                end: float, backlash: float = 0.0, servo: str = "ideal",
                rate: float = 20.0) -> PlantRun:
    """References (k, nodes, 4) sent at t_refs (k,) s, each as REF frames then a
    SYNC (as the streamer sends them; clamped to the joint limits by the
    codec's range), into fresh emulated joint modules (free play ``backlash``
    rad, ``servo`` "module" or "ideal") whose motors drive ``model`` from
    ``state`` (time 0) for ``end`` s, ticking every PLANT_TICK; sampled at
    ``rate`` Hz. Offline: as fast as it computes. The frames go through the
    bank in Python; the ticks between them, with the physics, run compiled
    (:mod:`aiko.experiments.rig._plant_loop`), as
    :func:`drive_plant_reference` does them one by one."""
    from aiko.experiments.rig._plant_loop import plant_ticks

    modules = _started_bank(model, backlash, servo)
    start, kin = model.kernel_inputs(state)
    angles = model.joint_angles(start)
    modules.set_angles(angles)
    n = model.n
    motion = _loop_motion(modules.motor_angles(), _play_array(_half_play(modules.backlash())))
    body = (start.q, start.u, start.P, start.active, start.dP)
    bank, codes, events = modules.kernel_arrays(PLANT_TICK)   # the first tick is the longest
    sample_dt = 1.0 / rate
    k_max = int(end * rate) + 3
    samples = (np.empty(k_max), np.empty((k_max, n, 3)), np.empty(k_max))
    samples[0][0], samples[1][0], samples[2][0] = 0.0, start.q[:, :3], 0.0
    ns = np.ones(1, dtype=np.int64)
    clock = np.array([0.0, 0.0, 0.0, sample_dt])
    counts = np.zeros(3, dtype=np.int64)
    no_attention = np.zeros(2, dtype=np.int64)   # offline: the modules' frames are dropped
    k, counter = 0, 0
    while clock[0] < end - 1e-12:
        t_event = float(t_refs[k]) if k < len(t_refs) else np.inf
        code = plant_ticks(t_event, end, PLANT_TICK, sample_dt, clock, bank, codes, events,
                           body, kin, motion, counts, samples, ns, model.dt, no_attention)
        if code < 0:
            _plant_failed(code, model, clock)
        t = min(clock[0] + PLANT_TICK, end)
        while k < len(t_refs) and t_refs[k] <= t + 1e-12:   # the frames due by the next tick
            if t_refs[k] >= 0:
                _send_period(modules, float(t_refs[k]), refs[k], counter)
                counter += 1
            k += 1
    m = int(ns[0])
    return PlantRun(samples[0][:m].copy(), samples[1][:m].copy(), samples[2][:m].copy(),
                    int(counts[0]), int(counts[1]), int(counts[2]))


def warm_up_plant() -> float:
    """Compile (or load from the cache) :func:`drive_plant`'s loop by driving
    a three-link snake for a tick, and the simulated Aiko's reading of the
    modules' record (:func:`~aiko.experiments.rig.references.recorded_motors`,
    every virtual trial's); returns the seconds it took."""
    import time

    t0 = time.perf_counter()
    model = SnakeModel(SnakeParams(n=3))
    drive_plant(model, model.initial_state(), np.zeros(1), np.zeros((1, 2, 4)), PLANT_TICK,
                0.01, "module")
    recorded_motors(0.0, model.dt, 1, np.array([0.0, 1.0]), np.zeros((2, 2, 2, 2)),
                    np.zeros((2, 2)))
    return time.perf_counter() - t0


def _plant_failed(code: int, model: SnakeModel, clock: np.ndarray) -> None:
    """Raise what the model raises for the compiled loop's code; clock as
    :func:`~aiko.experiments.rig._plant_loop.plant_ticks` left it."""
    from aiko.experiments.rig._plant_loop import EVENTS_FULL

    if code == EVENTS_FULL:
        raise RuntimeError("the bank's event rows were too few for a tick")
    now, physics_t = float(clock[0]), float(clock[1])   # the physics' time after the steps
    raise model.kernel_error(code, physics_t + max(0, round((now - physics_t) / model.dt))
                             * model.dt)


def _started_bank(model: SnakeModel, backlash: float, servo: str) -> ModuleBank:
    """Fresh modules for ``model``'s joints, powered up and started a second
    before time 0."""
    jp = JointModelParams(backlash=backlash, ideal=servo == "ideal")
    modules = ModuleBank([JointModule(i, params=jp) for i in range(1, model.n)])
    modules.power_up(-1.0)
    modules.receive(-1.0, *encode(Nmt(NmtCommand.START, 0)))
    return modules


_REF_LO = np.array([-JOINT_LIMIT, -JOINT_LIMIT, -np.inf, -np.inf])
"""The references' range (the codec's), low end; the high end is its negative."""


def _send_period(modules: ModuleBank, t: float, refs: np.ndarray, counter: int) -> None:
    """One period's frames at t (s), as the streamer sends them: the modules
    to t, a REF to each node (refs (nodes, 4), clamped), then the SYNC."""
    modules.tick(t)
    for node, r in enumerate(refs, start=1):
        modules.receive(t, *encode(Ref(node, *map(float, np.clip(r, _REF_LO, -_REF_LO)))))
    modules.receive(t, *encode(Sync(counter % 256)))


def drive_plant_reference(model: SnakeModel, state: SnakeState, t_refs: np.ndarray,
                          refs: np.ndarray, end: float, backlash: float = 0.0,
                          servo: str = "ideal", rate: float = 20.0) -> PlantRun:
    """:func:`drive_plant` ticked and stepped from Python, tick by tick: its
    readable twin, which the tests compare it with."""
    modules = _started_bank(model, backlash, servo)
    plant = SimulatedAiko(model, modules, state.copy())
    plant.state.t = 0.0
    sample_dt = 1.0 / rate
    times, pos, work = [0.0], [plant.positions().copy()], [0.0]
    k = 0
    t = 0.0
    next_sample = sample_dt
    counter = 0
    while t < end - 1e-12:
        t = min(t + PLANT_TICK, end)
        while k < len(t_refs) and t_refs[k] <= t + 1e-12:
            if t_refs[k] >= 0:
                _send_period(modules, float(t_refs[k]), refs[k], counter)
                counter += 1
            k += 1
        modules.tick(t)
        plant.advance(t)
        while next_sample <= plant.t + 1e-9:
            times.append(next_sample)
            pos.append(plant.positions().copy())
            work.append(plant.work)
            next_sample += sample_dt
    return PlantRun(np.array(times), np.array(pos), np.array(work), plant.steps,
                    plant.iterations, plant.unconverged)
