"""The emulated joint modules against the protocol spec, behaviour by behaviour
(joint-protocol.md, "Behaviour"), in virtual time: every test runs twice, with
frames handed to the modules directly and with every frame crossing python-can's
virtual bus both ways."""

import math
import random

import numpy as np
import pytest

from aiko.firmware_interface.codec import Emcy, Heartbeat, JointState, Nmt, Ref, Sync
from aiko.firmware_interface.emulator import FaultConfig, JointModelParams
from aiko.firmware_interface.protocol import EmcyCode, Motor, NmtCommand, NodeState, Status
from aiko.firmware_interface.virtual import BusJointRig, VirtualJointRig


@pytest.fixture(autouse=True, params=["direct", "virtual-bus"])
def rig_kind(request, monkeypatch):
    """Run every test on both rigs: VirtualJointRig is replaced in this module."""
    if request.param == "virtual-bus":
        made = []

        class Rig(BusJointRig):
            def __init__(self, *a, **kw):
                super().__init__(*a, **kw)
                made.append(self)

        monkeypatch.setitem(globals(), "VirtualJointRig", Rig)
        yield request.param
        for r in made:
            r.close()
    else:
        yield request.param

START, STOP, PREOP = NmtCommand.START, NmtCommand.STOP, NmtCommand.ENTER_PRE_OPERATIONAL
RESET_NODE, RESET_COMM = NmtCommand.RESET_NODE, NmtCommand.RESET_COMMUNICATION


def rig_started(n=2, **kw):
    rig = VirtualJointRig.with_nodes(n, **kw)
    rig.power_up()
    rig.advance(0.05)
    rig.send(Nmt(START, 0))
    return rig


def states(rig, node=None, since=None):
    return [f for _, f in rig.received(JointState, node, since)]


def emcys(rig, node=None, since=None):
    return [f for _, f in rig.received(Emcy, node, since)]


# --- Power-up and NMT reset node -------------------------------------------
def test_power_up_sends_boot_up_once_then_pre_operational_heartbeats():
    rig = VirtualJointRig.with_nodes(3)
    rig.power_up()
    rig.advance(0.55)
    for node in (1, 2, 3):
        hb = rig.received(Heartbeat, node)
        assert hb[0] == (0.0, Heartbeat(node, NodeState.BOOT_UP))
        assert [f.state for _, f in hb[1:]] == [NodeState.PRE_OPERATIONAL] * 5
        np.testing.assert_allclose([t for t, _ in hb[1:]], [0.1, 0.2, 0.3, 0.4, 0.5], atol=1e-9)


def test_reset_node_boots_again():
    rig = rig_started(1)
    rig.advance(0.3)
    t_reset = rig.t
    rig.send(Nmt(RESET_NODE, 1))
    rig.advance(0.25)
    hb = rig.received(Heartbeat, 1, since=t_reset)
    assert hb[0] == (pytest.approx(t_reset), Heartbeat(1, NodeState.BOOT_UP))
    assert [f.state for _, f in hb[1:]] == [NodeState.PRE_OPERATIONAL] * 2
    assert rig.module(1).state == NodeState.PRE_OPERATIONAL


# --- HEARTBEAT every 100 ms in every state -----------------------------------
@pytest.mark.parametrize("command,state", [(START, NodeState.OPERATIONAL),
                                           (STOP, NodeState.STOPPED),
                                           (PREOP, NodeState.PRE_OPERATIONAL)])
def test_heartbeat_every_100_ms_in_every_state(command, state):
    rig = VirtualJointRig.with_nodes(1)
    rig.power_up()
    rig.advance(0.05)
    rig.send(Nmt(command, 1))
    rig.advance(1.0)
    hb = rig.received(Heartbeat, 1, since=0.06)
    assert len(hb) == 10
    assert all(f.state == state for _, f in hb)
    assert np.allclose(np.diff([t for t, _ in hb]), 0.1)


# --- Pre-operational and stopped ---------------------------------------------
@pytest.mark.parametrize("command", [STOP, PREOP])
def test_ref_and_sync_ignored_outside_operational(command):
    rig = VirtualJointRig.with_nodes(2)
    rig.power_up()
    rig.send(Nmt(command, 0))
    rig.send(Ref(1, 0.3, 0.1, 0, 0))
    rig.send(Sync(1))
    rig.advance(0.5)
    assert states(rig) == []
    assert rig.module(1).motor_angles == (0.0, 0.0)


