"""The start-up ramp and the preflight: pure functions, and the emulated joint
module following a ramp without saturating."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.control import PRESETS, references
from aiko.control.preflight import OMEGA_MAX, format_table, preflight, required_speed
from aiko.control.ramp import (
    PEAK_SPEED_FACTOR,
    RAMP_DUTY,
    RAMP_TOLERANCE,
    profile,
    ramp_duration,
    ramp_peak_speed,
    ramp_references,
)
from aiko.firmware_interface.codec import Nmt, Ref, Sync, encode
from aiko.firmware_interface.emulator import JointModule
from aiko.firmware_interface.protocol import NmtCommand

T = 0.1
angles = st.floats(-0.78, 0.78, allow_nan=False)


def test_profile_is_minimum_jerk():
    tau = np.linspace(0, 1, 1001)
    s = profile(tau)
    assert s[0] == 0 and s[-1] == 1 and np.all(np.diff(s) >= 0)
    speed = np.gradient(s, tau)
    assert speed.max() == pytest.approx(PEAK_SPEED_FACTOR, rel=1e-4)
    assert abs(speed[0]) < 1e-3 and abs(speed[-1]) < 1e-3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(angles, angles, angles, angles), min_size=1, max_size=10),
       st.floats(0.1, 3.0))
def test_ramp_moves_every_joint_continuously_to_its_goal(rows, speed):
    start = np.array([[a, b] for a, b, _, _ in rows])
    goal = np.array([[c, d] for _, _, c, d in rows])
    duration = ramp_duration(start, goal, speed, T)
    refs = ramp_references(start, goal, duration, T)
    dist = np.max(np.abs(goal - start))
    if dist <= RAMP_TOLERANCE:
        assert duration == 0 and len(refs) == 0
        return
    k = round(duration / T)
    assert duration == pytest.approx(k * T) and refs.shape == (k + 1, len(rows), 4)
    np.testing.assert_allclose(refs[0, :, :2], start, atol=1e-12)
    np.testing.assert_array_equal(refs[-1, :, :2], goal)
    assert np.all(refs[-1, :, 2:] == 0)
    # each REF's rate carries the target exactly onto the next REF's angle
    np.testing.assert_allclose(refs[:-1, :, :2] + T * refs[:-1, :, 2:], refs[1:, :, :2],
                               atol=1e-12)
    assert ramp_peak_speed(refs) <= speed * (1 + 1e-9)
    # not a period longer than the speed asks for
    assert k == 1 or PEAK_SPEED_FACTOR * dist / (duration - T) > speed * (1 - 1e-9)


def test_ramp_shapes_are_checked():
    with pytest.raises(ValueError, match=r"\(n, 2\)"):
        ramp_references(np.zeros((3, 2)), np.zeros((2, 2)), 1.0, T)


def drive(module, refs, t, period=T, sync0=0):
    """Stream refs (k, 4) to one module on its own clock: REF then SYNC every
    period, ticking at 1 ms; the largest |duty| seen and the time after."""
    peak = 0.0
    for k, r in enumerate(refs):
        module.receive(t, *encode(Ref(module.node, *map(float, r))))
        module.receive(t, *encode(Sync((sync0 + k) % 256)))
        for _ in range(int(round(period / 0.001))):
            t += 0.001
            module.tick(t)
            peak = max(peak, abs(module.axes[0].duty), abs(module.axes[1].duty))
    return peak, t


def test_emulated_module_follows_the_ramp_to_the_curved_start_without_saturating():
    gait = PRESETS["lateral-undulation"]
    n = 10
    goal = references(gait, 0.0, n)[:, :2]
    start = np.zeros((n, 2))
    duration = ramp_duration(start, goal, RAMP_DUTY * OMEGA_MAX, T)
    assert 1.5 <= duration <= 2.0   # 40 degrees at 43 deg/s peak
    plan = ramp_references(start, goal, duration, T)
    worst = 0.0
    for j in range(n):
        m = JointModule(j + 1)
        m.power_up(0.0)
        m.receive(0.0, *encode(Nmt(NmtCommand.START, 0)))
        peak, t = drive(m, plan[:, j], 0.0)
        worst = max(worst, peak)
        err = np.abs(np.array(m.motor_angles) - goal[j])
        assert np.all(err <= RAMP_TOLERANCE), (j, np.degrees(err))
        assert not m.status & 0b110  # no saturation bit
    assert worst < 50.0  # far below 100 % duty


def test_the_same_jump_without_a_ramp_saturates_the_motor():
    # the failure the ramp exists for: one REF from 0 to -39.4 degrees
    gait = PRESETS["lateral-undulation"]
    goal = references(gait, 0.0, 10)[2]   # joint 3
    m = JointModule(3)
    m.power_up(0.0)
    m.receive(0.0, *encode(Nmt(NmtCommand.START, 0)))
    peak, _ = drive(m, np.tile(goal, (3, 1)), 0.0)
    assert peak == pytest.approx(100.0)


def test_preflight_passes_every_preset():
    for name, gait in PRESETS.items():
        p = preflight(gait, 10, 15.0)
        assert p.ok and p.refusal is None, name
        assert len(p.motors) == 20
    p = preflight(PRESETS["lateral-undulation"], 10, 15.0)
    assert max(m.peak_rate for m in p.motors) == pytest.approx(
        math.radians(40) * math.radians(80), rel=0.01)
    assert 1.5 <= p.ramp_from_straight <= 2.0


def test_preflight_refuses_a_gait_beyond_the_joint_limit_naming_the_joints():
    wide = PRESETS["lateral-undulation"].with_(A_h=math.radians(60), name="wide")
    p = preflight(wide, 4, 15.0)
    assert not p.ok
    line = p.refusal
    assert "\n" not in line
    assert "joints 1 H, 2 H, 3 H, 4 H" in line and "45.0 deg" in line
    assert "first joint 2 H at t = 0.00 s, -46.0 deg" in line
    clamped = {m.name: m.clamped_s for m in p.clamped}
    assert set(clamped) == {"1 H", "2 H", "3 H", "4 H"}
    # 60 sin x beyond 45 for 2 arcsin(3/4)/pi.. of each half period: about half the time
    assert all(5.0 < c < 8.5 for c in clamped.values())


def test_preflight_refuses_references_faster_than_the_motor():
    fast = PRESETS["lateral-undulation"].with_(omega_h=math.radians(300), name="fast")
    p = preflight(fast, 10, 15.0)
    line = p.refusal
    assert "needs 209 deg/s, more than its motor's 172 deg/s at full duty" in line
    assert "joint 1 H at t = 0.00 s" in line
    assert not p.clamped and len(p.too_fast) == 10


def test_required_speed_counts_a_jump_between_periods():
    refs = np.zeros((4, 1, 4))
    refs[1, 0, 2] = 0.5              # the REF's own rate
    refs[2:, 0, 1] = 0.3             # V jumps 0.3 rad between periods 1 and 2, rate 0
    need = required_speed(refs, T)
    np.testing.assert_allclose(need[:, 0, 0], [0.0, 0.5, 0.0, 0.0])
    np.testing.assert_allclose(need[:, 0, 1], [0.0, 3.0, 0.0, 0.0])


def test_preflight_table_has_a_row_per_joint_and_a_verdict():
    lines = format_table(preflight(PRESETS["sidewinding"], 10, 15.0))
    assert len(lines) == 1 + 3 + 10 + 2
    assert lines[-1].endswith("can be followed")
    wide = PRESETS["lateral-undulation"].with_(A_h=math.radians(60), name="wide")
    lines = format_table(preflight(wide, 2, None), bounded=False)
    assert "60 s (no duration" in lines[0] and "refuses wide" in lines[-1]
    assert lines[4].endswith("!") or "!" in lines[4]
