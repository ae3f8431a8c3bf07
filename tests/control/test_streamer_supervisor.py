"""Streamer and supervisor logic in virtual time, with a recording fake bus."""

import asyncio

import numpy as np
import pytest

from aiko.control import PRESETS, references
from aiko.control.streamer import ReferenceStreamer
from aiko.control.supervisor import FaultPolicy, NodesMissingError, Supervisor, TrialFault
from aiko.drivers.can_bus import RxFrame
from aiko.drivers.clock import VirtualClock
from aiko.firmware_interface.codec import (
    Emcy,
    Heartbeat,
    JointState,
    Nmt,
    Ref,
    Sync,
    decode,
    encode,
)
from aiko.firmware_interface.protocol import EmcyCode, NmtCommand, NodeState, Status


class FakeCan:
    """Records what is sent (with the clock's time); serves queued frames."""

    def __init__(self, clock):
        self.clock = clock
        self.sent = []
        self.inbox = []

    def send(self, ident, data, timeout=None):
        self.sent.append((self.clock.now(), decode(ident, data)))
        return True

    async def receive(self, timeout=None):
        await asyncio.sleep(0)
        if self.inbox:
            return self.inbox.pop(0)
        if timeout is not None:
            self.clock.advance(timeout)
        return None


class StallingClock(VirtualClock):
    """Virtual time in which one wake-up comes 0.35 s late."""

    def __init__(self, stall_at):
        super().__init__()
        self.stall_at = stall_at

    async def sleep_until(self, t, precise=False):
        await super().sleep_until(t, precise)
        if self.stall_at is not None and t >= self.stall_at:
            self.advance(0.35)
            self.stall_at = None


def test_streamer_sends_ref_for_every_node_then_sync_on_absolute_deadlines():
    clock = VirtualClock()
    can = FakeCan(clock)
    gait = PRESETS["sidewinding"]
    s = ReferenceStreamer(can, gait, [1, 2, 3], clock)
    asyncio.run(s.run(10.0))
    assert s.stats.periods == 101 and s.stats.late == 0 and s.stats.missed == 0
    frames = [f for _, f in can.sent]
    for k in range(101):
        period = frames[4 * k:4 * k + 4]
        assert [type(f) for f in period] == [Ref, Ref, Ref, Sync]
        assert [f.node for f in period[:3]] == [1, 2, 3]
        assert period[3].counter == k % 256
        t = can.sent[4 * k][0]
        assert t == pytest.approx(0.1 * k, abs=1e-9)  # no drift after 100 periods
        expected = references(gait, 0.1 * k, 3)
        got = np.array([[f.alpha_h, f.alpha_v, f.omega_h, f.omega_v] for f in period[:3]])
        np.testing.assert_allclose(got[:, :2], expected[:, :2], atol=0.5e-4 + 1e-12)
        np.testing.assert_allclose(got[:, 2:], expected[:, 2:], atol=0.5e-3 + 1e-12)


def test_streamer_skips_missed_periods_instead_of_bursting():
    clock = StallingClock(stall_at=1.0)
    can = FakeCan(clock)
    s = ReferenceStreamer(can, PRESETS["still"], [1], clock)
    asyncio.run(s.run(2.0))
    sync_times = [t for t, f in can.sent if isinstance(f, Sync)]
    gaps = np.diff(sync_times)
    assert s.stats.missed == 3 and s.stats.late == 1
    assert gaps.min() >= 0.05 - 1e-9  # never two periods back to back
    assert s.stats.periods == 21 - 3


def test_streamer_clamps_to_the_joint_limits():
    clock = VirtualClock()
    can = FakeCan(clock)
    wild = PRESETS["sidewinding"].with_(A_h=1.5, soft_start=False)
    s = ReferenceStreamer(can, wild, [1, 2], clock)
    asyncio.run(s.run(5.0))
    refs = [f for _, f in can.sent if isinstance(f, Ref)]
    assert max(abs(f.alpha_h) for f in refs) == pytest.approx(0.7854, abs=1e-4)