def test_stopped_motors_are_off_and_limp():
    rig = rig_started(1)
    m = rig.module(1)
    rig.send(Nmt(STOP, 1))
    rig.advance(0.01)
    m.set_link_angles(0.3, -0.2)          # someone moves the joint by hand
    rig.advance(0.05)
    assert m.axes[0].duty == 0 and m.axes[1].duty == 0
    half = m.params.backlash / 2
    assert m.motor_angles[0] == pytest.approx(0.3 - half)   # back-driven, inside free play
    assert m.motor_angles[1] == pytest.approx(-0.2 + half)


def test_pre_operational_holds_the_angle_it_had_on_entry():
    rig = rig_started(1)
    m = rig.module(1)
    rig.send(Ref(1, 0.2, 0.1, 0, 0))
    rig.send(Sync(0))
    rig.advance(1.0)
    held = m.motor_angles
    assert held[0] == pytest.approx(0.2, abs=1e-3)
    rig.send(Nmt(PREOP, 1))
    m.axes[0].theta += 0.05               # a disturbance: the servo brings it back
    rig.advance(1.0)
    assert m.motor_angles[0] == pytest.approx(held[0], abs=1e-3)
    # entering operational again, it keeps that angle until a REF is applied
    rig.send(Nmt(START, 1))
    rig.send(Sync(1))
    rig.advance(0.2)
    assert m.motor_angles[0] == pytest.approx(held[0], abs=1e-3)


# --- Operational: REF latched, applied on SYNC, STATE echoes the counter -----------
def test_ref_is_stored_and_applied_only_on_sync_by_all_joints_together():
    rig = rig_started(3)
    for node in (1, 2, 3):
        rig.send(Ref(node, 0.1 * node, -0.05 * node, 0.0, 0.0))
    rig.advance(0.2)
    assert all(rig.module(n).motor_angles == (0.0, 0.0) for n in (1, 2, 3))
    assert states(rig) == []
    t_sync = rig.t
    rig.send(Sync(42))
    replies = rig.received(JointState, since=t_sync)
    assert sorted(f.node for _, f in replies) == [1, 2, 3]
    assert all(f.sync_echo == 42 and f.status & Status.OPERATIONAL for _, f in replies)
    assert all(t == pytest.approx(t_sync) for t, _ in replies)
    rig.advance(1.0)
    for n in (1, 2, 3):
        assert rig.module(n).motor_angles[0] == pytest.approx(0.1 * n, abs=1e-3)
        assert rig.module(n).motor_angles[1] == pytest.approx(-0.05 * n, abs=1e-3)


def test_node_without_new_ref_keeps_its_previous_reference():
    rig = rig_started(1)
    rig.send(Ref(1, 0.3, 0.0, 0.0, 0.0))
    rig.send(Sync(0))
    rig.advance(0.1)
    for k in range(1, 8):
        rig.send(Sync(k))
        rig.advance(0.1)
    assert rig.module(1).motor_angles[0] == pytest.approx(0.3, abs=1e-3)
    echoes = [f.sync_echo for f in states(rig)]
    assert echoes == list(range(8))


def test_state_reports_the_encoder_not_the_link():
    """The encoder is on the motor: the free play between motor and link does not
    show in STATE."""
    rig = rig_started(1)
    m = rig.module(1)
    rig.send(Ref(1, 0.4, 0.0, 0.0, 0.0))
    rig.send(Sync(0))
    rig.advance(1.0)
    rig.send(Sync(1))
    s = states(rig)[-1]
    assert s.alpha_h == pytest.approx(m.motor_angles[0], abs=1e-4)
    assert 0 < abs(m.link_angles[0] - m.motor_angles[0]) <= m.params.backlash / 2 + 1e-12
    assert math.degrees(m.params.backlash) == pytest.approx(4.0)


def test_sync_counter_wraps():
    rig = rig_started(1)
    rig.send(Sync(255))
    rig.send(Sync(0))
    assert [f.sync_echo for f in states(rig)] == [255, 0]


