"""Whole trials against the emulated joint modules: in this process on the
loop bus in virtual time (python-can's virtual bus on the wall clock: the
telemetry tests), and across processes through `aiko emulate` and slcan over
TCP; faults, SIGTERM, a heavy heap (a killed run: test_simulated_rig)."""

import asyncio
import signal
import subprocess
import time

import numpy as np
import pytest
from mcap.reader import make_reader

from aiko.control import PRESETS, references
from aiko.control.supervisor import FaultPolicy, NodesMissingError
from aiko.drivers.virtual_time import run_virtual
from aiko.experiments.files.triallog import read_trial
from aiko.experiments.trial.runner import jitter_summary
from aiko.firmware_interface.codec import decode
from aiko.firmware_interface.emulator import FaultConfig
from aiko.firmware_interface.protocol import HEARTBEAT_PERIOD, NmtCommand, NodeState
from tests.conftest import (
    AIKO_COMMAND,
    spawn,
    start_emulator,
    stop,
    trial_with_emulator,
    wait_for_records,
)


def periods_in_tx(data):
    """The /can/tx frames grouped by SYNC: lists of decoded frames."""
    frames = [decode(r["id"], bytes.fromhex(r["data"])) for _, r in data.records["/can/tx"]]
    groups, cur = [], []
    for f in frames:
        cur.append(f)
        if type(f).__name__ == "Sync":
            groups.append(cur)
            cur = []
    return frames, groups


def test_trial_in_process_on_the_loop_bus_in_virtual_time(tmp_path):
    result, data, modules, source = run_virtual(trial_with_emulator(
        tmp_path / "t.mcap", 2.0, nodes=3, mocap=True, malformed_every=25, virtual=True))
    assert result.reason == "completed" and result.fault is None, (
        result.fault, [(round(t, 3), e["kind"], e["data"]) for t, e in data.events()],
        [(round(t, 3), r["id"]) for t, r in data.records["/can/rx"] if r["id"] >= 0x700][-12:])
    st = result.stream
    # one SYNC to read the angles, then the gait: no ramp (joint 3 V starts at
    # -1.7 deg, within the soft start's 3 deg; the rest straight)
    ramp = [d for _, d in data.records["/references"] if d["phase"] == "ramp"]
    assert len(ramp) == 0 and st.periods == 1 + 21 and st.missed == 0
    assert st.states_matched == st.periods * 3 and st.states_unmatched == 0
    assert st.round_trips.count == st.states_matched and st.jitter.count == st.periods
    # in virtual time every period starts on its tick and the modules answer a
    # SYNC at the instant it arrives: no jitter, no round trip, exactly
    assert jitter_summary(st) == {f"{k}_{p}_ms": 0.0 for k in ("jitter", "rtt")
                                  for p in ("p50", "p99", "max")}
    frames, groups = periods_in_tx(data)
    assert type(frames[0]).__name__ == "Nmt" and frames[0].command == NmtCommand.START
    assert len(groups) == st.periods and [type(f).__name__ for f in groups[0]] == ["Nmt", "Sync"]
    groups = groups[-21:]
    for g in groups:
        refs = [f for f in g if type(f).__name__ == "Ref"]
        assert [f.node for f in refs] == [1, 2, 3] and g[-1] == g[-1]
        assert type(g[-1]).__name__ == "Sync"
    # the safe stop came last, and the modules obeyed it
    assert frames[-1].command == NmtCommand.ENTER_PRE_OPERATIONAL
    assert all(m.state == NodeState.PRE_OPERATIONAL for m in modules)
    # mocap at 20 Hz: frame numbers recorded, occluded frames marked, malformed counted
    mocap = data.records["/mocap"]
    t_mocap = data.times("/mocap")  # 20 Hz from the streaming's start to the trial's end
    assert abs(len(mocap) - (20 * (t_mocap[-1] - t_mocap[0]) + 1)) <= 2
    t_refs = data.times("/references")
    assert t_mocap[0] <= t_refs[0] + 0.06 and t_mocap[-1] >= t_refs[-1]
    assert result.mocap["malformed"] > 0 and source.malformed == result.mocap["malformed"]
    assert any(d["occluded"] for _, d in mocap)
    seen = [d for _, d in mocap if not d["occluded"] and d["frame"] is not None]
    assert all(abs(d["y"] - 0.01 * d["frame"]) < 1e-9 for d in seen)
    assert data.complete and data.metadata["gait_name"] == "sidewinding"
    assert "aiko_joint.dbc" in data.attachments
    # every timestamp is on the trial clock, integer ns, non-decreasing per channel
    t = data.times("/references")
    assert t[0] >= 0 and (t[1:] >= t[:-1]).all()
    # the reader's arrays
    t_sent, refs = data.references()
    assert refs.shape == (21, 3, 4) and np.allclose(t_sent, t[-21:])
    assert data.references(None)[1].shape == (21, 3, 4)
    np.testing.assert_allclose(refs[5, :, :2], references(PRESETS["sidewinding"], 0.5, 3)[:, :2])
    tm, pos = data.mocap()
    assert pos.shape == (len(mocap), 3) and np.isnan(pos).any() and np.isfinite(pos).any()


