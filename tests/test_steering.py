"""The steering laws (control/steering.py): heading estimates, heading hold,
LOS guidance; and the sign of the offset, measured on the model."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiko.control.gait import PRESETS
from aiko.control.steering import (HeadingHold, LosGuidance, LosState, cross_track,
                                   heading_from_links, heading_from_track, wrap_angle)


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

    from aiko.experiments.simulate import simulate_gait
    from aiko.model import ConvergenceWarning, SnakeModel, SnakeParams

    g0 = PRESETS["lateral-undulation-orthotropic"]
    g = g0.with_(offset=math.radians(offset_deg))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a few capped steps, as always
        res = simulate_gait(SnakeModel(SnakeParams(mu_x=g0.mu_x, mu_y=g0.mu_y)), g, 6.0)
    h = heading_from_track(res.t, res.com(), window=4.5)
    turn = math.degrees(float(wrap_angle(h - 0.0)))
    assert -math.copysign(1.0, offset_deg) * turn > 15.0, turn