# --- Joint limits --------------------------------------------------------------
def test_clamping_sets_status_and_sends_emcy_once_per_motor_then_reset():
    rig = rig_started(1)
    for k in range(3):
        rig.send(Ref(1, 1.2, -0.9, 0.0, 0.0))
        rig.send(Sync(k))
        rig.advance(0.1)
    e = emcys(rig, 1)
    limit = [f for f in e if f.error_code == EmcyCode.JOINT_LIMIT]
    assert sorted(f.motor for f in limit) == [Motor.H, Motor.V]
    assert all(f.error_register & 0x01 for f in limit)
    assert all(f.status & Status.H_CLAMPED and f.status & Status.V_CLAMPED for f in states(rig))
    for k in range(3, 23):  # keep the SYNCs coming (no timeout)
        rig.send(Sync(k))
        rig.advance(0.1)
    assert rig.module(1).motor_angles[0] == pytest.approx(0.7854, abs=2e-3)
    assert rig.module(1).motor_angles[1] == pytest.approx(-0.7854, abs=2e-3)
    # H back inside the limit: 0x0000 for motor H only, V still clamped
    t = rig.t
    rig.send(Ref(1, 0.2, -0.9, 0.0, 0.0))
    rig.send(Sync(9))
    resets = [f for f in emcys(rig, 1, since=t) if f.error_code == EmcyCode.ERROR_RESET]
    assert [f.motor for f in resets] == [Motor.H]
    assert resets[0].error_register & 0x01  # V's clamp is still active
    last = states(rig)[-1]
    assert not last.status & Status.H_CLAMPED and last.status & Status.V_CLAMPED


# --- SYNC timeout --------------------------------------------------------------
def test_no_timeout_before_the_first_sync():
    rig = rig_started(1)
    rig.advance(2.0)
    assert emcys(rig) == []


def test_sync_timeout_holds_reports_and_resumes():
    rig = rig_started(1)
    m = rig.module(1)
    rig.send(Ref(1, 0.5, 0.0, 0.0, 0.0))
    rig.send(Sync(0))
    t_last = rig.t
    rig.advance(0.29)
    assert emcys(rig) == []
    rig.advance(0.02)
    e = emcys(rig, 1)
    assert len(e) == 1 and e[0].error_code == EmcyCode.SYNC_TIMEOUT and e[0].motor == Motor.NONE
    assert e[0].error_register & 0x10
    t_timeout = rig.received(Emcy, 1)[0][0]
    assert t_timeout == pytest.approx(t_last + 0.3, abs=1e-3)
    held = m.motor_angles
    rig.advance(1.0)
    assert len(emcys(rig, 1)) == 1  # once
    assert m.motor_angles[0] == pytest.approx(held[0], abs=1e-3)  # holds where it was
    # resume: latest REF applied, EMCY 0x0000, this STATE still says "holding"
    rig.send(Ref(1, -0.1, 0.0, 0.0, 0.0))
    t = rig.t
    rig.send(Sync(1))
    e = emcys(rig, 1, since=t)
    assert [f.error_code for f in e] == [EmcyCode.ERROR_RESET] and e[0].error_register == 0
    assert states(rig)[-1].status & Status.HOLDING
    rig.advance(0.1)
    rig.send(Sync(2))
    assert not states(rig)[-1].status & Status.HOLDING
    rig.advance(1.0)
    assert m.motor_angles[0] == pytest.approx(-0.1, abs=1e-3)


# --- Leaving operational ------------------------------------------------------------
@pytest.mark.parametrize("command", [STOP, PREOP, RESET_NODE, RESET_COMM])
def test_leaving_operational_ends_conditions_with_one_emcy_reset(command):
    rig = rig_started(1)
    rig.send(Ref(1, 1.0, 1.0, 0.0, 0.0))
    rig.send(Sync(0))
    rig.advance(0.5)  # clamped on both motors and timed out
    active = emcys(rig, 1)
    assert {f.error_code for f in active} >= {EmcyCode.JOINT_LIMIT, EmcyCode.SYNC_TIMEOUT}
    t = rig.t
    rig.send(Nmt(command, 1))
    e = emcys(rig, 1, since=t)
    assert len(e) == 1 and e[0] == Emcy(1, EmcyCode.ERROR_RESET, 0, Motor.NONE)
    rig.advance(0.2)
    assert rig.module(1).status & (Status.H_CLAMPED | Status.V_CLAMPED | Status.HOLDING) == 0


