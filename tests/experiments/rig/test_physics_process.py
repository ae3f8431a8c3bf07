"""The simulated Aiko's physics in its own process computes what the plant
computes in the modules' process, from the same motors."""

import math
import os
import select
import signal
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.experiments.rig.physics import (
    PHYSICS_PRIORITY,
    MotorRecord,
    PhysicsError,
    PhysicsProcess,
    PhysicsUpdate,
    SharedRing,
    UpdateRing,
)
from aiko.experiments.rig.plant import PlantParams, SimulatedAiko
from aiko.firmware_interface.codec import Nmt, Ref, Sync, encode
from aiko.firmware_interface.emulator import JointModule
from aiko.model import SnakeModel, SnakeParams


def test_motor_record_hands_every_entry_over_once_and_refuses_an_overrun():
    rec = MotorRecord(3, capacity=4)
    try:
        reader = MotorRecord(3, capacity=4, name=rec.name)   # the other process's view
        for k in range(3):
            th = np.full((3, 2), 0.1 * k)
            rec.append(0.002 * k, th, -th, np.array([[True, False]] * 3))
        n, rows = reader.since(0)
        assert n == 3 and rows.shape == (3, 1 + 6 * 3)
        t, theta, speed, driven = reader.unpack(rows[2])
        assert t == pytest.approx(0.004)
        np.testing.assert_array_equal(theta, np.full((3, 2), 0.2))
        np.testing.assert_array_equal(speed, np.full((3, 2), -0.2))
        assert driven[:, 0].all() and not driven[:, 1].any()
        assert reader.since(3)[1].shape[0] == 0
        for k in range(5):
            rec.append(0.01 + k, np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)))
        with pytest.raises(PhysicsError, match="behind"):
            reader.since(3)                 # 5 new entries in a ring of 4
        reader.close()
    finally:
        rec.close()


@settings(max_examples=60, deadline=None)
@given(capacity=st.integers(1, 6), reads=st.lists(st.integers(0, 6), min_size=1, max_size=12))
def test_a_shared_ring_hands_rows_over_in_order_across_its_wrap(capacity, reads):
    """The reader takes whatever was written since its last read, oldest
    first, whether the rows wrap around the ring's end or not."""
    ring = SharedRing(2, capacity)
    try:
        reader = SharedRing(2, capacity, name=ring.name)
        written, seen, got = 0, 0, []
        for batch in reads:
            batch = min(batch, capacity)          # never lap the reader here
            for _ in range(batch):
                ring._append_row([written, -written])
                written += 1
            seen, rows = reader.since(seen)
            got += rows[:, 0].astype(int).tolist()
            np.testing.assert_array_equal(rows[:, 1], -rows[:, 0])
        assert got == list(range(written)) and seen == written
        reader.close()
    finally:
        ring.close()


def test_an_update_crosses_the_ring_whole_and_a_lapped_reader_is_an_error():
    rng = np.random.default_rng(3)
    j = 4
    u = PhysicsUpdate(0.25, rng.normal(size=(j, 4)), rng.normal(size=(j + 1, 3)),
                      rng.normal(size=(j + 1, 3, 3)), 500, 12345, 2, 0.75, 3)
    ring = UpdateRing(j, capacity=3)
    try:
        reader = UpdateRing(j, capacity=3, name=ring.name)
        ring.publish(u)
        n, rows = reader.since(0)
        back = reader.unpack(rows[0])
        assert n == 1 and back.t == u.t
        for a, b in ((back.angles, u.angles), (back.positions, u.positions),
                     (back.rotations, u.rotations)):
            np.testing.assert_array_equal(a, b)
        assert (back.steps, back.iterations, back.unconverged, back.work, back.demoted) == (
            500, 12345, 2, 0.75, 3)
        for _ in range(4):
            ring.publish(u)
        with pytest.raises(PhysicsError, match="4 updates behind"):
            reader.since(1)                    # 4 new updates in a ring of 3
        reader.close()
    finally:
        ring.close()