def test_silent_node_mid_trial_stops_safely_within_half_a_second(tmp_path):
    """In virtual time: the supervisor's rule, exactly (the last heartbeat,
    then the timeout, seen at the supervisor's next check)."""
    silent_at = 1.0
    result, data, modules, _ = run_virtual(trial_with_emulator(
        tmp_path / "t.mcap", 5.0, nodes=3, faults={2: FaultConfig(silent_from=silent_at)},
        virtual=True))
    assert result.reason == "fault" and result.fault.kind == "lost_node"
    assert result.fault.node == 2
    (t_stop, ev), = data.events("safe_stop")
    last_hb = max(t for t, r in data.records["/can/rx"] if r["id"] == 0x702)
    assert silent_at - HEARTBEAT_PERIOD - 1e-9 < last_hb <= silent_at   # the last before
    timeout = FaultPolicy().heartbeat_timeout
    assert last_hb + timeout < t_stop <= last_hb + timeout + 0.1
    assert all(m.state == NodeState.PRE_OPERATIONAL for m in modules)
    (_, safe), = data.events("safe_state")  # the silent node cannot confirm
    assert safe["data"]["confirmed"] == [1, 3] and safe["data"]["missing"] == [2]


def test_missing_node_at_start_is_a_clear_error(tmp_path):
    with pytest.raises(NodesMissingError, match="node 4 within 0.5 s") as err:
        run_virtual(trial_with_emulator(tmp_path / "t.mcap", 1.0, nodes=4, emulated=3,
                                        startup_timeout=0.5, virtual=True))
    assert err.value.missing == [4]


def test_dropped_frames_are_counted_and_do_not_stop_the_trial(tmp_path):
    """In virtual time, twice: the same seed loses the same frames."""
    lost = []
    for k in (1, 2):
        result, data, _, _ = run_virtual(trial_with_emulator(
            tmp_path / f"t{k}.mcap", 3.0, nodes=3, virtual=True,
            faults={2: FaultConfig(drop_fraction=0.1, seed=7)}))
        assert result.reason == "completed"
        st = result.stream
        assert len(data.references()[0]) == 31
        lost.append(st.periods * 3 - st.states_matched)
    assert 1 <= lost[0] <= 30 and lost[0] == lost[1]  # node 2's; counted, not fatal


def test_aiko_run_against_aiko_emulate_over_slcan(tmp_path):
    emu, channel = start_emulator()
    out_file = tmp_path / "trial.mcap"
    try:
        run = subprocess.run([*AIKO_COMMAND, "run", "sidewinding",
                              "--rig", "robot", "--can-interface", "slcan", "--can-channel",
                              channel, "--bitrate", "1000000", "--nodes", "3", "--duration", "3",
                              "--out", str(out_file)], capture_output=True, text=True, timeout=120)
    finally:
        code, emu_out, emu_err = stop(emu)
    assert run.returncode == 0, run.stderr
    assert "trial completed" in run.stdout and str(out_file) in run.stdout
    # the official reader reads it
    with open(out_file, "rb") as f:
        reader = make_reader(f)
        topics = {ch.topic for _, ch, _ in reader.iter_messages()}
        assert {"/references", "/can/tx", "/can/rx", "/joint_state", "/events"} <= topics
        summary = reader.get_summary()
        assert summary is not None and summary.statistics.message_count > 100
    data = read_trial(out_file)
    frames, groups = periods_in_tx(data)
    assert len(data.references()[0]) == 31  # the gait's periods, after the ramp's
    assert len(groups) == 1 + len(data.references(None)[0])  # and one SYNC to read the angles
    assert all([f.node for f in g if type(f).__name__ == "Ref"] == [1, 2, 3] for g in groups[1:])
    counters = [g[-1].counter for g in groups]
    states = [r for _, r in data.records["/joint_state"]]
    for c in counters:  # every SYNC answered by every node, matched by the echo
        assert sorted(s["node"] for s in states if s["sync_echo"] == c) == [1, 2, 3]
    assert code == 0 and "node 1: pre_operational, NMT obeyed: 0x01, 0x80" in emu_out


def test_sigterm_stops_safely_and_closes_the_log(tmp_path):
    """SIGTERM while streaming (Ctrl-C, SIGINT: test_startup's during the ramp)."""
    emu, channel = start_emulator()
    out_file = tmp_path / "trial.mcap"
    try:
        run = spawn("run", "still", "--rig", "robot", "--can-interface", "slcan",
                    "--can-channel", channel, "--nodes", "3", "--out", str(out_file))
        wait_for_records(out_file, "/references", 10, proc=run)   # a second of streaming
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=30)
    finally:
        code, emu_out, _ = stop(emu)
    assert run.returncode == 130 and "interrupted" in out and "Traceback" not in err
    data = read_trial(out_file)
    assert data.complete  # closed properly
    last_tx = decode(*[(r["id"], bytes.fromhex(r["data"])) for _, r in
                       data.records["/can/tx"]][-1])
    assert last_tx.command == NmtCommand.ENTER_PRE_OPERATIONAL  # sent, and logged as sent
    (_, end), = data.events("trial_end")
    assert end["data"]["reason"] == "interrupted"
    (_, safe), = data.events("safe_state")  # the nodes' heartbeats confirmed it
    assert safe["data"]["confirmed"] == [1, 2, 3] and safe["data"]["missing"] == []
    for node in (1, 2, 3):
        assert f"node {node}: pre_operational, NMT obeyed: 0x01, 0x80" in emu_out, (
            out, err, emu_out, data.records["/can/tx"][-3:])


def test_a_heavy_heap_does_not_make_the_nodes_look_lost(tmp_path):
    """A process that has compiled the model or run matplotlib and dask holds
    enough objects that a full garbage collection takes several 100 ms; the
    trial collects and freezes them before NMT start, never between the
    heartbeats it watches."""
    import gc

    heap = [[i] for i in range(2_000_000)]   # a full collection: about 0.2 s here
    t0 = time.perf_counter()
    gc.collect()
    assert time.perf_counter() - t0 > 0.1   # the stall this is about
    try:
        result, data, _, _ = asyncio.run(trial_with_emulator(tmp_path / "t.mcap", 1.0))
    finally:
        del heap
    assert result.reason == "completed", result.fault