def test_state_replies_are_matched_to_their_sync():
    clock = VirtualClock()
    s = ReferenceStreamer(FakeCan(clock), PRESETS["still"], [1, 2], clock)
    s.send_period(0, 0.0)
    clock.advance(0.003)
    s.on_state(clock.now(), JointState(1, 0, 0, 0, 0, Status(1), 0))
    s.on_state(clock.now(), JointState(2, 0, 0, 0, 0, Status(1), 0))
    s.on_state(clock.now(), JointState(2, 0, 0, 0, 0, Status(1), 0))   # duplicate
    s.on_state(clock.now(), JointState(1, 0, 0, 0, 0, Status(1), 77))  # no such SYNC
    assert s.stats.states_matched == 2 and s.stats.states_unmatched == 2
    rt = s.stats.round_trips
    assert rt.count == 2 and rt.max == pytest.approx(0.003)
    assert rt.percentile(50) == rt.max        # its bin's upper edge, held to the maximum


def test_the_round_trip_starts_with_the_sync_not_the_period():
    """Sending the period's REFs takes time (1 ms each here): SYNC->STATE is
    timed from the SYNC."""
    clock = VirtualClock()

    class SlowCan(FakeCan):
        def send(self, ident, data, timeout=None):
            if isinstance(decode(ident, data), Ref):
                clock.advance(0.001)
            return super().send(ident, data, timeout)

    s = ReferenceStreamer(SlowCan(clock), PRESETS["still"], [1, 2], clock)
    s.send_period(0, 0.0)
    clock.advance(0.003)
    s.on_state(clock.now(), JointState(1, 0, 0, 0, 0, Status(1), 0))
    assert s.stats.round_trips.count == 1
    assert s.stats.round_trips.max == pytest.approx(0.003)
    # the period itself went out on time
    assert s.stats.jitter.count == 1 and s.stats.jitter.max == pytest.approx(0.0)


def rx(clock, frame):
    return RxFrame(clock.now(), *encode(frame))


def test_bring_up_waits_for_heartbeats_then_starts_all():
    clock = VirtualClock()
    can = FakeCan(clock)
    can.inbox = [rx(clock, Heartbeat(n, NodeState.PRE_OPERATIONAL)) for n in (1, 2, 3)]
    sup = Supervisor(can, [1, 2, 3], clock)
    asyncio.run(sup.bring_up(timeout=1.0))
    assert [f for _, f in can.sent] == [Nmt(NmtCommand.START, 0)]


def test_bring_up_names_the_missing_nodes():
    clock = VirtualClock()
    can = FakeCan(clock)
    can.inbox = [rx(clock, Heartbeat(n, NodeState.PRE_OPERATIONAL)) for n in (1, 3)]
    sup = Supervisor(can, [1, 2, 3, 4], clock)
    with pytest.raises(NodesMissingError, match="nodes 2, 4 within 2 s") as err:
        asyncio.run(sup.bring_up(timeout=2.0))
    assert err.value.missing == [2, 4]
    assert can.sent == []  # nothing started


def started(nodes=(1, 2), policy=None):
    policy = policy or FaultPolicy()
    clock = VirtualClock()
    can = FakeCan(clock)
    can.inbox = [rx(clock, Heartbeat(n, NodeState.PRE_OPERATIONAL)) for n in nodes]
    events = []
    sup = Supervisor(can, list(nodes), clock, policy, on_event=lambda t, k, d: events.append(k))
    asyncio.run(sup.bring_up())
    return clock, can, sup, events


def test_silent_node_is_a_fault_after_300_ms():
    clock, can, sup, events = started()
    for _ in range(5):
        clock.advance(0.1)
        sup.on_frame(clock.now(), Heartbeat(1, NodeState.OPERATIONAL))
        sup.on_frame(clock.now(), Heartbeat(2, NodeState.OPERATIONAL))
    t_last = clock.now()
    for _ in range(3):
        clock.advance(0.1)
        sup.on_frame(clock.now(), Heartbeat(1, NodeState.OPERATIONAL))
        assert sup.check() is None
    clock.advance(0.01)
    fault = sup.check()
    assert isinstance(fault, TrialFault) and fault.kind == "lost_node" and fault.node == 2
    assert clock.now() - t_last <= 0.32
    assert "fault" in events


@pytest.mark.parametrize("code,kind", [(EmcyCode.ENCODER_FAULT, "encoder_fault"),
                                       (EmcyCode.CURRENT_LIMIT, "current_limit")])