def test_leaving_operational_without_conditions_sends_no_emcy():
    rig = rig_started(1)
    rig.send(Nmt(STOP, 1))
    rig.advance(0.2)
    assert emcys(rig) == []


# --- Reset communication -------------------------------------------------------------
def test_reset_communication_boots_and_keeps_holding():
    rig = rig_started(1)
    m = rig.module(1)
    rig.send(Ref(1, 0.3, -0.2, 0.0, 0.0))
    rig.send(Sync(0))
    rig.advance(0.25)
    t = rig.t
    rig.send(Nmt(RESET_COMM, 1))
    held = m.motor_angles
    rig.advance(1.0)
    hb = [f.state for _, f in rig.received(Heartbeat, 1, since=t)]
    boot = hb.index(NodeState.BOOT_UP)
    assert hb[boot + 1:] == [NodeState.PRE_OPERATIONAL] * 10
    assert m.motor_angles == pytest.approx(held, abs=1e-3)
    assert held[0] > 0.1  # it was holding a real angle, not zero


# --- Ignored frames --------------------------------------------------------------------
@pytest.mark.parametrize("ident,data", [
    (0x203, b"\x00" * 7), (0x080, b""), (0x080, b"\x01\x02"), (0x000, b"\x01"),
    (0x000, b"\x01\x00\x00"), (0x123, b"\x01"), (0x7FF, b""), (0x201, b"\x00" * 9),
])
def test_malformed_and_unknown_frames_are_ignored_without_answer(ident, data):
    rig = rig_started(2)
    rig.advance(0.01)
    before = list(rig.log)
    state_before = [(m.state, m.motor_angles) for m in rig.modules]
    rig.send_raw(ident, data)
    assert rig.log == before
    assert [(m.state, m.motor_angles) for m in rig.modules] == state_before


def test_extended_and_remote_frames_are_ignored():
    rig = rig_started(1)
    rig.send_raw(0x080, b"\x05", is_extended=True)
    rig.send_raw(0x080, b"", is_remote=True)
    assert states(rig) == []


def test_nmt_addresses_one_node_or_all():
    rig = VirtualJointRig.with_nodes(3)
    rig.power_up()
    rig.send(Nmt(START, 2))
    assert [m.state for m in rig.modules] == [NodeState.PRE_OPERATIONAL, NodeState.OPERATIONAL,
                                              NodeState.PRE_OPERATIONAL]
    rig.send(Nmt(STOP, 0))
    assert all(m.state == NodeState.STOPPED for m in rig.modules)
    rig.send(Nmt(0x55, 0))  # unknown command
    assert all(m.state == NodeState.STOPPED for m in rig.modules)


# --- The joint behind the encoder -------------------------------------------------------
def test_big_steps_saturate_the_motor_and_show_in_duty_and_status():
    rig = rig_started(1)
    rig.send(Ref(1, 0.7, 0.0, 0.0, 0.0))
    rig.send(Sync(0))
    rig.advance(0.05)
    rig.send(Sync(1))
    s = states(rig)[-1]
    assert s.duty_h == 100 and s.status & Status.H_SATURATED and s.duty_v == 0


def test_current_limit_emcy_after_200_ms_of_saturation():
    rig = rig_started(1, faults={1: FaultConfig(saturate_from=0.0, saturate_motor=Motor.V)})
    t0 = rig.t
    rig.send(Ref(1, 0.0, 0.6, 0.0, 0.0))
    rig.send(Sync(0))
    for k in range(1, 6):
        rig.advance(0.1)
        rig.send(Sync(k))
    e = [(t, f) for t, f in rig.received(Emcy, 1) if f.error_code == EmcyCode.CURRENT_LIMIT]
    assert len(e) == 1 and e[0][1].motor == Motor.V and e[0][1].error_register & 0x02
    assert e[0][0] == pytest.approx(t0 + 0.2, abs=3e-3)  # 1 ms ticks, "more than" 200 ms


