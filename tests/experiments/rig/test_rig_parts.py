"""The pieces of the simulated rig and the comparison, in-process: the parallel
model's reference handling, the comparison metrics, start alignment, the plant's
motor-link coupling, the simulated motion capture, the process owner."""

import asyncio
import math
import sys
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiko.control import PRESETS, references
from aiko.drivers.clock import TrialClock, VirtualClock
from aiko.drivers.mocap import ViconUdpSender, ViconUdpSource
from aiko.drivers.priority import Priority, RealtimeGovernor, request_realtime
from aiko.experiments.analysis.compare import (
    ComparisonError,
    Paths,
    compare_paths,
    comparison_figure,
)
from aiko.experiments.rig.alignment import start_posture
from aiko.experiments.rig.parallel_model import ParallelModel, _refs, ramped_references
from aiko.experiments.rig.plant import MocapView, PlantParams, SimulatedAiko, euler_xyz
from aiko.experiments.rig.references import recorded_references_reference
from aiko.experiments.trial.processes import ChildProcesses
from aiko.firmware_interface.codec import Nmt, Ref, Sync, encode
from aiko.firmware_interface.emulator import JointModule
from aiko.model import SnakeModel, SnakeParams, SolverParams
from aiko.model.posture import posture_from_joint_angles


# --------------------------------------------------------------- parallel model
def test_ramped_references_advance_with_the_rate_and_clamp():
    refs = np.array([[0.7, -0.1, 1.0, -2.0], [0.0, 0.0, 0.0, 0.0]])
    out = ramped_references(refs, np.array([0.0, 0.05, 0.1]), limit=0.7854)
    np.testing.assert_allclose(out[:, 1], 0.0)
    np.testing.assert_allclose(out[:, 0, 1], [-0.1, -0.2, -0.3])
    np.testing.assert_allclose(out[:, 0, 0], [0.7, 0.75, 0.7854])
    assert out[2, 0, 2] == 0.0 and out[1, 0, 2] == 1.0   # no rate while clamped


def test_parallel_model_equals_the_model_run_with_the_same_references():
    """References sent at irregular times, delivered before the start: the
    samples equal a direct run of the model with the per-step references the
    module docstring defines."""
    model = SnakeModel(SnakeParams(n=4), SolverParams())
    gait = PRESETS["sidewinding"]
    t0 = 2.0
    sends = t0 + np.array([0.0, 0.1003, 0.2001, 0.3007])
    sent = [references(gait, s - t0 + 0.4, 3) for s in sends]   # past the soft start
    pm = ParallelModel(model, rate=20.0)
    q0 = model.initial_state().q
    assert pm.add_refs(sends[0], sent[0]) == []                # waits for the start
    samples = pm.start(t0, q0)
    for s, r in zip(sends[1:], sent[1:], strict=True):
        samples += pm.add_refs(s, r)
    samples += pm.finish(t0 + 0.4)
    assert [round(s.t - t0, 9) for s in samples] == [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3,
                                                      0.35, 0.4]
    # the same by hand
    dt = model.dt
    steps = int(round(0.4 / dt))
    t = t0 + np.arange(steps) * dt
    k = np.searchsorted(sends, t + 1e-9, side="right") - 1
    per_step = np.stack([ramped_references(sent[j], np.array([ti - sends[j]]))[0]
                         for ti, j in zip(t, k, strict=True)])
    state, _ = model.run_steps(model.initial_state(), per_step)
    np.testing.assert_allclose(samples[-1].positions, state.positions, atol=1e-12)
    assert pm.steps == steps


def test_parallel_model_rejects_bad_references():
    pm = ParallelModel(SnakeModel(SnakeParams(n=3)))
    pm.start(0.0, SnakeModel(SnakeParams(n=3)).initial_state().q)
    with pytest.raises(Exception, match="shape"):
        pm.add_refs(0.1, np.zeros((5, 4)))
    with pytest.raises(Exception, match="finite"):
        pm.add_refs(0.1, np.full((2, 4), np.nan))