def test_emcy_faults_stop_by_default_and_policy_can_allow_them(code, kind):
    clock, can, sup, _ = started()
    sup.on_frame(clock.now(), Emcy(2, code, 1, 0))
    assert sup.check().kind == kind
    lax = FaultPolicy(stop_on_encoder_fault=False, stop_on_current_limit=False)
    clock, can, sup, events = started(policy=lax)
    sup.on_frame(clock.now(), Emcy(2, code, 1, 0))
    assert sup.check() is None and "emcy" in events


def test_joint_limit_emcy_is_recorded_not_fatal():
    clock, can, sup, events = started()
    sup.on_frame(clock.now(), Emcy(1, EmcyCode.JOINT_LIMIT, 1, 0))
    assert sup.check() is None and events.count("emcy") == 1


def test_safe_stop_sends_pre_operational_to_all():
    clock, can, sup, events = started()
    sup.safe_stop("test")
    assert can.sent[-1][1] == Nmt(NmtCommand.ENTER_PRE_OPERATIONAL, 0)
    assert events[-1] == "safe_stop"


class ModulesOnTheBus:
    """Emulated joint modules behind a fake bus in virtual time: every frame
    sent reaches them at once, their STATE replies go to ``on_state``."""

    def __init__(self, clock, modules, on_state=None):
        self.clock = clock
        self.modules = modules
        self.on_state = on_state
        self.sent = []
        for m in modules:
            m.power_up(0.0)
            m.receive(0.0, *encode(Nmt(NmtCommand.START, 0)))

    def send(self, ident, data, timeout=None):
        t = self.clock.now()
        self.sent.append((t, decode(ident, data)))
        for m in self.modules:
            for out in m.receive(t, ident, data):
                if isinstance(out.frame, JointState) and self.on_state is not None:
                    self.on_state(out.at, out.frame)
        return True


def ramp_rig(modules, gait=PRESETS["lateral-undulation"]):
    clock = VirtualClock()
    bus = ModulesOnTheBus(clock, modules)
    s = ReferenceStreamer(bus, gait, [m.node for m in modules], clock)
    bus.on_state = s.on_state
    return clock, bus, s


def test_ramp_reads_the_angles_then_reaches_the_curved_start_unsaturated():
    from aiko.control.ramp import RAMP_TOLERANCE
    from aiko.firmware_interface.emulator import JointModule

    modules = [JointModule(i) for i in (1, 2, 3)]
    modules[1].set_angles(0.2, -0.1)          # not straight: the ramp starts from here
    clock, bus, s = ramp_rig(modules)
    goal = s.refs_at(0.0)[:, :2]
    rep = asyncio.run(s.ramp_to(goal, speed=0.75))
    np.testing.assert_allclose(rep.start[1], [0.2, -0.1], atol=1e-4)
    # joint 2 H: 0.2 rad to -30.6 deg, 0.73 rad at 15/8 x mean speed <= 0.75 rad/s
    assert rep.duration == pytest.approx(1.9) and rep.max_error <= RAMP_TOLERANCE
    for m, g in zip(modules, goal, strict=True):
        assert np.abs(np.array(m.motor_angles) - g).max() <= RAMP_TOLERANCE
    frames = [f for _, f in bus.sent]
    assert isinstance(frames[0], Sync)          # the angles are read without a REF
    syncs = [t for t, f in bus.sent if isinstance(f, Sync)]
    assert np.allclose(np.diff(syncs), 0.1)     # one 10 Hz schedule through the phases
    # the gait follows on the next deadline, its t = 0 there
    asyncio.run(s.run(0.3))
    gait_syncs = [t for t, f in bus.sent if isinstance(f, Sync)]
    assert np.allclose(np.diff(gait_syncs), 0.1) and len(gait_syncs) == len(syncs) + 4


def test_ramp_names_the_joint_that_does_not_get_there():
    from aiko.firmware_interface.emulator import FaultConfig, JointModule

    weak = FaultConfig(saturate_from=0.0, saturate_motor=0)   # a tenth of its torque
    modules = [JointModule(1), JointModule(2, faults=weak), JointModule(3)]
    clock, bus, s = ramp_rig(modules)
    with pytest.raises(TrialFault, match=r"joint 2 H did not reach the start posture") as err:
        asyncio.run(s.ramp_to(s.refs_at(0.0)[:, :2], speed=0.75, settle_timeout=0.3))
    assert err.value.kind == "ramp_incomplete" and err.value.node == 2


