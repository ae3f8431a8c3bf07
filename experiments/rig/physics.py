"""The simulated Aiko's physics in a process of its own.

The emulated joint modules answer the bus on their own clock, as the
firmware's control loop does, and must never wait for the world. The physics
(:class:`~aiko.experiments.rig.plant.SimulatedAiko`) costs up to a core, so it
runs in a child process and catches up behind the modules:

* after every tick the modules' process appends the motors' state (angles,
  speeds, whether each is driven) at the modules' time to a
  :class:`MotorRecord`, a ring in shared memory: one writer, one reader, the
  writer never blocks;
  and writes a byte to a wake pipe;
* the physics process sleeps on that pipe until a tick arrives, takes every
  new entry into the plant's motor record (:meth:`SimulatedAiko.note_motors`),
  steps toward the newest entry, at least :data:`CHUNK_TIME` at a time and
  never past it (each step with the motor angle of its own time), publishes a
  :class:`PhysicsUpdate` into an :class:`UpdateRing`, a second ring in shared
  memory, at most one a tick while it catches up: the links' joint angles
  (for the modules' link side), positions and rotations (for motion capture)
  and the solver's counters, and writes a byte to a second pipe. The modules'
  loop wakes on it, takes the newest update and counts every one's lag.

The physics runs in the real-time class below the modules and the trial
runner (:data:`PHYSICS_PRIORITY`), ahead of every normal process, and leaves
it while it cannot catch up (:data:`BEHIND_LIMIT`).

Neither direction pickles or polls: each side writes a row and a byte and
sleeps on the other's pipe. A pipe carries
the start (the snake, pickled once), the first update and any error.

:class:`PhysicsProcess` owns the child (spawned, so no lock or thread of the
modules' process is copied), the rings and the pipes, and ends the child on
every way out; the child also ends when the wake pipe closes (its parent
gone).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import select
import time
import warnings
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from typing import TYPE_CHECKING, cast

import numpy as np

from aiko.drivers.priority import REALTIME_PRIORITY, RealtimeGovernor, freeze_heap
from aiko.model.errors import AikoError

if TYPE_CHECKING:   # loaded by the child (the parent may not have them yet)
    from aiko.experiments.rig.plant import SimulatedAiko
    from aiko.model import SnakeModel, SnakeState

__all__ = ["SharedRing", "MotorRecord", "UpdateRing", "PhysicsUpdate", "PhysicsProcess",
           "PhysicsError", "CHUNK_TIME", "chunk_steps", "PHYSICS_PRIORITY", "BEHIND_LIMIT"]

CHUNK_TIME = 0.002
"""Simulated time (s) per physics update: one tick of the modules (4 steps at
the realistic plant's 0.5 ms, 2 at the ideal plant's 1 ms). The physics
waits until the modules' record is that far ahead of it, then steps up to
the newest entry, so an update ends at the tick that woke it and its lag
when the modules take it is the chunk's computing. (4 ms, with updates
pickled through a pipe, the record polled every millisecond and updates
taken at the modules' next tick, put the lag's median at 4-4.5 ms.)"""


def chunk_steps(dt: float) -> int:
    """Whole steps of ``dt`` s in :data:`CHUNK_TIME`, at least one."""
    return max(1, int(round(CHUNK_TIME / dt)))

RECORD_CAPACITY = 8192
"""Entries of the motor record: 16 s of 2 ms ticks; a physics further behind
than that is an error (:class:`PhysicsError`), not a silent loss."""

UPDATE_CAPACITY = 4096
"""Slots of the update ring: 8 s of updates at one a tick; modules that fall
further behind than that lose count of the physics' lag, which is an error
(:class:`PhysicsError`)."""

SEND_INTERVAL = 0.002
"""Wall time (s) between the physics' updates while it catches up (one
modules' tick); once caught up every chunk's is sent."""

START_TIMEOUT = 120.0
"""Seconds the physics process may take to load its kernels."""

PHYSICS_PRIORITY = REALTIME_PRIORITY - 5
"""The physics process's ``SCHED_FIFO`` priority: below the modules' and the
trial runner's (:data:`~aiko.drivers.priority.REALTIME_PRIORITY`), whose
answers come first, above every normal process (the parallel model, a
browser). In the normal class a busy moment of the others (a period's
frames, the parallel model's steps) kept it from the processor for 10 ms
and more a few times a minute; its updates ended that late. (At nice 10 it
fell seconds behind.)"""

BEHIND_LIMIT = 1.0
"""Wall time (s) the physics may go without catching up (without once
sleeping on the wake pipe) before it leaves the real-time class; it asks for
it again once caught up. A machine too slow for the physics never has a core
taken from every normal process: the physics falls behind, honestly, as
before."""


class PhysicsError(AikoError):
    """The physics process failed or fell out of its record."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"simulated Aiko's physics: {reason}")


class SharedRing:
    """A ring of float64 rows in shared memory: one writer process, one
    reader process, the writer never blocks.

    Slot 0 of the block holds the count of rows written; it is stored after
    the row, so a reader that sees the count sees the row (x86's stores are
    seen in order). ``name`` None creates the block (and unlinks it on
    :meth:`close`), else attaches to the named one."""

    def __init__(self, width: int, capacity: int, name: str | None = None) -> None:
        self.width = width
        self.capacity = capacity
        size = 8 * (1 + capacity * width)
        self.owner = name is None
        self._shm = SharedMemory(name=name, create=self.owner, size=size if self.owner else 0)
        buf = np.ndarray((1 + capacity * width,), dtype=np.float64, buffer=self._shm.buf)
        self._count = buf[:1]
        self._rows = buf[1:].reshape(capacity, width)
        if self.owner:
            self._count[0] = 0.0

    @property
    def name(self) -> str:
        return self._shm.name

    @property
    def written(self) -> int:
        return int(self._count[0])

    def _append_row(self, row: np.ndarray | list[float]) -> None:
        k = self.written
        self._rows[k % self.capacity] = row
        self._count[0] = k + 1

    def _overrun(self, behind: int) -> PhysicsError:
        return PhysicsError(f"a reader fell {behind} rows behind its ring of {self.capacity}")

    def since(self, k: int) -> tuple[int, np.ndarray]:
        """The rows written since the k-th: (count now, rows (m, width));
        :class:`PhysicsError` when some were overwritten before being read."""
        n = self.written
        if n - k > self.capacity:
            raise self._overrun(n - k)
        if n == k:
            return n, self._rows[:0].copy()
        a, b = k % self.capacity, n % self.capacity
        if a < b:
            return n, self._rows[a:b].copy()
        return n, np.concatenate([self._rows[a:], self._rows[:b]])

    def close(self) -> None:
        self._rows = np.empty((0, self.width))    # drop the views before the buffer
        self._count = np.empty(1)
        self._shm.close()
        if self.owner:
            self._shm.unlink()


class MotorRecord(SharedRing):
    """The motors' state after every tick, written by the modules' process and
    read by the physics process.

    Entry k: [t, theta (j, 2), speed (j, 2), driven (j, 2)] as float64 for j
    joints."""

    def __init__(self, joints: int, capacity: int = RECORD_CAPACITY,
                 name: str | None = None) -> None:
        self.joints = joints
        super().__init__(1 + 6 * joints, capacity, name)

    def _overrun(self, behind: int) -> PhysicsError:
        return PhysicsError(f"fell {behind} ticks behind the modules (record of "
                            f"{self.capacity})")

    def append(self, t: float, theta: np.ndarray, speed: np.ndarray,
               driven: np.ndarray) -> None:
        """One entry: time t (s), theta, speed, driven (joints, 2)."""
        self._append_row(np.concatenate([[t], np.ravel(theta), np.ravel(speed),
                                         np.ravel(driven)]))

    def unpack_rows(self, rows: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(t (k,), theta, speed, driven (k, joints, 2)) of rows (k, width)."""
        j = self.joints
        return (rows[:, 0], rows[:, 1:1 + 2 * j].reshape(-1, j, 2),
                rows[:, 1 + 2 * j:1 + 4 * j].reshape(-1, j, 2),
                rows[:, 1 + 4 * j:].reshape(-1, j, 2) > 0.5)

    def unpack(self, row: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """(t, theta, speed, driven) of one row."""
        t, theta, speed, driven = self.unpack_rows(row[None])
        return float(t[0]), theta[0], speed[0], driven[0]


@dataclass(frozen=True)
class PhysicsUpdate:
    """The physics after a chunk: t (s, the modules' clock), joint angles
    (n-1, 4) as :meth:`SnakeModel.joint_angles`, positions (n, 3) m, rotations
    (n, 3, 3), the solver's counters since the start, and how often the
    physics has left the real-time class, behind for over
    :data:`BEHIND_LIMIT`."""

    t: float
    angles: np.ndarray
    positions: np.ndarray
    rotations: np.ndarray
    steps: int
    iterations: int
    unconverged: int
    work: float
    demoted: int = 0


class UpdateRing(SharedRing):
    """The physics' updates, written by the physics process and read by the
    modules' process. Row: [t, angles (j, 4), positions (n, 3), rotations
    (n, 3, 3), steps, iterations, unconverged, work, demoted] for j joints,
    n = j + 1 links."""

    def __init__(self, joints: int, capacity: int = UPDATE_CAPACITY,
                 name: str | None = None) -> None:
        self.joints = joints
        n = joints + 1
        super().__init__(1 + 4 * joints + 12 * n + 5, capacity, name)

    def _overrun(self, behind: int) -> PhysicsError:
        return PhysicsError(f"the modules fell {behind} updates behind the physics (ring "
                            f"of {self.capacity})")

    def publish(self, u: PhysicsUpdate) -> None:
        self._append_row(np.concatenate([
            [u.t], u.angles.ravel(), u.positions.ravel(), u.rotations.ravel(),
            [u.steps, u.iterations, u.unconverged, u.work, u.demoted]]))

    def unpack(self, row: np.ndarray) -> PhysicsUpdate:
        j, n = self.joints, self.joints + 1
        a = 1 + 4 * j
        b = a + 3 * n
        c = b + 9 * n
        return PhysicsUpdate(float(row[0]), row[1:a].reshape(j, 4), row[a:b].reshape(n, 3),
                             row[b:c].reshape(n, 3, 3), int(row[c]), int(row[c + 1]),
                             int(row[c + 2]), float(row[c + 3]), int(row[c + 4]))


class _RecordedMotors:
    """What the plant reads of the joint modules, from the motor record: the
    newest entry's motors (limp or driven); the link angles go back to the
    modules' process in the update, not through here."""

    def __init__(self, backlash: np.ndarray) -> None:
        self._backlash = np.asarray(backlash, dtype=float)
        n = len(self._backlash)
        self.theta = np.zeros((n, 2))
        self.speed = np.zeros((n, 2))
        self.driven = np.ones((n, 2), dtype=bool)

    def __len__(self) -> int:
        return len(self._backlash)

    def motor_angles(self) -> np.ndarray:
        return self.theta.copy()

    def motor_speeds(self) -> np.ndarray:
        return self.speed.copy()

    def motors_driven(self) -> np.ndarray:
        return self.driven

    def backlash(self) -> np.ndarray:
        return self._backlash

    def set_angles(self, angles: np.ndarray) -> None:
        self.theta[:] = np.asarray(angles, dtype=float)[:, :2]

    def set_link_angles(self, angles: np.ndarray) -> None:
        pass


def _update(aiko: SimulatedAiko, demoted: int = 0) -> PhysicsUpdate:
    return PhysicsUpdate(aiko.t, aiko.joint_angles(), aiko.positions().copy(),
                         aiko.rotations(), aiko.steps, aiko.iterations, aiko.unconverged,
                         aiko.work, demoted)


def _take(record: MotorRecord, motors: _RecordedMotors, aiko: SimulatedAiko,
          rows: np.ndarray) -> float | None:
    """Note the motor record's new rows in the plant; the newest time."""
    if len(rows) == 0:
        return None
    ts, thetas, speeds, drivens = record.unpack_rows(rows)
    aiko.note_motor_rows(ts, np.stack([thetas, speeds], axis=-1))
    motors.theta[:] = thetas[-1]
    motors.speed[:] = speeds[-1]
    motors.driven[:] = drivens[-1] != 0
    return float(ts[-1])


def _serve(conn: Connection, wake: Connection, told: Connection,
           realtime: tuple[int | None, float]) -> None:
    """The physics process: load the kernels, wait for the snake to simulate
    (``("start", model, state, backlash, record name, ring name)``; None:
    end), then step behind the record until the wake pipe closes;
    ``realtime``: the real-time priority to step at (None: the normal class)
    and the seconds behind after which it leaves it."""
    try:
        from aiko.model import warm_up
        warm_up()             # the kernels, while the parent is still setting up
        msg = conn.recv()
        if msg is None:
            return
        _, model, state, backlash, record_name, ring_name = msg
        os.set_blocking(told.fileno(), False)   # the physics never waits for the modules
        _simulate(conn, (wake.fileno(), told.fileno()), model, state, backlash, record_name,
                  ring_name, RealtimeGovernor(*realtime))
    except (EOFError, BrokenPipeError):
        pass     # the modules' process is gone
    except Exception as exc:   # noqa: BLE001 - reported to the parent, which raises it
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except OSError:
            pass


def _simulate(conn: Connection, fds: tuple[int, int], model: SnakeModel, state: SnakeState,
              backlash: np.ndarray, record_name: str, ring_name: str, rt: RealtimeGovernor) -> None:
    from aiko.experiments.rig.plant import SimulatedAiko

    motors = _RecordedMotors(backlash)
    aiko = SimulatedAiko(model, motors, state=state)
    record = MotorRecord(len(motors), name=record_name)
    ring = UpdateRing(len(motors), name=ring_name)
    try:
        warm = SimulatedAiko(model, _RecordedMotors(backlash), state=state.copy())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warm.advance(state.t + model.dt, 1)         # this snake's first step, untimed
            warm.note_motors(state.t + 2 * model.dt)
            warm.advance(state.t + 2 * model.dt, 1)     # and one from the record
        freeze_heap()   # not a full collection in the middle of catching up
        granted = rt.request()
        conn.send(("ready", (_update(aiko), str(granted))))
        _loop(fds, (record, ring), motors, aiko, rt)
    finally:
        record.close()
        ring.close()


def _loop(fds: tuple[int, int], rings: tuple[MotorRecord, UpdateRing],
          motors: _RecordedMotors, aiko: SimulatedAiko, rt: RealtimeGovernor) -> None:
    """Step behind the record; ``fds``: the wake pipe's end (read) and the
    told pipe's (written after each update)."""
    wake_fd, told_fd = fds
    record, ring = rings
    seen = 0
    target = aiko.t
    last_sent = 0.0
    dt = aiko.model.dt
    chunk = chunk_steps(dt)
    while True:
        seen, rows = record.since(seen)
        newest = _take(record, motors, aiko, rows)
        if newest is not None:
            target = newest
        # a chunk at least (its fixed cost: the record, the references, the
        # update), then up to the newest entry: the ticks do not fall on the
        # steps' grid, and whole chunks only would trail by up to one more;
        # never a step past the record (each step's motor angle is recorded)
        ahead = int((target - aiko.t) / dt + 1e-9)
        if ahead >= chunk and aiko.advance(aiko.t + ahead * dt, 2 * chunk):
            now = time.monotonic()
            rt.stepped(now)
            # catching up, a chunk takes less than a tick: publish at most one
            # update a tick (the modules take the newest), and the last one
            if now - last_sent >= SEND_INTERVAL or aiko.t >= target - 0.5 * aiko.model.dt:
                ring.publish(_update(aiko, rt.demoted))
                last_sent = now
                _nudge(told_fd)   # if 64 kB are untold, the modules take them at a tick
        else:                              # caught up: sleep until the next tick
            rt.caught_up()
            if not os.read(wake_fd, 4096):
                return                     # the modules' process closed the pipe


def _nudge(fd: int) -> None:
    """One byte into a non-blocking pipe, to wake its reader; a full pipe
    (its reader has 64 kB of them unread) is left as it is."""
    try:
        os.write(fd, b"\x01")
    except BlockingIOError:
        pass


class PhysicsProcess:
    """A snake's physics in a child process, driven by the modules' motors.

    ``spawn()`` starts the child, which loads the model's kernels on its own
    (about a second: ``aiko emulate`` spawns it first thing, so that this
    overlaps its own imports); ``start(model, state, backlash)`` (spawning
    first if needed) gives it the snake, the motors' free play (joints,) rad,
    and waits until it is ready; ``note_motors(t, theta, speed, driven)``
    after every tick of the modules; ``updates()`` the updates that arrived
    since the last call (never waits); ``close()`` ends the child (also after
    a failure, or before a start). The child steps in the real-time class at
    ``priority`` (None: in the normal class), what it got in ``granted``
    once started, and leaves it after ``behind_limit`` s without catching up."""

    def __init__(self, priority: int | None = PHYSICS_PRIORITY,
                 behind_limit: float = BEHIND_LIMIT) -> None:
        self.priority = priority
        self.behind_limit = behind_limit
        self.granted = ""     # the child's scheduling, once started (str of a Priority)
        self.record: MotorRecord | None = None
        self.ring: UpdateRing | None = None
        self._seen = 0
        self._conn: Connection | None = None
        self._wake: Connection | None = None
        self._told: Connection | None = None
        self._watch: select.poll | None = None
        self._proc: mp.process.BaseProcess | None = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def spawn(self) -> None:
        """Start the child (once); it loads its kernels and waits for its snake."""
        if self._proc is not None:
            return
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        wake_r, wake_w = ctx.Pipe(duplex=False)
        told_r, told_w = ctx.Pipe(duplex=False)
        self._conn, self._wake, self._told = parent, wake_w, told_r
        os.set_blocking(wake_w.fileno(), False)   # a tick never waits for the physics
        os.set_blocking(told_r.fileno(), False)
        self._watch = select.poll()       # the child's error or end, without a selector a tick
        self._watch.register(parent.fileno(), select.POLLIN)
        self._proc = ctx.Process(target=_serve, name="aiko-physics", daemon=True,
                                 args=(child, wake_r, told_w,
                                       (self.priority, self.behind_limit)))
        self._proc.start()
        child.close()
        wake_r.close()
        told_w.close()

    @property
    def told_fd(self) -> int | None:
        """A descriptor that turns readable when the physics has published an
        update (for an event loop's ``add_reader``: then call
        :meth:`updates`); None before :meth:`spawn`."""
        return None if self._told is None else self._told.fileno()

    def start(self, model: SnakeModel, state: SnakeState, backlash: np.ndarray,
              timeout: float = START_TIMEOUT) -> PhysicsUpdate:
        """The physics of ``model`` from ``state``; its first update (the start
        state) once the child is ready."""
        self.spawn()
        assert self._conn is not None
        backlash = np.asarray(backlash, dtype=float)
        self.record = MotorRecord(len(backlash))
        self.ring = UpdateRing(len(backlash))
        self._seen = 0
        try:
            self._conn.send(("start", model, state, backlash, self.record.name,
                             self.ring.name))
        except OSError as exc:
            raise self._ended() from exc
        if not self._conn.poll(timeout):
            raise PhysicsError(f"not ready after {timeout:.0f} s")
        kind, body = self._recv()
        if kind != "ready":
            self._expect_update((kind, body))    # raises the child's error
        first, self.granted = cast("tuple[PhysicsUpdate, str]", body)
        return first

    def _recv(self) -> tuple[str, object]:
        assert self._conn is not None
        try:
            return self._conn.recv()
        except (EOFError, OSError) as exc:
            raise self._ended() from exc

    @staticmethod
    def _expect_update(msg: tuple[str, object]) -> PhysicsUpdate:
        kind, body = msg
        if kind == "error":
            raise PhysicsError(str(body))
        assert isinstance(body, PhysicsUpdate)
        return body

    def _ended(self) -> PhysicsError:
        code = None if self._proc is None else self._proc.exitcode
        return PhysicsError(f"the process ended (exit code {code})")

    def _wake_child(self) -> None:
        if self._wake is None:
            return   # no child to wake
        try:
            _nudge(self._wake.fileno())   # if 64 kB are unread, the child is awake
        except OSError as exc:
            raise self._ended() from exc

    def note_motors(self, t: float, theta: np.ndarray, speed: np.ndarray,
                    driven: np.ndarray) -> None:
        assert self.record is not None
        self.record.append(t, theta, speed, driven)
        self._wake_child()

    def updates(self) -> list[PhysicsUpdate]:
        """The updates published since the last call, oldest first;
        :class:`PhysicsError` if the child failed or ended."""
        if self._watch is not None and self._watch.poll(0):
            self._expect_update(self._recv())   # an error, or the child's end
        if self._told is not None:
            try:
                os.read(self._told.fileno(), 4096)    # what told of them, so far
            except BlockingIOError:
                pass
        if self.ring is None:
            return []
        self._seen, rows = self.ring.since(self._seen)
        return [self.ring.unpack(row) for row in rows]

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.send(None)
            except OSError:
                pass
        if self._wake is not None:
            self._wake.close()             # the started child's end
            self._wake = None
        if self._proc is not None:
            self._proc.join(timeout=2.0)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(timeout=2.0)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._told is not None:
            self._told.close()
            self._told = None
        self._watch = None
        for ring in (self.record, self.ring):
            if ring is not None:
                ring.close()
        self.record = self.ring = None