def test_model_process_speaks_json_lines():
    """The process end to end: ready, samples, done; a bad line gets an error
    reply and loses nothing."""
    import json
    import subprocess

    q0 = SnakeModel(SnakeParams(n=3)).initial_state().q.tolist()
    lines = [json.dumps({"start": {"t": 1.0, "q": q0}}), "not json",
             json.dumps({"ref": {"t": 1.0, "refs": [[0.1, 0, 0, 0], [0, 0, 0, 0]]}}),
             json.dumps({"ref": {"t": 1.1, "refs": [[0.1, 0, 0, 0], [0, 0, 0, 0]]}}),
             json.dumps({"end": {"t": 1.2}})]
    r = subprocess.run([sys.executable, "-m", "aiko.experiments.rig.parallel_model",
                        "--params", json.dumps({"n": 3}), "--priority", "3"],
                       input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    kinds = [next(iter(m)) for m in out]
    assert kinds[0] == "ready" and kinds[-1] == "done" and "error" in kinds
    # the class it asked for, or why not; it kept up with 0.2 s of a 3-link snake
    assert out[0]["ready"]["priority"] in ("real-time (SCHED_FIFO 3)", str(request_realtime(3)))
    assert out[-1]["done"]["demoted"] == 0
    ts = [m["sample"]["t"] for m in out if "sample" in m]
    np.testing.assert_allclose(ts, [1.0, 1.05, 1.1, 1.15, 1.2])


class _TimedModel:
    """Stands in for a ParallelModel whose periods take ``wall`` s to
    simulate ``span`` s."""

    def __init__(self, wall: float, span: float) -> None:
        self.t, self.wall, self.span = 0.0, wall, span

    def add_refs(self, t, refs):
        time.sleep(self.wall)
        self.t += self.span
        return []


def test_the_model_process_leaves_the_real_time_class_while_slower_than_the_trial():
    """Periods simulated slower than they last, for longer than the limit:
    the class is left once; one kept up with: asked for again."""
    calls = []
    rt = RealtimeGovernor(3, limit=0.05,
                          request=lambda p: calls.append("fifo") or Priority(True, p),
                          normal=lambda: calls.append("normal"))
    rt.request()
    slow, fast = _TimedModel(wall=0.02, span=0.01), _TimedModel(wall=0.0, span=0.1)
    for _ in range(6):
        _refs(slow, {"t": 0.0, "refs": []}, rt)
    assert calls == ["fifo", "normal"] and rt.demoted == 1 and not rt.active
    _refs(fast, {"t": 0.0, "refs": []}, rt)
    assert calls == ["fifo", "normal", "fifo"] and rt.active


# ------------------------------------------------------------------ comparison
def test_comparison_metrics_of_known_paths():
    t = np.linspace(0.0, 10.0, 201)
    exp = np.column_stack([np.zeros_like(t), 0.1 * t, np.full_like(t, 0.05)])   # +y, 1 m
    mod = np.column_stack([0.02 * t, 0.12 * t, np.full_like(t, 0.05)])          # further
    exp[50] = np.nan                                                             # occluded
    m = compare_paths(Paths(t, exp, t[::2], mod[::2]))
    assert m["distance_experiment_m"] == pytest.approx(1.0)
    assert m["distance_model_m"] == pytest.approx(math.hypot(0.2, 1.2))
    assert m["distance_ratio"] == pytest.approx(math.hypot(0.2, 1.2))
    assert m["heading_experiment_deg"] == pytest.approx(90.0)
    assert m["heading_difference_deg"] == pytest.approx(math.degrees(math.atan2(1.2, 0.2)) - 90)
    assert m["final_error_m"] == pytest.approx(math.hypot(0.2, 0.2))
    err = np.hypot(0.02 * t, 0.02 * t)
    keep = np.arange(t.size) != 50
    assert m["rms_error_m"] == pytest.approx(np.sqrt(np.mean(err[keep] ** 2)))
    assert m["speed_experiment_m_s"] == pytest.approx(0.1)
    assert m["duration_s"] == pytest.approx(10.0) and m["samples"] == 200


def test_heading_difference_wraps():
    t = np.array([0.0, 1.0])
    exp = np.array([[0, 0, 0], [-1, 0.01, 0]], dtype=float)    # ~ +179.4 deg
    mod = np.array([[0, 0, 0], [-1, -0.01, 0]], dtype=float)   # ~ -179.4 deg
    m = compare_paths(Paths(t, exp, t, mod))
    assert abs(m["heading_difference_deg"]) < 2.0


def test_comparison_needs_overlapping_data():
    t = np.array([0.0, 1.0])
    p = np.zeros((2, 3))
    with pytest.raises(ComparisonError, match="overlap"):
        compare_paths(Paths(t, p, t + 5, p))
    with pytest.raises(ComparisonError, match="motion-capture"):
        compare_paths(Paths(t, np.full((2, 3), np.nan), t, p))


def test_comparison_figure_has_the_papers_panels():
    t = np.linspace(0, 5, 101)
    p = np.column_stack([0.01 * t, 0.1 * t, 0 * t])
    fig = comparison_figure(Paths(t, p, t, 1.1 * p), "sidewinding", compare_paths(
        Paths(t, p, t, 1.1 * p)))
    labels = [ax.get_xlabel() for ax in fig.axes]
    assert labels == ["", "t [s]", "x [m]"]
    assert [ax.get_ylabel() for ax in fig.axes] == ["x [m]", "y [m]", "y [m]"]
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == ["experiment (motion capture)", "model", "start", "end"]
    assert "ratio 1.10" in fig._suptitle.get_text()


# ------------------------------------------------------------------- alignment
@given(st.floats(-math.pi, math.pi), st.floats(-2, 2), st.floats(-2, 2))
def test_start_posture_fits_the_links_seen(angle, dx, dy):
    params = SnakeParams(n=5)
    ah = np.array([0.3, -0.2, 0.1, 0.25])
    av = np.zeros(4)
    ref = posture_from_joint_angles(params, ah, av)
    c, s = math.cos(angle), math.sin(angle)
    R = np.array([[c, -s], [s, c]])
    seen = ref[:, :2] @ R.T + [dx, dy]
    markers = {i + 1: (seen[i, 0], seen[i, 1], 0.05) for i in range(5)}
    q = start_posture(params, ah, av, markers)
    np.testing.assert_allclose(q[:, :2], seen, atol=1e-9)
    np.testing.assert_allclose(q[:, 2], ref[:, 2], atol=1e-12)
    model = SnakeModel(params)
    angles = model.joint_angles(model.state_from_q(q))
    np.testing.assert_allclose(angles[:, 0], ah, atol=1e-9)   # the posture is kept


def test_start_posture_with_one_marker_moves_only():
    params = SnakeParams(n=11)
    zeros = np.zeros(10)
    q = start_posture(params, zeros, zeros, {6: (1.0, 2.0, 0.05)})
    assert q[5, 0] == pytest.approx(1.0) and q[5, 1] == pytest.approx(2.0)
    assert q[0, 0] > q[10, 0]   # the gait's heading: link 1 toward +x


# ----------------------------------------------------------------------- plant
def drive(aiko, modules, t_end, ref, lag=0.0, record=False):
    """Modules started, REF ``ref`` (alpha_h, alpha_v; or a function of t
    giving alpha_h, alpha_v and their rates) on every joint and a SYNC every
    100 ms; the physics ``lag`` s behind the modules, catching up 8 steps at a
    time (the rig on a busy machine); ``record``: note the motors at every
    tick."""
    def ref_at(t):
        return ref(t) if callable(ref) else (ref[0], ref[1], 0.0, 0.0)

    for m in modules:
        m.power_up(0.0)
        m.receive(0.0, *encode(Nmt(1, 0)))
    t, k = 0.0, 0
    while t < t_end - 1e-9:
        if k % 50 == 0:
            for m in modules:
                m.receive(t, *encode(Ref(m.node, *ref_at(t))))
            for m in modules:
                m.receive(t, *encode(Sync(k // 50 % 256)))
        t = round(t + 0.002, 9)
        k += 1
        for m in modules:
            m.tick(t)
        if record:
            aiko.note_motors(t)
        if t - lag > 0:
            while aiko.advance(t - lag, 8):
                pass
    while aiko.advance(t_end, 8):
        pass


@pytest.mark.parametrize("mode", ["ideal", "realistic"])
def test_plant_links_follow_the_motors_through_the_free_play(mode):
    plant = PlantParams.ideal() if mode == "ideal" else PlantParams()
    n = 4
    modules = [JointModule(i, params=plant.joint_params()) for i in range(1, n)]
    model = SnakeModel(SnakeParams(n=n), plant.solver_params())
    aiko = SimulatedAiko(model, modules)
    drive(aiko, modules, 1.5, (0.3, 0.0))
    half = math.radians(plant.backlash_deg) / 2
    for m, a in zip(modules, aiko.joint_angles(), strict=True):
        motor_h, _ = m.motor_angles
        assert motor_h == pytest.approx(0.3, abs=1e-3)            # the servo got there
        assert abs(a[0] - motor_h) <= half + 0.01                 # the link within the play
        assert m.link_angles[0] == a[0]                           # one source of truth
        reported = m._state_frame(0).alpha_h
        assert reported == pytest.approx(motor_h, abs=1e-4)       # the encoder: motor side
    if mode == "ideal":
        np.testing.assert_allclose(aiko.joint_angles()[:, 0], 0.3, atol=0.01)


def test_a_lagging_plant_moves_as_one_that_keeps_up():
    """The physics 150 ms behind the modules: with the motors' record it
    computes the motion of a plant that keeps up; pulling the links toward
    where the motors are by now (no record) is visibly off. Measured over 1 s
    of a 4-link wave on the ground at the plant's 0.5 ms: 1.8 mm with the
    record (the same with a 2 ms lag: the modules see the links' angles one
    update late, and the contacts' stick-slip amplifies it), 49 mm without; at
    1 ms 11 mm and 23 mm (rigid contact: 17 and 158), which is why the plant
    keeps 0.5 ms."""
    plant = PlantParams.ideal(dt=PlantParams.dt)
    n = 4

    def wave(t):
        w = 2 * math.pi
        return (0.4 * math.sin(w * t), 0.2 * math.sin(w * t), 0.4 * w * math.cos(w * t),
                0.2 * w * math.cos(w * t))

    def run(lag, record):
        modules = [JointModule(i, params=plant.joint_params()) for i in range(1, n)]
        aiko = SimulatedAiko(SnakeModel(SnakeParams(n=n), plant.solver_params()), modules)
        drive(aiko, modules, 1.0, wave, lag, record)
        return aiko.positions().copy(), aiko.t

    ref, t_ref = run(0.0, False)
    lagged, t_lag = run(0.15, True)
    blind, _ = run(0.15, False)
    assert t_lag == pytest.approx(t_ref)
    err = np.abs(lagged - ref).max()
    err_blind = np.abs(blind - ref).max()
    assert err < 5e-3 and err_blind > 10 * err, (err, err_blind)


def test_a_limp_motor_exerts_nothing():
    plant = PlantParams()
    modules = [JointModule(i, params=plant.joint_params()) for i in (1, 2)]
    model = SnakeModel(SnakeParams(n=3), plant.solver_params())
    aiko = SimulatedAiko(model, modules)
    for m in modules:
        m.power_up(0.0)
        m.receive(0.0, *encode(Nmt(2, 0)))   # stopped: motors off
    refs = aiko.step_references(4)
    np.testing.assert_array_equal(refs[..., :2], np.broadcast_to(aiko.joint_angles()[:, :2],
                                                                 refs[..., :2].shape))


def test_mocap_view_latency_and_noise():
    view = MocapView(noise_mm=0.5, latency=0.05, seed=3)
    R = np.repeat(np.eye(3)[None], 2, axis=0)
    for k in range(20):
        view.record(0.01 * k, np.array([[0.01 * k, 0, 0], [0, 0, 0]]), R)
    objs = view.objects(0.19)
    assert set(objs) == {"link1", "link2"}
    # the newest state before 0.14 s (50 ms old), in mm
    assert objs["link1"][0] == pytest.approx(130.0, abs=3.0)
    assert view.objects(0.19)["link1"][0] != objs["link1"][0]   # fresh noise each time
    noise = np.array([view.objects(0.19)["link2"][:3] for _ in range(2000)])
    assert abs(noise.mean()) < 0.05 and noise.std() == pytest.approx(0.5, rel=0.1)
    assert MocapView(latency=1.0).objects(0.5) is None


def test_a_frame_shows_the_state_before_its_time_whatever_came_first():
    """A frame at t shows the newest state recorded before t. The tick at t
    itself, its time a round-off off t either way (the physics' time and the
    clock's drift apart by 1.8e-12 s in 15 s), is the next frame's, whether
    it was recorded before the frame was taken or after."""
    R = np.eye(3)[None]
    for drift in (2e-12, -2e-12):
        view = MocapView()
        view.record(12.998, np.array([[0.4, 0, 0]]), R)
        before = view.objects(13.0)["link1"][0]        # the tick at 13 s not yet recorded
        view.record(13.0 + drift, np.array([[0.5, 0, 0]]), R)
        assert before == view.objects(13.0)["link1"][0] == pytest.approx(400.0)
        assert view.objects(13.002)["link1"][0] == pytest.approx(500.0)


def test_mocap_view_holds_back_frames_the_physics_has_not_reached():
    view = MocapView(latency=0.005, max_age=0.010)
    R = np.repeat(np.eye(3)[None], 1, axis=0)
    view.record(0.100, np.array([[0.1, 0, 0]]), R)
    # due at 0.110 - 0.005: the state of 0.100 is 5 ms old, within a frame
    assert view.objects(0.110)["link1"][0] == pytest.approx(100.0)
    # due at 0.1151: 15.1 ms past the physics, which is behind: no frame, counted
    assert view.objects(0.1201) is None and view.held == 1
    view.record(0.112, np.array([[0.2, 0, 0]]), R)
    assert view.objects(0.1201)["link1"][0] == pytest.approx(200.0) and view.held == 1
    # once the physics has passed the due time, the state of that time is sent
    view.record(0.130, np.array([[0.4, 0, 0]]), R)
    assert view.objects(0.1201)["link1"][0] == pytest.approx(200.0) and view.held == 1
    # without max_age the newest state is sent however old (offline use)
    loose = MocapView()
    loose.record(0.0, np.array([[0.3, 0, 0]]), R)
    assert loose.objects(5.0)["link1"][0] == pytest.approx(300.0) and loose.held == 0


def test_euler_xyz_inverts_the_rotation():
    from scipy.spatial.transform import Rotation
    angles = np.array([[0.3, -0.4, 1.2], [-1.0, 0.2, -2.5]])
    R = Rotation.from_euler("XYZ", angles).as_matrix()
    np.testing.assert_allclose(euler_xyz(R), angles, atol=1e-12)


def test_udp_sender_reaches_the_source_with_every_link():
    async def main():
        clock = TrialClock()
        async with ViconUdpSource("link6", clock, host="127.0.0.1", port=0) as src:
            objs = {f"link{i}": (1000.0 * i, 0.0, 52.5, 0, 0, 0) for i in range(1, 12)}
            sender = ViconUdpSender(("127.0.0.1", src.port), lambda t: objs, clock, rate=200)
            task = asyncio.create_task(sender.run())
            await asyncio.sleep(0.2)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return src.latest(), src.latest_objects(), sender.sent

    latest, (_, frame, objects), sent = asyncio.run(main())
    assert latest.position == pytest.approx((6.0, 0.0, 0.0525))
    assert len(objects) == 11 and objects["link11"][0] == pytest.approx(11.0)
    assert frame == latest.frame and 20 <= sent <= 41


# ------------------------------------------------------------- process owner
def test_process_owner_ends_every_child_on_an_error():
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
             "print('up', flush=True); time.sleep(60)"

    async def main():
        procs = ChildProcesses(grace=0.5)
        children = []
        with pytest.raises(RuntimeError):
            async with procs:
                for _ in range(2):
                    c = await procs.start("stubborn", [sys.executable, "-c", script])
                    assert await c.readline(30) == "up"
                    children.append(c)
                raise RuntimeError("the owner fails")
        return children

    children = asyncio.run(main())
    assert all(c.returncode is not None for c in children)
    assert "SIGKILL" in children[0].describe_exit()


def test_a_killed_model_is_reported_with_its_signal_even_when_a_write_finds_it_first():
    """The trial may write references to a model that was just killed before
    its reader sees the end of output: the report still says SIGKILL."""
    import os
    import signal as sig

    from aiko.experiments.trial.model_link import ModelLink

    async def main():
        events = []
        async with ChildProcesses(grace=0.5) as procs:
            child = await procs.start("parallel model", [
                sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(60)"])
            assert await child.readline(30) == "up"
            link = ModelLink(child, VirtualClock(), on_event=lambda k, d: events.append((k, d)))
            link.start(0.0, np.zeros((2, 7)), "test")
            os.kill(child.pid, sig.SIGKILL)
            await child.proc.wait()
            for k in range(3):    # no reader ran: the writes find the pipe closed
                link.send_refs(0.1 * k, np.zeros((1, 4)))
            assert not link.alive and link.stopped is None
            assert not await link.finish(1.0)
            return link, events

    link, events = asyncio.run(main())
    assert "SIGKILL" in link.stopped and link.summary()["stopped"] == link.stopped
    assert [k for k, _ in events].count("model_stopped") == 1


def test_lag_percentile_reads_the_histogram():
    from aiko.experiments.rig.simrig import LAG_BIN, RigConfig, SimulatedRig

    rig = SimulatedRig(RigConfig(nodes=2))
    assert rig.lag_percentile(99) is None
    rig.lag.counts[0] = 98            # 98 updates within 0.5 ms
    rig.lag.counts[40] = 2            # 2 at 20-20.5 ms
    rig.lag.max = 0.0204
    assert rig.lag_percentile(50) == 1000 * LAG_BIN
    assert rig.lag_percentile(99) == pytest.approx(20.4)   # its bin's edge is above the max
    rig.lag.max = 0.0205
    assert rig.lag_percentile(99) == 1000 * LAG_BIN * 41


@pytest.mark.parametrize("seed", range(5))
def test_the_plant_reads_the_motor_record_as_in_full(seed):
    """A long record (the physics far behind): the plant's references from
    the entries it keeps are the references from every entry ever noted, and
    without a record reaching its steps it falls back to the motors' angles."""
    rng = np.random.default_rng(seed)
    plant = PlantParams()
    n = 4
    modules = [JointModule(i, params=plant.joint_params()) for i in range(1, n)]
    aiko = SimulatedAiko(SnakeModel(SnakeParams(n=n), plant.solver_params()), modules)
    ts, xs = [], []
    t = 0.0
    for _ in range(200):                               # grows its arrays past their start
        t += float(rng.choice([0.002, 0.0021, 0.0005, 0.002]))
        ts.append(t)
        xs.append(rng.normal(size=(n - 1, 2, 2)))
        aiko.note_motors(t, xs[-1])
    driven = np.array([m.motors_driven for m in modules]).reshape(-1, 2)
    for m in (1, 3, 8, 40):
        for t0 in (0.0, 0.0101, 0.1):
            aiko.state.t = t0
            theta0 = aiko._theta.copy()
            want = recorded_references_reference(t0, aiko.model.dt, m, np.array(ts),
                                                 np.array(xs), theta0, aiko._angles,
                                                 aiko._half, driven)
            assert want is not None
            np.testing.assert_array_equal(aiko.step_references(m), want[0])
            np.testing.assert_array_equal(aiko._theta, want[1])
    aiko.state.t = t                                   # nothing recorded after it
    aiko.note_motors(t, xs[-1])                        # drops the entries it is past
    assert aiko._rec_hi == aiko._rec_lo
    motors = np.array([m.motor_angles for m in modules]).reshape(-1, 2)
    refs = aiko.step_references(4)                     # the motors' angles, no record
    np.testing.assert_allclose(aiko._theta, motors)
    assert refs.shape == (4, n - 1, 4)
