"""Whole trials on the simulated rig in virtual time: the trial's code paths
(codec, CAN over a loop bus, bring-up, ramp, supervisor, streamer, motion
capture decoded from Tracker datagrams, fan-out, trial log, the parallel
model, the comparison) with the simulated Aiko and the model on the trial's
loop. Deterministic: two runs give the same records; an injected fault is
detected at the same trial time, exactly when the supervisor's rule says."""

import asyncio
import gc
import json
from dataclasses import replace

import numpy as np
import pytest

from aiko.control.gait import PRESETS
from aiko.control.supervisor import FaultPolicy
from aiko.drivers.virtual_time import run_virtual
from aiko.experiments.files.triallog import read_trial
from aiko.experiments.rig import virtual_rig
from aiko.experiments.testing import run_virtual_session
from aiko.experiments.trial.session import SessionError, SessionReport, run_session
from aiko.experiments.trial.settings import SettingsError, build_settings
from aiko.experiments.trial.wiring import session_config
from aiko.firmware_interface.protocol import HEARTBEAT_PERIOD

WALL_FIELDS = {("/events", "trial_start"): ("wall_start",)}
"""Values of records that are wall-clock time by definition (when the trial
started, for exports); everything else is on the trial clock."""


def virtual_trial(out, gait="sidewinding", **settings):
    s = build_settings({"time": "virtual", **settings})
    config = session_config(s, PRESETS[gait], out)
    report = SessionReport()
    result = run_virtual(run_session(config, PRESETS[gait], report))
    return result, report, read_trial(out)


def comparable(data):
    """Every record of every channel: (channel, t, payload), wall-clock fields out."""
    out = []
    for channel, records in sorted(data.records.items()):
        for t, rec in records:
            rec = dict(rec)
            kind = rec.get("kind")
            for name in WALL_FIELDS.get((channel, kind), ()):
                rec["data"] = {k: v for k, v in rec["data"].items() if k != name}
            out.append((channel, t, json.dumps(rec, sort_keys=True)))
    return out


@pytest.fixture(scope="module")
def twice(tmp_path_factory):
    return [virtual_trial(tmp_path_factory.mktemp(f"virtual{k}") / "run.mcap", duration=4.0)
            for k in (1, 2)]


def test_a_virtual_trial_runs_the_whole_stack_with_no_late_period(twice):
    (result, report, data), _ = twice
    assert result.reason == "completed" and result.stream.late == 0
    assert result.stream.missed == 0 and result.nodes_ok == 10
    assert result.stream.states_matched == 10 * result.stream.periods
    assert data.metadata["time"] == "virtual"
    assert report.metrics is not None and report.figure is not None
    assert report.plant["late_updates"] == 0 and report.plant["mocap_frames"] > 0
    t, p = data.mocap()
    seen = p[~np.isnan(p[:, 0])]
    assert len(t) >= 20 * 4 and np.linalg.norm(seen[-1, :2] - seen[0, :2]) > 0.05  # it moved
    assert len(data.records["/model"]) > 0


def test_two_virtual_runs_give_the_same_records(twice):
    (_, _, first), (_, _, second) = twice
    a, b = comparable(first), comparable(second)
    assert len(a) > 1000 and a == b


def test_ticks_run_ahead_compiled_are_the_ticks_served_one_by_one(twice, tmp_path, monkeypatch):
    """The simulated Aiko's ticks between the loop's events, compiled ahead of
    the clock, give the trial the ticks served one by one from the loop give,
    bit for bit: every CAN frame both ways, STATE, period and model sample, and
    every motion-capture frame. Only where a trial's 20 Hz sample and a
    100 Hz frame fall at one instant may the loop's timers take them in either
    order, so a sample may take the frame before."""
    (_, ahead, a), _ = twice
    monkeypatch.setattr(virtual_rig, "AHEAD", False)
    _, each, b = virtual_trial(tmp_path / "each.mcap", duration=4.0)
    ticks = 4.3 / 0.002                  # the trial's span, with the start before the gait
    assert ahead.plant["ticks_ahead"] > 0.95 * ticks and each.plant["ticks_ahead"] == 0
    for channel in ("/can/rx", "/can/tx", "/joint_state", "/references", "/model"):
        assert len(a.records[channel]) > 40 and a.records[channel] == b.records[channel]
    pairs = [(x, y) for (_, x), (_, y) in zip(a.records["/mocap"], b.records["/mocap"],
                                              strict=True) if x["frame"] == y["frame"]]
    assert len(pairs) >= len(a.records["/mocap"]) - 3 and all(x == y for x, y in pairs)


