"""A steered trial in-process on the virtual bus: the streamer adds the
loop's offset to every horizontal reference each period, the log records
why, and stale motion capture is held, then dropped to open loop."""

import math

import numpy as np
import pytest

from aiko.control import PRESETS, references
from aiko.control.steering import SteeringConfig
from aiko.drivers.virtual_time import run_virtual
from tests.conftest import trial_with_emulator


def test_a_steered_trial_sends_the_offset_and_logs_why(tmp_path):
    # link 6 travels along +y at 1 m/s (heading +90 deg) and the target is 0
    # deg: the snake must turn clockwise, a positive offset (HeadingHold.sign);
    # the sender stops after 2.5 s of frames: hold 1 s, then open loop
    # (in virtual time exactly: the last frame is received at 2.50 s, the first
    # period that finds it older than stale_after is 0.31 s after it, the hold
    # lasts 1 s from there: 11 periods held, ages 0.31 to 1.31 s)
    cfg = SteeringConfig(heading=0.0, window=1.0, hold=1.0, stale_after=0.25)
    result, data, _, _ = run_virtual(trial_with_emulator(
        tmp_path / "t.mcap", 5.0, nodes=3, mocap=True, steering=cfg, mocap_stop_after=250,
        virtual=True))
    assert result.reason == "completed", result.fault
    rec = [d for _, d in data.records["/steering"]]
    refs = [d for _, d in data.records["/references"] if d["phase"] == "gait"]
    assert len(rec) == len(refs) == 51                      # one per gait period
    modes = [d["mode"] for d in rec]
    # wait until half a window of motion, then closed; the 0.1 s occlusion
    # (frames 40-49) is shorter than stale_after and never breaks the loop
    first_closed = modes.index("closed")
    assert set(modes[:first_closed]) == {"wait"} and first_closed <= 8
    hold = [i for i, m in enumerate(modes) if m == "hold"]
    opened = [i for i, m in enumerate(modes) if m == "open"]
    assert set(modes[first_closed:hold[0]]) == {"closed"}
    assert len(hold) == 11 and opened[0] == hold[-1] + 1 and opened[-1] == len(rec) - 1
    for d in rec[first_closed:hold[0]]:
        assert d["heading"] == pytest.approx(math.pi / 2, abs=0.02) and d["target"] == 0.0
        assert d["tracked"] == "link6" and d["age"] < 0.25
    offs = np.array([d["offset"] for d in rec])
    # k_p 0.25 * 90 deg > 15 deg of room (sidewinding's A_h is 30 deg): saturated,
    # reached at 20 deg/s; held while stale; back to 0 at 20 deg/s in open loop
    t_sent = np.array([d["t"] for d in rec])
    assert np.all(np.abs(np.diff(offs)) <= math.radians(20.0) * np.diff(t_sent) + 1e-12)
    assert offs[hold[0] - 1] == pytest.approx(math.radians(15.0), abs=1e-3)
    assert np.all(offs[hold] == offs[hold[0] - 1])
    assert offs[-1] == 0.0 and np.all(offs >= 0)
    # the references sent are the gait's plus the offset on the horizontal joints
    gait = PRESETS["sidewinding"]
    for d, r in zip(rec, refs, strict=True):
        assert r["offset"] == d["offset"]
        want = references(gait, r["t_gait"], 3)
        np.testing.assert_allclose(r["alpha_h"], np.clip(want[:, 0] + d["offset"], -0.7854,
                                                         0.7854), atol=1e-12)
        np.testing.assert_allclose(r["alpha_v"], want[:, 1], atol=1e-12)
    # mode changes are events, with what the mode was before
    ev = [(e["data"]["was"], e["data"]["mode"]) for _, e in data.events("steering")]
    assert ev == [(None, "wait"), ("wait", "closed"), ("closed", "hold"), ("hold", "open")]