def test_encoder_fault_reported_once():
    rig = rig_started(1, faults={1: FaultConfig(encoder_fault_at=0.5, encoder_motor=Motor.H)})
    rig.send(Ref(1, 0.3, 0.0, 0.0, 0.0))
    rig.send(Sync(0))
    for k in range(1, 10):
        rig.advance(0.1)
        rig.send(Sync(k))
    e = [f for f in emcys(rig, 1) if f.error_code == EmcyCode.ENCODER_FAULT]
    assert len(e) == 1 and e[0].motor == Motor.H and e[0].error_register & 0x01


def test_link_angles_are_settable_from_outside():
    rig = rig_started(1)
    m = rig.module(1)
    m.set_link_angles(0.02, -0.01)
    assert m.link_angles == (0.02, -0.01)
    # standalone, the servo's motor pulls the link along through the free play
    rig.send(Ref(1, 0.5, 0.0, 0.0, 0.0))
    rig.send(Sync(0))
    rig.advance(1.0)
    assert m.link_angles[0] == pytest.approx(0.5 - m.params.backlash / 2, abs=1e-3)


def test_rate_reference_is_followed_between_syncs():
    params = JointModelParams()
    rig = rig_started(1, params=params)
    m = rig.module(1)
    rig.send(Ref(1, 0.0, 0.0, 0.5, 0.0))
    rig.send(Sync(0))
    rig.advance(0.1)
    assert m.motor_angles[0] == pytest.approx(0.05, abs=5e-3)


# --- Fault injection ----------------------------------------------------------------------
def test_silent_node_stops_transmitting():
    rig = rig_started(2, faults={2: FaultConfig(silent_from=0.5)})
    for k in range(10):
        rig.send(Sync(k))
        rig.advance(0.1)
    late = rig.received(node=2, since=0.5)
    assert late == []
    assert len(rig.received(Heartbeat, 1, since=0.5)) >= 4


def test_dropped_frames_follow_the_fraction():
    rig = rig_started(1, faults={1: FaultConfig(drop_fraction=0.2, seed=3)})
    for k in range(500):
        rig.send(Sync(k % 256))
        rig.advance(0.02)
    got = len(states(rig))
    # a SYNC is lost on the way in or its STATE on the way out: 1 - 0.8^2 = 36 %
    assert 0.55 * 500 < got < 0.73 * 500


def test_delayed_replies():
    rig = rig_started(1, faults={1: FaultConfig(reply_delay=0.03)})
    t = rig.t
    rig.send(Sync(7))
    assert states(rig) == []
    rig.advance(0.05)
    (at, f), = rig.received(JointState)
    assert at == pytest.approx(t + 0.03) and f.sync_echo == 7


# --- Fuzz ------------------------------------------------------------------------------------
def test_random_frames_never_break_a_node():
    """A few thousand random frames (ids, DLCs, payloads, NMT included), then the
    node must still follow the spec."""
    rng = random.Random(1234)
    rig = rig_started(3)
    for k in range(4000):
        ident = rng.choice([rng.randrange(0x800), 0x000, 0x080, 0x201, 0x202, 0x203])
        dlc = rng.randrange(9)
        data = bytes(rng.randrange(256) for _ in range(dlc))
        rig.send_raw(ident, data, is_extended=rng.random() < 0.02)
        if k % 50 == 0:
            rig.advance(0.01)
    # whatever state the fuzzing left: reset, start, command, check
    rig.send(Nmt(RESET_NODE, 0))
    rig.advance(0.15)
    rig.send(Nmt(START, 0))
    t = rig.t
    for node in (1, 2, 3):
        rig.send(Ref(node, 0.1, 0.0, 0.0, 0.0))
    rig.send(Sync(77))
    replies = states(rig, since=t)
    assert sorted(f.node for f in replies) == [1, 2, 3] and all(f.sync_echo == 77 for f in replies)
    rig.advance(1.0)
    assert all(m.motor_angles[0] == pytest.approx(0.1, abs=1e-3) for m in rig.modules)
    assert all(m.state == NodeState.OPERATIONAL for m in rig.modules)


def test_the_rig_is_the_one_announced(rig_kind):
    rig = VirtualJointRig.with_nodes(1)
    assert isinstance(rig, BusJointRig) == (rig_kind == "virtual-bus")
    rig.power_up()
    assert rig.received(Heartbeat, 1) == [(0.0, Heartbeat(1, NodeState.BOOT_UP))]