def test_ticks_run_ahead_send_the_modules_emcy_at_their_tick(tmp_path, monkeypatch):
    """A module's EMCY raised inside a run of compiled ticks (a current limit,
    an encoder fault) stops the run at its tick and goes out then: the same
    frames at the same times as from ticks served one by one."""
    faults = {"plant_fault": ("5:saturate=h@1.5", "2:encoder=v@2"),
              "tolerate": ("current-limit", "encoder-fault"), "no_model": True}
    _, ahead, a = virtual_trial(tmp_path / "ahead.mcap", duration=2.5, **faults)
    monkeypatch.setattr(virtual_rig, "AHEAD", False)
    _, each, b = virtual_trial(tmp_path / "each.mcap", duration=2.5, **faults)
    assert ahead.plant["ticks_ahead"] > 1000 and each.plant["ticks_ahead"] == 0
    assert [d["node"] for _, d in a.records["/emcy"]] == [2, 5]
    for channel in ("/emcy", "/can/rx", "/can/tx", "/joint_state"):
        assert a.records[channel] == b.records[channel]


def test_a_fault_fires_at_its_time_and_is_detected_at_the_same_trial_time(tmp_path):
    seen = []
    for k in (1, 2):
        result, _, data = virtual_trial(tmp_path / f"f{k}.mcap", duration=5.0,
                                        plant_fault=("2:silent@2.5",), no_model=True)
        assert result.reason == "fault" and result.fault.kind == "lost_node"
        (fault,) = data.events("fault")
        seen.append(fault)
    assert seen[0] == seen[1]
    t_fault, ev = seen[0]
    assert ev["data"]["node"] == 2
    # the last heartbeat before 2.5 s, then the supervisor's timeout (checked
    # on its own cadence): detected within one heartbeat period of the rule
    timeout = FaultPolicy().heartbeat_timeout
    assert 2.5 + timeout - HEARTBEAT_PERIOD <= t_fault <= 2.5 + timeout + 0.1


def test_virtual_time_is_refused_where_it_cannot_be():
    for flags, needle in [({"rig": "robot"}, "the robot keeps real time"),
                          ({"live": 0}, "--live"), ({"foxglove": 0}, "--foxglove"),
                          ({"mqtt": "mqtt://127.0.0.1"}, "--mqtt")]:
        with pytest.raises(SettingsError, match=needle):
            build_settings({"time": "virtual", **flags})


def test_a_virtual_session_needs_the_virtual_loop(tmp_path):
    s = build_settings({"time": "virtual", "duration": 1.0})
    config = session_config(s, PRESETS["sidewinding"], tmp_path / "x.mcap")
    with pytest.raises(SessionError, match="VirtualTimeLoop"):
        asyncio.run(run_session(config, PRESETS["sidewinding"], SessionReport()))
    assert replace(config, time="real").time == "real"


def test_a_module_silent_from_the_start_is_the_one_line_error_of_real_time(tmp_path):
    from tests.conftest import aiko

    r = aiko("run", "sidewinding", "--time", "virtual", "--plant-fault", "2:silent@0",
             "--duration", "2", "--out", str(tmp_path / "t.mcap"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "aiko run: no heartbeat from joint node 2 within 2 s"], r.stderr


def test_a_virtual_trial_leaves_the_processs_frozen_heap_as_it_was(tmp_path):
    """A trial freezes the heap at its bring-up and unfreezes it at its end
    only where its process had frozen nothing before (``gc.unfreeze`` would
    thaw that too): what a test worker or a program froze at its start-up
    stays frozen."""
    marker = {"frozen": [True]}       # a container the collector tracks
    gc.collect()
    gc.freeze()
    assert not any(o is marker for o in gc.get_objects())   # frozen: in no generation
    try:
        result, _, _ = virtual_trial(tmp_path / "t.mcap", gait="still", duration=0.3,
                                     plant="ideal", no_model=True)
        assert result.reason == "completed"
        assert not any(o is marker for o in gc.get_objects())
    finally:
        gc.unfreeze()


class _FreezeWatch:
    """A listener noting, for each record, whether the heap was frozen."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def on_record(self, record) -> None:
        self.seen.append((type(record).__name__, gc.get_freeze_count()))

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def test_a_virtual_trial_in_a_process_with_nothing_frozen_runs_on_a_frozen_heap(tmp_path):
    """Frozen from the bring-up (every period sent on a frozen heap, so the
    collector's full passes scan only what the trial makes), thawed after."""
    watch = _FreezeWatch()
    gc.unfreeze()        # the suite's teardown froze this worker's heap
    try:
        assert gc.get_freeze_count() == 0
        result, _ = run_virtual_session("still", tmp_path / "t.mcap", listeners=[watch],
                                        duration=0.3, plant="ideal", no_model=True)
        assert gc.get_freeze_count() == 0
    finally:
        gc.freeze()
    assert result.reason == "completed"
    periods = [count for kind, count in watch.seen if kind == "PeriodSent"]
    assert len(periods) >= 3 and min(periods) > 0
    ends = [(kind, count) for kind, count in watch.seen if kind in ("TrialStarted", "TrialEnded")]
    assert ends == [("TrialStarted", 0), ("TrialEnded", 0)]
