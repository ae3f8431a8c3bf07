"""The steering laws (control/steering.py): heading estimates, heading hold,
LOS guidance; and the sign of the offset, measured on the model."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiko.control.gait import PRESETS
from aiko.control.steering import (
    HeadingHold,
    LosGuidance,
    LosState,
    cross_track,
    heading_from_links,
    heading_from_track,
    wrap_angle,
)


@given(st.floats(-50.0, 50.0))
def test_wrap_angle_keeps_the_direction_and_the_range(a):
    w = float(wrap_angle(a))
    assert -math.pi <= w < math.pi
    assert math.cos(w) == pytest.approx(math.cos(a), abs=1e-9)
    assert math.sin(w) == pytest.approx(math.sin(a), abs=1e-9)


@given(st.floats(-math.pi, math.pi), st.floats(0.0, 0.05))
def test_heading_from_links_of_a_waving_body(theta, amp):
    s = -np.arange(11) * 0.122                       # head first, the tail behind it
    lateral = amp * np.sin(2 * np.pi * s / 0.8)
    x = s * math.cos(theta) - lateral * math.sin(theta)
    y = s * math.sin(theta) + lateral * math.cos(theta)
    h = heading_from_links(np.stack([x, y], axis=1))
    assert abs(float(wrap_angle(h - theta))) < math.radians(2.0)


def test_heading_from_track_filters_the_body_wave():
    t = np.arange(0, 6, 0.05)
    theta = math.radians(120)
    # 3 cm/s along theta, and a 4 cm sideways wave of period 4.5 s
    along = 0.03 * t
    side = 0.04 * np.sin(2 * np.pi * t / 4.5)
    p = np.stack([along * math.cos(theta) - side * math.sin(theta),
                  along * math.sin(theta) + side * math.cos(theta)], axis=1)
    h = heading_from_track(t, p, window=4.5)
    assert abs(math.degrees(float(wrap_angle(h - theta)))) < 1.0
    assert heading_from_track(t[:2], p[:2], 4.5) is None
    assert heading_from_track(t, np.zeros_like(p), 4.5) is None


def test_heading_hold_turns_toward_the_target_through_the_short_way_and_saturates():
    hold = HeadingHold(k_p=0.5, phi_max=math.radians(15), sign=-1.0)
    # target 10 deg left of the heading: counter-clockwise wanted, negative offset
    assert hold.offset(0.0, math.radians(10)) == pytest.approx(-0.5 * math.radians(10))
    # across +-180: heading 179 deg, target -179 deg is 2 deg to the left
    assert hold.offset(math.radians(179), math.radians(-179)) == pytest.approx(
        -0.5 * math.radians(2), abs=1e-9)
    assert hold.offset(0.0, math.radians(-170)) == pytest.approx(math.radians(15))
    assert hold.offset(1.0, 1.0) == 0.0


def test_cross_track_is_positive_left_of_the_path():
    e, along, angle = cross_track((1.0, 0.3), (0.0, 0.0), (2.0, 0.0))
    assert (e, along, angle) == pytest.approx((0.3, 1.0, 0.0))
    e, _, angle = cross_track((0.0, 1.0), (0.0, 0.0), (0.0, 2.0))
    assert e == pytest.approx(0.0) and angle == pytest.approx(math.pi / 2)
    with pytest.raises(ValueError):
        cross_track((0, 0), (1, 1), (1, 1))


def test_los_points_back_to_the_line_and_follows_the_waypoints():
    los = LosGuidance(((0.0, 0.0), (2.0, 0.0), (2.0, 2.0)), lookahead=0.5, accept=0.15)
    target, e, state = los.target((0.5, 0.0))
    assert target == pytest.approx(0.0) and e == 0.0 and state == LosState(0, False)
    target, e, _ = los.target((0.5, 0.5))           # left of the line: aim right, down
    assert e == pytest.approx(0.5) and target == pytest.approx(-math.pi / 4)
    target, _, _ = los.target((0.5, -0.5))
    assert target == pytest.approx(math.pi / 4)
    # at the corner: the next segment, heading +90 deg
    target, e, state = los.target((1.9, 0.0), state)
    # 0.1 m left of the new segment (travel +y): aim a little right of +90 deg
    assert state.segment == 1 and target == pytest.approx(math.pi / 2 - math.atan2(0.1, 0.5))
    _, _, state = los.target((2.0, 2.1), state)
    assert state.done
    with pytest.raises(ValueError):
        LosGuidance(((0.0, 0.0),))


@pytest.mark.parametrize("offset_deg", [10.0, -10.0])
def test_a_positive_offset_turns_the_snake_clockwise(offset_deg):
    """The model, orthotropic lateral undulation (its own friction), the
    gait's steering offset: the sign HeadingHold assumes."""
    import warnings

    from aiko.experiments.analysis.simulate import simulate_gait
    from aiko.model import ConvergenceWarning, SnakeModel, SnakeParams

    g0 = PRESETS["lateral-undulation-orthotropic"]
    g = g0.with_(offset=math.radians(offset_deg))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a few capped steps, as always
        res = simulate_gait(SnakeModel(SnakeParams(mu_x=g0.mu_x, mu_y=g0.mu_y)), g, 6.0)
    h = heading_from_track(res.t, res.com(), window=4.5)
    turn = math.degrees(float(wrap_angle(h - 0.0)))
    assert -math.copysign(1.0, offset_deg) * turn > 15.0, turn


