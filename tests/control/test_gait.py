"""Gait references (70)-(71), the soft start (VIII-E), clamping, presets and the
gait TOML contract."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiko.control import JOINT_LIMIT, PRESETS, Gait, GaitError, references
from aiko.control.gait import SOFT_START_THRESHOLD, soft_start_times
from aiko.experiments.files.gait_file import get_gait, load_gait_toml

GOOD = """
[gait]
A_h = 30.0
omega_h = 80.0
delta_h = -50.0
psi_h = 0.0
A_v = 10.0
omega_v = 80.0
delta_v = -50.0
delta_0 = 90.0
psi_v = 0.0
soft_start = true
start = "straight"
[friction]
mu_x = 0.2
mu_y = 0.3
"""


def test_presets_have_the_papers_parameters():
    lu = PRESETS["lateral-undulation"]
    assert math.degrees(lu.A_h) == pytest.approx(40)
    assert math.degrees(lu.omega_h) == pytest.approx(80)
    assert math.degrees(lu.delta_h) == pytest.approx(-50)
    assert (lu.A_v, lu.start, lu.mu_x, lu.mu_y) == (0.0, "curved", 0.2, 0.2)
    lo = PRESETS["lateral-undulation-orthotropic"]
    assert math.degrees(lo.A_h) == pytest.approx(30)
    assert (lo.mu_x, lo.mu_y, lo.start) == (0.1, 0.5, "curved")
    sw = PRESETS["sidewinding"]
    assert [round(math.degrees(v), 9) for v in (sw.A_h, sw.A_v, sw.delta_0)] == [30, 10, 90]
    assert sw.omega_v == sw.omega_h and sw.delta_v == sw.delta_h
    assert sw.soft_start and sw.start == "straight"
    still = PRESETS["still"]
    assert np.all(references(still, np.linspace(0, 10, 7), 10) == 0)


def test_references_follow_70_71_and_rates_are_their_derivatives():
    g = PRESETS["sidewinding"].with_(soft_start=False)
    t = np.array([0.3, 1.7, 4.2])
    r = references(g, t, 10)
    i = 4
    expected_h = g.A_h * np.sin(g.omega_h * t + i * g.delta_h) + g.psi_h
    expected_v = g.A_v * np.sin(g.omega_v * t + i * g.delta_v + g.delta_0) + g.psi_v
    np.testing.assert_allclose(r[:, i, 0], expected_h, atol=1e-15)
    np.testing.assert_allclose(r[:, i, 1], expected_v, atol=1e-15)
    h = 1e-6
    d = (references(g, t + h, 10) - references(g, t - h, 10)) / (2 * h)
    np.testing.assert_allclose(r[..., 2:], d[..., :2], atol=1e-7)


def test_soft_start_holds_each_joint_until_its_wave_comes_within_3_deg():
    g = PRESETS["sidewinding"]
    ts = soft_start_times(g, 10)
    raw = references(g.with_(soft_start=False), ts[:, 0], 10)
    for i in range(10):
        # at its start time the raw wave is within 3 degrees
        assert abs(raw[i, i, 0]) <= SOFT_START_THRESHOLD + 1e-12
        before = references(g, max(ts[i, 0] - 1e-3, 0.0), 10)
        if ts[i, 0] > 0:
            assert before[i, 0] == 0.0 and before[i, 2] == 0.0
        # no jump bigger than the threshold when the joint joins
        after = references(g, ts[i, 0] + 1e-9, 10)
        assert abs(after[i, 0]) <= SOFT_START_THRESHOLD + 1e-6
    # the vertical wave with delta_0 = 90 deg starts later than the horizontal one
    assert ts[0, 1] > ts[0, 0]
    assert np.all(np.isfinite(ts))


def test_soft_start_that_never_comes_within_threshold_holds_zero():
    g = Gait(A_h=0.1, omega_h=1.0, psi_h=0.5, soft_start=True)
    assert soft_start_times(g, 3)[0, 0] == math.inf
    assert np.all(references(g, np.linspace(0, 20, 50), 3)[..., 0] == 0)


@given(st.floats(0, 100), st.floats(0.5, 1.5))
def test_references_are_clamped_to_the_joint_limit(t, amp):
    g = Gait(A_h=amp, omega_h=1.3, delta_h=0.4, A_v=amp, omega_v=0.7, delta_v=0.1)
    r = references(g, t, 10)
    assert np.all(np.abs(r[..., :2]) <= JOINT_LIMIT)
    clamped = np.abs(references(g, t, 10, limit=10.0)[..., :2]) > JOINT_LIMIT
    assert np.all(r[..., 2:][clamped] == 0.0)


def test_the_steering_offset_shifts_every_horizontal_joint_and_round_trips(tmp_path):
    g = PRESETS["lateral-undulation"]
    steered = g.with_(offset=math.radians(5.0))
    t = np.linspace(0.0, 3.0, 31)
    a, b = references(g, t, 10), references(steered, t, 10)
    np.testing.assert_allclose(b[..., 0], np.clip(a[..., 0] + math.radians(5.0),
                                                  -JOINT_LIMIT, JOINT_LIMIT), atol=1e-12)
    np.testing.assert_array_equal(b[..., 1], a[..., 1])        # vertical joints untouched
    assert "offset" not in g.to_toml_dict()["gait"]             # old files stay as they were
    import tomli_w
    f = tmp_path / "steered.toml"
    f.write_text(tomli_w.dumps(steered.to_toml_dict()))
    back = load_gait_toml(f)
    assert back.offset == pytest.approx(math.radians(5.0))
    np.testing.assert_allclose(references(back, t, 10), b, atol=1e-12)


def test_gait_toml_roundtrip(tmp_path):
    p = tmp_path / "wave.toml"
    p.write_text(GOOD)
    g = load_gait_toml(p)
    assert math.degrees(g.A_h) == pytest.approx(30) and math.degrees(g.delta_0) == pytest.approx(90)
    assert g.soft_start and g.start == "straight" and (g.mu_x, g.mu_y) == (0.2, 0.3)
    assert g.name == "wave"
    assert get_gait(str(p)) == g
    d = g.to_toml_dict()
    assert d["gait"]["A_v"] == pytest.approx(10.0) and d["friction"] == {"mu_x": 0.2, "mu_y": 0.3}


@pytest.mark.parametrize("edit,key", [
    (lambda s: s.replace("A_h = 30.0\n", ""), "gait.A_h"),
    (lambda s: s.replace("psi_v = 0.0", "psi_v = 0.0\nspeed = 3"), "gait.speed"),
    (lambda s: s.replace("mu_y = 0.3", "mu_z = 0.3"), "friction.mu_z"),
    (lambda s: s.replace('start = "straight"', 'start = "coiled"'), "gait.start"),
    (lambda s: s.replace("omega_h = 80.0", 'omega_h = "fast"'), "gait.omega_h"),
    (lambda s: s.replace("soft_start = true", "soft_start = 1"), "gait.soft_start"),
    (lambda s: s.replace("mu_x = 0.2", "mu_x = -0.2"), "friction.mu_x"),
    (lambda s: s + "\n[extra]\na = 1\n", "extra"),
    (lambda s: s.replace("[gait]", "[gate]"), "gate"),
    (lambda s: s.replace("psi_v = 0.0", 'psi_v = 0.0\noffset = "left"'), "gait.offset"),
])
def test_gait_toml_errors_name_the_key(tmp_path, edit, key):
    p = tmp_path / "bad.toml"
    p.write_text(edit(GOOD))
    with pytest.raises(GaitError) as err:
        load_gait_toml(p)
    assert key in str(err.value)
    assert "\n" not in str(err.value)


def test_malformed_or_missing_files_and_unknown_names(tmp_path):
    p = tmp_path / "broken.toml"
    p.write_text("[gait\nA_h = ")
    with pytest.raises(GaitError, match="not valid TOML"):
        load_gait_toml(p)
    with pytest.raises(GaitError, match="no such file"):
        get_gait(str(tmp_path / "nope.toml"))
    with pytest.raises(GaitError, match="unknown gait"):
        get_gait("slithering")