def _driven_modules(n, plant, t_end, tick=0.002):
    """Operational modules following a wave; the motors' state after every
    tick: [(t, theta, speed, driven)]."""
    modules = [JointModule(i, params=plant.joint_params()) for i in range(1, n)]
    for m in modules:
        m.power_up(0.0)
        m.receive(0.0, *encode(Nmt(1, 0)))
    out, t, k = [], 0.0, 0
    while t < t_end - 1e-12:
        t = round(t + tick, 9)
        k += 1
        if k % 50 == 0:                       # a period: REF then SYNC
            a = 0.4 * math.sin(2 * math.pi * t)
            for m in modules:
                m.receive(t, *encode(Ref(m.node, a, 0.5 * a, 0.0, 0.0)))
                m.receive(t, *encode(Sync(k // 50 % 256)))
        for m in modules:
            m.tick(t)
        out.append((t, np.array([m.motor_angles for m in modules]),
                    np.array([m.motor_speeds for m in modules]),
                    np.array([m.motors_driven for m in modules])))
    return modules, out


def test_the_physics_process_moves_the_links_as_the_plant_in_process_does():
    plant = PlantParams.ideal(dt=PlantParams.dt)
    n, t_end = 4, 0.6
    model = SnakeModel(SnakeParams(n=n), plant.solver_params())
    modules, record = _driven_modules(n, plant, t_end)
    # in process: every tick's motors recorded, then the physics catches up in chunks
    stand_ins = [JointModule(i, params=plant.joint_params()) for i in range(1, n)]
    for m in stand_ins:                      # driven, their motors set from the record
        m.power_up(0.0)
        m.receive(0.0, *encode(Nmt(1, 0)))
    here = SimulatedAiko(model, stand_ins)
    for t, theta, speed, driven in record:
        assert driven.all()
        for m, th, sp in zip(stand_ins, theta, speed, strict=True):
            m.axes[0].theta, m.axes[1].theta = th
            m.axes[0].speed, m.axes[1].speed = sp
        here.note_motors(t)
    while here.advance(t_end, 8):
        pass
    proc = PhysicsProcess()
    try:
        first = proc.start(model, model.initial_state(), np.zeros(n - 1), timeout=120)
        assert first.t == 0.0
        assert proc.told_fd is not None
        assert select.select([proc.told_fd], [], [], 0.0)[0] == []   # nothing published yet
        for t, theta, speed, driven in record:
            proc.note_motors(t, theta, speed, driven)
        # the physics tells of its updates: a loop can sleep until one is published
        assert select.select([proc.told_fd], [], [], 30.0)[0] == [proc.told_fd]
        last, deadline = first, time.monotonic() + 60
        while last.t < t_end - 1e-9 and time.monotonic() < deadline:
            for u in proc.updates():              # reads what told of them
                assert u.t > last.t               # in order, every one newer
                last = u
            select.select([proc.told_fd], [], [], 0.05)
        assert last.t == pytest.approx(t_end)
        np.testing.assert_allclose(last.positions, here.positions(), atol=1e-9)
        np.testing.assert_allclose(last.angles, here.joint_angles(), atol=1e-9)
        assert last.steps == here.steps
        pid = proc.pid
    finally:
        proc.close()
    assert proc.record is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)                         # the child is gone


def test_a_physics_process_that_dies_is_a_clear_error():
    model = SnakeModel(SnakeParams(n=3), PlantParams.ideal().solver_params())
    proc = PhysicsProcess()
    try:
        proc.start(model, model.initial_state(), np.zeros(2), timeout=120)
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        with pytest.raises(PhysicsError, match="ended"):
            while time.monotonic() < deadline:
                proc.updates()
                time.sleep(0.01)
    finally:
        proc.close()


def test_a_physics_process_spawned_early_starts_later_or_ends_unstarted():
    """``aiko emulate`` spawns the physics first thing (it loads its kernels
    while the modules' process imports): the snake comes later, or never."""
    model = SnakeModel(SnakeParams(n=3), PlantParams.ideal().solver_params())
    early = PhysicsProcess()
    try:
        early.spawn()
        pid = early.pid
        early.spawn()                       # once only
        assert early.pid == pid
        first = early.start(model, model.initial_state(), np.zeros(2), timeout=120)
        assert first.t == 0.0 and early.pid == pid
        np.testing.assert_allclose(first.positions, model.initial_state().positions)
    finally:
        child = early._proc
        early.close()
    assert child is not None and child.exitcode == 0      # it ended on its own when told
    unstarted = PhysicsProcess()
    unstarted.spawn()
    proc = unstarted._proc
    unstarted.close()                       # ends the child that never got its snake
    # told to end while it loads its kernels, it ends at once if they load
    # within close()'s wait, else it is killed (a loaded machine): gone either way
    assert proc is not None and not proc.is_alive()
    assert proc.exitcode in (0, -signal.SIGKILL)
    unstarted.close()                       # a second close does nothing


def test_the_rig_takes_updates_on_arrival_and_ends_with_its_physics():
    """The modules' loop takes each update when the physics tells of it (its
    lag then never holds a tick's wait), and a physics that dies ends the rig
    with the physics' own error, not an exception group."""
    import asyncio

    from aiko.experiments.rig.simrig import RigConfig, SimulatedRig
    from tests.conftest import free_port

    rig = SimulatedRig(RigConfig(nodes=2, plant=PlantParams.ideal(),
                                 udp_target=("127.0.0.1", free_port())))
    counted: list[tuple[float, float]] = []     # (the update's time, its lag when taken)
    count = rig._count_lag

    def spy(update):
        counted.append((update.t, rig.clock.now() - update.t))
        count(update)

    rig._count_lag = spy
    taken: list[float] = []                      # the lag of the newest of each batch
    take = rig._take

    def spy_take(update):
        taken.append(rig.clock.now() - update.t)
        take(update)

    rig._take = spy_take

    async def main():
        ready = asyncio.Event()
        serving = asyncio.create_task(rig.run(lambda info: ready.set()))
        await asyncio.wait_for(ready.wait(), 120)
        while rig.clock.now() < 1.0:
            await asyncio.sleep(0.05)
        before = len(counted)
        assert rig.physics is not None and rig.physics.pid is not None
        os.kill(rig.physics.pid, signal.SIGKILL)
        with pytest.raises(PhysicsError, match="ended"):
            await asyncio.wait_for(serving, 10)
        return before

    before = asyncio.run(main())
    assert before > 100                            # one a tick, about 500 a second
    times = [t for t, _ in counted]
    assert rig.lag.count == len(counted)           # every update's lag counted once
    assert len(set(times)) == len(times) and times == sorted(times)
    # taken on arrival: many within a tick of the physics' time (a modules'
    # tick and the physics' chunk are 2 ms each; taken at the next tick the
    # lag would be 2 ms or more every time). Half of them on a quiet machine;
    # a quarter leaves room for a loaded one in the rig's first second.
    assert np.mean(np.array(taken) < 0.002) > 0.25


def _policy(pid):
    """A process's scheduling class, without the reset-on-fork flag."""
    return os.sched_getscheduler(pid) & ~os.SCHED_RESET_ON_FORK


def test_the_physics_process_steps_in_the_real_time_class_and_leaves_it_while_behind():
    """The child asks for SCHED_FIFO below the modules; given a record far
    ahead of it (3 s of ticks at once) it steps without catching up for longer
    than its limit, leaves the class (counted in its updates) and is back in
    it once caught up. Where the system refuses the class the child says so
    and stays in the normal class."""
    plant = PlantParams()
    n, t_end = 11, 3.0
    model = SnakeModel(SnakeParams(n=n), plant.solver_params())
    _, record = _driven_modules(n, plant, t_end)
    proc = PhysicsProcess(behind_limit=0.05)
    try:
        first = proc.start(model, model.initial_state(), np.full(n - 1, math.radians(4)),
                           timeout=120)
        if not proc.granted.startswith("real-time"):
            assert proc.granted.startswith("normal (")
            assert _policy(proc.pid) == os.SCHED_OTHER
            return
        assert proc.granted == f"real-time (SCHED_FIFO {PHYSICS_PRIORITY})"
        assert _policy(proc.pid) == os.SCHED_FIFO
        assert os.sched_getparam(proc.pid).sched_priority == PHYSICS_PRIORITY
        for t, theta, speed, driven in record:
            proc.note_motors(t, theta, speed, driven)
        last, deadline = first, time.monotonic() + 120
        while last.t < record[-1][0] - 1e-3 and time.monotonic() < deadline:
            select.select([proc.told_fd], [], [], 0.05)
            for u in proc.updates():
                last = u
        assert last.t == pytest.approx(record[-1][0], abs=1e-3)
        assert last.demoted >= 1
        deadline = time.monotonic() + 10    # caught up: asks for the class again
        while _policy(proc.pid) != os.SCHED_FIFO and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _policy(proc.pid) == os.SCHED_FIFO
    finally:
        proc.close()
