"""The emulator's ``babble`` fault: a module that also sends random frames
(any identifier, 0-8 random bytes) at a given rate, seeded."""

import pytest

from aiko.firmware_interface.codec import RawFrame, encode
from aiko.firmware_interface.emulator import FaultConfig
from aiko.firmware_interface.faults import FaultSpecError, faults_by_node, parse_fault
from aiko.firmware_interface.virtual import BusJointRig, VirtualJointRig


def _babble(rig) -> list:
    return [(t, f) for t, f in rig.log if isinstance(f, RawFrame)]


def test_a_babbling_module_sends_random_frames_at_its_rate_from_its_time():
    faults = {2: FaultConfig(babble_from=1.0, babble_rate=500.0, seed=4)}
    rig = VirtualJointRig.with_nodes(3, faults)
    rig.power_up()
    rig.advance(3.0)
    frames = _babble(rig)
    assert len(frames) == 1001   # t = 1.0, 1.002, ..., 3.0
    assert frames[0][0] == pytest.approx(1.0) and frames[-1][0] == pytest.approx(3.0)
    ids = {f.arbitration_id for _, f in frames}
    lengths = {len(f.data) for _, f in frames}
    assert len(ids) > 600 and max(ids) <= 0x7FF and lengths == set(range(9))
    assert all(encode(f) == (f.arbitration_id, f.data) for _, f in frames)
    again = VirtualJointRig.with_nodes(3, faults)
    again.power_up()
    again.advance(3.0)
    assert _babble(again) == frames   # seeded
    # the babble crosses a python-can bus as it is; what is not the protocol stays raw
    bus = BusJointRig.with_nodes(3, {2: FaultConfig(babble_from=0.0, babble_rate=200.0)})
    try:
        bus.power_up()
        bus.advance(1.0)
        assert len(_babble(bus)) > 100
    finally:
        bus.close()


def test_babble_specs():
    assert parse_fault("3:babble=400@0.5") == (3, {"babble_from": 0.5, "babble_rate": 400.0})
    assert faults_by_node(["3:babble=10"])[3].babble_rate == 10.0
    for bad in ("3:babble", "3:babble=0", "3:babble=1e9", "3:babble=nan", "3:babble=5@-1",
                "3:delay=nan"):
        with pytest.raises(FaultSpecError):
            parse_fault(bad)
    with pytest.raises(ValueError):
        RawFrame(0x800, b"")
    with pytest.raises(ValueError):
        RawFrame(0x100, bytes(9))