def test_ramp_faults_a_silent_node_and_a_ramp_too_fast():
    from aiko.firmware_interface.emulator import FaultConfig, JointModule

    modules = [JointModule(1), JointModule(2, faults=FaultConfig(silent_from=0.0))]
    clock, bus, s = ramp_rig(modules)
    with pytest.raises(TrialFault, match="joint node 2 did not answer SYNC with STATE "
                                         "within 0.5 s") as err:
        asyncio.run(s.ramp_to(np.zeros((2, 2)), speed=0.75, read_timeout=0.5))
    assert err.value.kind == "no_state"
    clock, bus, s = ramp_rig([JointModule(1), JointModule(3)])
    with pytest.raises(TrialFault, match=r"a 0.1 s ramp would need \d+ deg/s") as err:
        asyncio.run(s.ramp_to(s.refs_at(0.0)[:, :2], duration=0.1, speed=0.75, max_speed=3.0))
    assert err.value.kind == "ramp_too_fast"
    assert not any(isinstance(f, Ref) for _, f in bus.sent)  # refused before any REF


def test_a_stall_before_the_start_is_not_silence():
    """The heartbeats bring-up read were sent before the PC stood still for
    0.4 s (a garbage collection of a large heap): the nodes were started after
    it, and are judged from then."""
    clock = VirtualClock()
    can = FakeCan(clock)
    can.inbox = [rx(clock, Heartbeat(n, NodeState.PRE_OPERATIONAL)) for n in (1, 2)]
    sup = Supervisor(can, [1, 2], clock, FaultPolicy())
    t_heard = clock.now()
    clock.advance(0.4)                          # the stall, with the frames waiting
    asyncio.run(sup.bring_up())
    assert sup.health[1].last_heartbeat == pytest.approx(t_heard)
    assert sup.check() is None and sup.nodes_ok() == 2
    clock.advance(0.25)
    assert sup.check() is None                  # 0.25 s since the start
    clock.advance(0.1)
    assert sup.check().kind == "lost_node"      # 0.35 s since the start, nothing heard


def test_a_stall_before_the_watch_first_runs_is_not_silence():
    """The nodes were started, then the trial's other tasks held the PC for
    0.4 s before the watch first ran: no node is lost for it."""
    clock, can, sup, events = started()
    for n in (1, 2):
        sup.on_frame(clock.now(), Heartbeat(n, NodeState.OPERATIONAL))
    clock.advance(0.4)

    async def run():
        task = asyncio.ensure_future(sup.watch())
        await asyncio.sleep(0)
        assert sup.fault is None
        for n in (1, 2):   # the heartbeats sent meanwhile arrive
            sup.on_frame(clock.now(), Heartbeat(n, NodeState.OPERATIONAL))
        for _ in range(5):
            await asyncio.sleep(0)
        assert sup.fault is None
        task.cancel()

    asyncio.run(run())


def test_a_stalled_watch_does_not_count_the_stall_as_silence():
    """The PC was not running for 0.35 s (heartbeats unread): the round that
    wakes late does not call the nodes lost, nor do the rounds after it while
    the heartbeats sent meanwhile cross the bus threads; a node silent for good
    is found once it was silent for the timeout of running time."""
    clock, can, sup, events = started()
    for n in (1, 2):
        sup.on_frame(clock.now(), Heartbeat(n, NodeState.OPERATIONAL))

    async def run():
        task = asyncio.ensure_future(sup.watch())
        await asyncio.sleep(0)
        clock.advance(0.35)                     # the stall
        await asyncio.sleep(0)
        assert sup.fault is None                # not judged on unread evidence
        for _ in range(5):                      # 0.1 s: node 1's heartbeat is on its way
            await asyncio.sleep(0)
        assert sup.fault is None and sup.nodes_ok() == 2
        sup.on_frame(clock.now(), Heartbeat(1, NodeState.OPERATIONAL))  # node 1 was there
        with pytest.raises(TrialFault) as err:
            await task
        return err.value

    t0 = clock.now()
    fault = asyncio.run(run())
    assert fault.kind == "lost_node" and fault.node == 2
    # the first wake-up is due at t0 + 0.02 and comes at t0 + 0.35 (0.33 s of
    # stall); node 2, heard at t0, is lost on the first round past 0.3 s of
    # running time: t0 + 0.33 + 0.3, rounded up to the rounds at t0 + 0.35 + k 0.02
    assert clock.now() == pytest.approx(t0 + 0.65, abs=1e-9)