# ------------------------------------------------------------ the loop
from aiko.control.steering import (  # noqa: E402
    SteeringConfig,
    SteeringError,
    SteeringLoop,
    offset_room,
    steering_loop,
)
from aiko.experiments.files.path_file import PathFileError, load_path_toml  # noqa: E402


def feed(loop, t0, t1, heading_deg, speed=0.05, rate=20.0, start=(0.0, 0.0)):
    """Fresh positions moving straight along heading_deg from t0 to t1."""
    th = math.radians(heading_deg)
    for t in np.arange(t0, t1 + 1e-9, 1 / rate):
        d = speed * (t - t0)
        loop.observe(t, (start[0] + d * math.cos(th), start[1] + d * math.sin(th), 0.05))


def test_the_loop_waits_for_a_window_then_steers_toward_the_target_with_its_sign():
    loop = SteeringLoop(SteeringConfig(heading=0.0, k_p=0.25, k_i=0.0), window=2.0,
                        phi_max=1.0)
    assert loop.command(0.0).mode == "wait"                    # nothing seen yet
    feed(loop, 0.0, 0.5, 40.0)
    rec = loop.command(0.5)
    assert rec.mode == "wait" and rec.offset == 0.0 and rec.heading is None
    feed(loop, 0.55, 1.5, 40.0, start=(0.05 * 0.55 * math.cos(math.radians(40)),
                                       0.05 * 0.55 * math.sin(math.radians(40))))
    rec = loop.command(1.6)
    assert rec.mode == "closed" and rec.heading == pytest.approx(math.radians(40), abs=1e-6)
    # heading above the target: turn clockwise, which a positive offset does (sign -1)
    assert rec.offset > 0
    # the offset moves at most rate_max per second of periods, toward 0.25 * 40 deg
    feed(loop, 1.55, 4.5, 40.0, start=(0.05 * 1.55 * math.cos(math.radians(40)),
                                       0.05 * 1.55 * math.sin(math.radians(40))))
    offs = [loop.command(1.6 + 0.1 * k).offset for k in range(1, 30)]
    steps = np.diff([rec.offset, *offs])
    assert np.all(steps <= math.radians(20.0) * 0.1 + 1e-12)
    assert offs[-1] == pytest.approx(math.radians(10.0), abs=1e-9)


def test_the_offset_saturates_at_the_room_the_gait_leaves():
    g = PRESETS["lateral-undulation"]                          # A_h 40 deg: 5 deg of room
    assert offset_room(g.A_h, g.psi_h, math.radians(45)) == pytest.approx(math.radians(5.0))
    loop = steering_loop(SteeringConfig(heading=math.pi / 2, rate_max=10.0), g)
    feed(loop, 0.0, 3.0, -90.0)                                # 180 deg off
    loop.command(2.9)
    assert abs(loop.command(3.0).offset) == pytest.approx(loop.phi_max)
    assert loop.phi_max == pytest.approx(math.radians(5.0), abs=1e-3)
    with pytest.raises(SteeringError, match="no room to steer"):
        steering_loop(SteeringConfig(heading=0.0), g.with_(A_h=math.radians(45)))
    with pytest.raises(SteeringError, match="omega_h = 0"):
        steering_loop(SteeringConfig(heading=0.0), PRESETS["still"])


def test_stale_motion_capture_holds_then_falls_back_to_open_loop_then_resumes():
    cfg = SteeringConfig(heading=0.0, k_p=0.25, k_i=0.0, hold=1.0, stale_after=0.25,
                         rate_max=math.radians(20))
    loop = SteeringLoop(cfg, window=1.0, phi_max=1.0)
    feed(loop, 0.0, 3.0, 30.0)
    for k in range(11):
        rec = loop.command(2.0 + 0.1 * k)
    assert rec.mode == "closed" and rec.offset > 0
    held = rec.offset
    # no fresh data after t = 3.0: stale from 3.3 on, held for 1 s, then open loop
    modes = {}
    for k in range(1, 40):
        t = 3.0 + 0.1 * k
        modes[round(t, 1)] = r = loop.command(t)
        assert r.heading is None or r.mode == "closed"
    assert modes[3.2].mode == "closed"                     # 0.2 s old: still fresh
    assert modes[3.3].mode == "hold" and modes[3.3].offset == held
    assert modes[4.2].mode == "hold" and modes[4.2].offset == held
    assert modes[4.3].mode == "open"
    assert modes[4.3].offset == pytest.approx(held - math.radians(20) * 0.1)
    assert modes[6.9].mode == "open" and modes[6.9].offset == 0.0
    # data back: closed again once the window has motion in it
    feed(loop, 7.0, 8.0, 30.0, start=(1.0, 1.0))
    assert loop.command(8.0).mode == "closed"


