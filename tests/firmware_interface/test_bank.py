"""The compiled bank of joint modules against its readable twin, the modules
ticked one by one in Python: the same frames at the same times and the same
motors, links and states, bit for bit, under any schedule of frames, ticks
and faults."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiko.firmware_interface.bank import ModuleBank
from aiko.firmware_interface.codec import Emcy, Nmt, Ref, Sync, encode
from aiko.firmware_interface.emulator import FaultConfig, JointModelParams, JointModule
from aiko.firmware_interface.group import JointModules
from aiko.firmware_interface.protocol import EmcyCode, NmtCommand

NODES = 4

params = st.builds(JointModelParams,
                   omega_max=st.floats(0.5, 10.0), k_p=st.floats(1.0, 1000.0),
                   backlash=st.floats(0.0, 0.15), ideal=st.booleans())
times = st.none() | st.floats(0.0, 1.5)
faults = st.builds(FaultConfig,
                   drop_fraction=st.sampled_from([0.0, 0.0, 0.2]),
                   silent_from=times, encoder_fault_at=times,
                   encoder_motor=st.sampled_from([0, 1]), saturate_from=times,
                   saturate_motor=st.sampled_from([0, 1]),
                   reply_delay=st.sampled_from([0.0, 0.003]),
                   babble_from=st.none() | st.floats(0.0, 1.0),
                   babble_rate=st.sampled_from([0.0, 40.0]), seed=st.integers(0, 9))
angle = st.floats(-2.0, 2.0)
rate = st.floats(-3.0, 3.0)
actions = st.one_of(
    st.tuples(st.just("tick"), st.floats(0.0, 0.03)),
    st.tuples(st.just("wait"), st.floats(0.0, 0.6)),
    st.tuples(st.just("sync"), st.integers(0, 255)),
    st.tuples(st.just("ref"), st.integers(1, NODES + 1), angle, angle, rate, rate),
    st.tuples(st.just("nmt"), st.sampled_from(list(NmtCommand)), st.integers(0, NODES)),
    st.tuples(st.just("links"), st.floats(-0.1, 0.1)),
    st.tuples(st.just("raw"), st.integers(0, 0x7FF), st.binary(max_size=8)),
)


def _modules(ps, fs):
    return [JointModule(i + 1, params=ps[i], faults=fs[i]) for i in range(NODES)]


def _play(group, script):
    """Power up, then the script; every frame out, with the arrays after each step."""
    out = list(group.power_up(0.0))
    out += group.receive(0.0, *encode(Nmt(NmtCommand.START, 0)))
    t, seen = 0.0, []
    for action in script:
        kind = action[0]
        if kind in ("tick", "wait"):
            t += action[1]
            out += group.tick(t)
        elif kind == "sync":
            out += group.receive(t, *encode(Sync(action[1])))
        elif kind == "ref":
            out += group.receive(t, *encode(Ref(*action[1:])))
        elif kind == "nmt":
            out += group.receive(t, *encode(Nmt(action[1], action[2])))
        elif kind == "links":
            group.set_link_angles(group.link_angles() + action[1])
        else:
            out += group.receive(t, action[1], action[2])
        seen.append((group.motor_angles(), group.link_angles(), group.motor_speeds(),
                     group.motors_driven()))
    return out, seen


def _observable(m: JointModule):
    return (m.state, m.status, m.error_register(), m.motor_angles, m.link_angles,
            m.motor_speeds, m.motors_driven, list(m.nmt_obeyed), m.axes[0].reported,
            m.axes[1].reported, m.axes[0].duty, m.axes[1].duty)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(params, min_size=NODES, max_size=NODES),
       st.lists(faults, min_size=NODES, max_size=NODES),
       st.lists(actions, min_size=1, max_size=60))
def test_the_bank_sends_what_the_modules_send_one_by_one(ps, fs, script):
    ref_out, ref_seen = _play(JointModules(_modules(ps, fs)), script)
    bank = ModuleBank(_modules(ps, fs))
    bank_out, bank_seen = _play(bank, script)
    assert bank_out == ref_out
    for a, b in zip(ref_seen, bank_seen, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    reference = JointModules(_modules(ps, fs))
    _play(reference, script)
    assert ([_observable(m) for m in bank.modules]
            == [_observable(m) for m in reference.modules])


def test_a_long_tick_gives_every_condition_at_its_substep():
    """A tick of 2 s after the last SYNC (1600 substeps; the bank's event rows
    grow for it), with node 1's V motor saturated by a reference beyond its
    limit and node 2's encoder failing at 1.2 s: each condition at the
    substep it falls in, as the modules one by one give them."""
    fs = [FaultConfig(), FaultConfig(encoder_fault_at=1.2), FaultConfig(), FaultConfig()]
    ps = [JointModelParams()] * NODES
    script = [("ref", 1, 0.0, 1.4, 0.0, 0.0), ("sync", 7), ("tick", 0.2), ("sync", 8),
              ("tick", 2.0)]
    ref_out, _ = _play(JointModules(_modules(ps, fs)), script)
    bank_out, _ = _play(ModuleBank(_modules(ps, fs)), script)
    assert bank_out == ref_out
    emcy = [(round(o.at, 9), o.frame.node, o.frame.error_code, o.frame.motor)
            for o in bank_out if isinstance(o.frame, Emcy)]
    assert emcy == [
        (0.0, 1, EmcyCode.JOINT_LIMIT, 1),
        (0.2025, 1, EmcyCode.CURRENT_LIMIT, 1),    # saturated since 0.00125 s
        (0.2475, 1, EmcyCode.ERROR_RESET, 1),      # at the clamped target, no longer
        (0.5, 1, EmcyCode.SYNC_TIMEOUT, 0xFF),     # 0.3 s after the SYNC at 0.2 s
        (0.5, 2, EmcyCode.SYNC_TIMEOUT, 0xFF),
        (1.2, 2, EmcyCode.ENCODER_FAULT, 0),
        (0.5, 3, EmcyCode.SYNC_TIMEOUT, 0xFF),
        (0.5, 4, EmcyCode.SYNC_TIMEOUT, 0xFF),
    ]


def test_the_plant_moves_the_same_with_the_bank_as_with_the_modules():
    """The simulated Aiko behind the bank and behind the modules ticked one by
    one: the same links, bit for bit, after a second of a wave."""
    from aiko.experiments.rig.plant import SimulatedAiko
    from aiko.model import SnakeModel, SnakeParams, SolverParams

    model = SnakeModel(SnakeParams(n=4), SolverParams(dt=0.0005))
    jp = JointModelParams(backlash=math.radians(4.0))
    plants = []
    for group in (JointModules([JointModule(i, params=jp) for i in range(1, 4)]),
                  ModuleBank([JointModule(i, params=jp) for i in range(1, 4)])):
        aiko = SimulatedAiko(model, group)
        group.power_up(0.0)
        group.receive(0.0, *encode(Nmt(NmtCommand.START, 0)))
        t = 0.0
        for k in range(500):
            t = (k + 1) * 0.002
            if k % 50 == 0:
                for node in range(1, 4):
                    a = 0.5 * math.sin(2.0 * t + node)
                    group.receive(t, *encode(Ref(node, a, 0.2 * a, 1.0, 0.0)))
                group.receive(t, *encode(Sync(k // 50)))
            group.tick(t)
            aiko.advance(t)
        plants.append(aiko)
    np.testing.assert_array_equal(plants[0].positions(), plants[1].positions())
    np.testing.assert_array_equal(plants[0].joint_angles(), plants[1].joint_angles())
    assert plants[1].steps == 2000 and np.ptp(plants[1].positions()[:, 1]) > 0.0