def test_the_loop_follows_waypoints_segment_by_segment():
    cfg = SteeringConfig(waypoints=((0.0, 0.0), (1.0, 0.0), (1.0, 1.0)), lookahead=0.5,
                         accept=0.1)
    loop = SteeringLoop(cfg, window=1.0, phi_max=1.0)
    feed(loop, 0.0, 2.0, 0.0, speed=0.1, start=(0.0, -0.2))       # right of the first leg
    rec = loop.command(2.0)
    assert rec.segment == 0 and rec.cross_track == pytest.approx(-0.2, abs=1e-6)
    assert rec.target == pytest.approx(math.atan2(0.2, 0.5), abs=1e-6)   # back toward it
    feed(loop, 2.05, 4.0, 0.0, speed=0.1, start=(0.96, 0.0))     # at the corner
    rec = loop.command(4.0)
    assert rec.segment == 1 and rec.target == pytest.approx(math.pi / 2, abs=0.3)


def test_steering_config_checks():
    with pytest.raises(ValueError, match="not both"):
        SteeringConfig()
    with pytest.raises(ValueError, match="not both"):
        SteeringConfig(heading=0.0, waypoints=((0, 0), (1, 0)))
    with pytest.raises(ValueError, match="k_p"):
        SteeringConfig(heading=0.0, k_p=0.0)
    with pytest.raises(ValueError, match="two waypoints"):
        SteeringConfig(waypoints=((0, 0),))


@pytest.mark.parametrize("text, message", [
    ("[path]\nwaypoints = [[0, 0], [1, 0]]\nlookahead = 0.4\naccept = 0.1\n", None),
    ("[path]\nwaypoints = [[0, 0]]\n", "path.waypoints: needs at least two waypoints"),
    ("[path]\nwaypoints = [[0, 0], [0, 0]]\n", "path.waypoints[1]: repeats"),
    ("[path]\nwaypoints = [[0, 0], [1, 'a']]\n", "path.waypoints[1]: must be a finite"),
    ("[path]\nwaypoints = [[0, 0], [1, 0, 2]]\n", "path.waypoints[1]: must be an [x, y]"),
    ("[path]\nwaypoints = [[0, 0], [1, 0]]\nlookahead = -1\n", "path.lookahead: must be > 0"),
    ("[path]\nwaypoints = [[0, 0], [1, 0]]\nspeed = 1\n", "path.speed: unknown key"),
    ("[route]\n", "route: unknown table"),
    ("[path\n", "not valid TOML"),
])
def test_path_files(tmp_path, text, message):
    f = tmp_path / "p.toml"
    f.write_text(text)
    if message is None:
        spec = load_path_toml(f)
        assert spec.waypoints == ((0.0, 0.0), (1.0, 0.0)) and spec.lookahead == 0.4
        assert spec.accept == 0.1
        return
    with pytest.raises(PathFileError) as exc:
        load_path_toml(f)
    assert message in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(PathFileError, match="no such file"):
        load_path_toml(tmp_path / "missing.toml")


def test_the_integral_takes_out_a_steady_turn_without_winding_up():
    law = HeadingHold(k_p=0.25, phi_max=math.radians(15), sign=-1.0, k_i=0.015)
    # a toy snake that turns at 1 rad/s per rad of offset plus a bias of -2 deg
    # of offset (joints whose zero is off), heading measured without delay
    def settle(law, t_end=120.0, dt=0.1):
        theta, integral = 0.0, 0.0
        for _ in range(int(t_end / dt)):
            phi = law.offset(theta, 0.0, integral)
            integral = law.integrate(theta, 0.0, integral, dt)
            theta += -(phi + math.radians(2.0)) * dt    # sign: +offset turns clockwise
        return theta
    p_only = HeadingHold(k_p=0.25, phi_max=math.radians(15), sign=-1.0)
    # proportional alone leaves bias / k_p = 8 deg; the integral removes it
    assert math.degrees(settle(p_only)) == pytest.approx(-8.0, abs=0.05)
    assert abs(math.degrees(settle(law))) < 0.05
    # saturated in the error's direction, or far from the target: it does not grow
    sat = HeadingHold(k_p=0.25, phi_max=math.radians(1), sign=-1.0, k_i=0.015)
    assert sat.integrate(-math.radians(8), 0.0, 1.0, 0.1) == 1.0
    assert law.integrate(-math.radians(30), 0.0, 1.0, 0.1) == 1.0
    assert law.integrate(-math.radians(8), 0.0, 1.0, 0.1) == pytest.approx(
        1.0 + math.radians(8) * 0.1)
    # and it is bounded so its part alone stays within phi_max
    i = 0.0
    for _ in range(10000):
        i = HeadingHold(k_p=1e-6, phi_max=0.1, k_i=1.0).integrate(-0.05, 0.0, i, 0.1)
        assert i <= 0.1 + 1e-12
    assert i == pytest.approx(0.1)
    assert HeadingHold(k_i=0.0).integrate(0.5, 0.0, 3.0, 0.1) == 0.0
