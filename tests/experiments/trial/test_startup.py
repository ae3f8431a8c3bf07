"""Start-up and wind-down of `aiko run`: the phases, the ramp to a curved
start and the wind-down to straight (on the simulated rig in virtual time);
Ctrl-C in the ramp, the preflight and --force against `aiko emulate` over
slcan; set-up errors that leave nothing behind."""

import os
import signal
import socket
import time

import numpy as np
import pytest

from aiko.control import PRESETS, references
from aiko.control.ramp import RAMP_TOLERANCE
from aiko.experiments.files.triallog import read_trial
from aiko.experiments.trial.settings import build_settings
from aiko.firmware_interface.codec import decode
from aiko.firmware_interface.protocol import EmcyCode, NmtCommand, NodeState, Status
from tests.conftest import aiko, aiko_process, robot_args, spawn, start_emulator, stop

SATURATED = int(Status.H_SATURATED | Status.V_SATURATED)

WIDE_GAIT = """\
[gait]
A_h = 60.0
omega_h = 80.0
delta_h = -50.0
psi_h = 0.0
A_v = 0.0
omega_v = 0.0
delta_v = 0.0
delta_0 = 0.0
psi_v = 0.0
start = "curved"
"""


def phases(data):
    return [d["data"]["phase"] for _, d in data.events("phase")]


def states_by_phase(data):
    """/joint_state records grouped by the phase of the SYNC they answer."""
    phase_of = {r["counter"]: r["phase"] for _, r in data.records["/references"]}
    out = {}
    for t, s in data.records["/joint_state"]:
        out.setdefault(phase_of.get(s["sync_echo"], "read"), []).append((t, s))
    return out


def last_heartbeats(data):
    """{node: the NMT state of its last heartbeat in the log}."""
    return {r["id"] - 0x700: int(r["data"][:2], 16) for _, r in data.records["/can/rx"]
            if 0x701 <= r["id"] <= 0x77F}


def test_lateral_undulation_ramps_to_its_curved_start_and_runs_to_the_end(undulation):
    run, data = undulation
    assert run.returncode == 0, run.stderr
    assert "trial completed" in run.stdout and "ramp to the start posture: 1.8 s" in run.stdout
    assert phases(data) == ["bring-up", "ramp", "gait", "wind-down"]
    assert not [e for _, e in data.records.get("/emcy", [])
                if e["error_code"] == EmcyCode.CURRENT_LIMIT]
    # the ramp: flagged periods, no gait time, every motor well inside its duty
    by_phase = states_by_phase(data)
    ramp_refs = [r for _, r in data.records["/references"] if r["phase"] == "ramp"]
    assert len(ramp_refs) == 19 and all(r["t_gait"] is None for r in ramp_refs)
    ramp_states = by_phase["ramp"]
    assert len(ramp_states) >= 19 * 10
    assert all(s["status"] & SATURATED == 0 for _, s in ramp_states)
    # well inside: 19 in 20 answers under half the duty (on a loaded machine
    # single answers were seen at 86 %)
    duties = [max(abs(s["duty_h"]), abs(s["duty_v"])) for _, s in ramp_states]
    assert np.percentile(duties, 95) < 50, sorted(duties)[-10:]
    # the gait starts where the ramp ended: its first references are the gait's at t = 0
    t_sent, refs = data.references("gait")
    assert len(t_sent) == 31
    gait0 = references(PRESETS["lateral-undulation"], 0.0, 10)
    np.testing.assert_allclose(refs[0, :, :2], gait0[:, :2], atol=0.6e-4)
    np.testing.assert_allclose(refs[0, :, 2:], gait0[:, 2:], atol=0.6e-3)
    first = [r for _, r in data.records["/references"] if r["phase"] == "gait"][0]
    reached = {s["node"]: (s["alpha_h"], s["alpha_v"]) for _, s in by_phase["gait"]
               if s["sync_echo"] == first["counter"]}
    assert sorted(reached) == list(range(1, 11))
    err = np.abs(np.array([reached[n] for n in range(1, 11)]) - gait0[:, :2])
    assert err.max() <= RAMP_TOLERANCE
    (_, ramp_done), _ = data.events("ramp_done")
    assert ramp_done["data"]["max_error_deg"] <= 1.0


def test_wind_down_straight_brings_every_joint_to_zero_before_the_safe_state(undulation):
    run, data = undulation
    assert "ramp back to straight" in run.stdout
    (t_stop, _), = data.events("safe_stop")
    (t_wind, _), = [(t, e) for t, e in data.events("phase") if e["data"]["phase"] == "wind-down"]
    wind = [r for _, r in data.records["/references"] if r["phase"] == "wind-down"]
    assert wind and np.allclose(wind[-1]["alpha_h"], 0) and np.allclose(wind[-1]["alpha_v"], 0)
    last = {}
    for t, s in data.records["/joint_state"]:
        if t_wind <= t < t_stop:
            last[s["node"]] = (s["alpha_h"], s["alpha_v"])
    assert sorted(last) == list(range(1, 11))
    assert np.abs(np.array(list(last.values()))).max() <= RAMP_TOLERANCE
    assert all(s["status"] & SATURATED == 0 for _, s in states_by_phase(data)["wind-down"])
    # the safe state: every module confirmed back in pre-operational
    (_, safe), = data.events("safe_state")
    assert safe["data"]["confirmed"] == list(range(1, 11))
    assert last_heartbeats(data) == {n: int(NodeState.PRE_OPERATIONAL) for n in range(1, 11)}


def wait_for_phase(path, phase, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists():
            try:
                if phase in phases(read_trial(path)):
                    return
            except Exception:  # noqa: BLE001 - a file still being written
                pass
        time.sleep(0.1)
    raise AssertionError(f"no {phase} phase in {path}")


def test_ctrl_c_during_the_ramp_gives_the_safe_state_and_exit_130(tmp_path):
    emu, channel = start_emulator()
    out = tmp_path / "trial.mcap"
    try:
        run = spawn("run", "lateral-undulation", *robot_args(channel, 3), "--ramp-time", "8",
                    "--out", str(out))
        wait_for_phase(out, "ramp")
        time.sleep(1.0)
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=30)
    finally:
        code, emu_out, _ = stop(emu)
    assert run.returncode == 130 and "Traceback" not in stderr, stderr
    assert "interrupted" in stdout
    data = read_trial(out)
    assert data.complete and phases(data)[:2] == ["bring-up", "ramp"]
    last_tx = data.records["/can/tx"][-1][1]          # the safe stop, logged as sent
    assert decode(last_tx["id"], bytes.fromhex(last_tx["data"])).command == (
        NmtCommand.ENTER_PRE_OPERATIONAL)
    assert "gait" not in phases(data) and not data.references("gait")[0].size
    (_, end), = data.events("trial_end")
    assert end["data"]["reason"] == "interrupted"
    (_, safe), = data.events("safe_state")
    assert safe["data"]["confirmed"] == [1, 2, 3]
    for node in (1, 2, 3):
        assert f"node {node}: pre_operational, NMT obeyed: 0x01, 0x80" in emu_out


def test_preflight_refuses_a_wide_gait_and_force_streams_it_clamped(tmp_path):
    gait = tmp_path / "wide.toml"
    gait.write_text(WIDE_GAIT)
    r = aiko("run", str(gait), "--rig", "robot", "--can-interface", "slcan", "--can-channel",
             "socket://127.0.0.1:9", "--nodes", "3", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "preflight refuses wide" in r.stderr and "joints 1 H, 2 H, 3 H" in r.stderr
    assert not list(tmp_path.glob("*.mcap"))
    out = tmp_path / "forced.mcap"   # forced, on the simulated rig in virtual time
    r = aiko("run", str(gait), "--time", "virtual", "--no-model", "--plant", "ideal",
             "--duration", "2", "--force", "--out", str(out))
    assert r.returncode == 0, r.stderr
    data = read_trial(out)
    (_, pre), = data.events("preflight")
    assert pre["data"]["forced"] is True and not pre["data"]["ok"]
    assert "joints 1 H, 2 H, 3 H" in pre["data"]["problems"][0]
    _, refs = data.references("gait")
    at_limit = np.isclose(np.abs(refs[:, :, 0]), 0.7854, atol=1e-4)
    assert np.abs(refs[:, :, 0]).max() <= 0.7854 + 1e-4 and at_limit.sum() >= 5  # clamped
    assert "streamed anyway (--force)" in r.stderr


def test_preflight_check_prints_the_table(tmp_path):
    """The table (16 lines for ten joints, 9 for three), then the rig's
    settings with their sources: a header, the rig file, one line a setting."""
    r = aiko("run", "--check", "lateral-undulation", cwd=tmp_path)
    assert r.returncode == 0 and "verdict: can be followed" in r.stdout
    assert "ramp to the start posture from straight: 1.8 s" in r.stdout
    lines = r.stdout.splitlines()
    head = lines.index("settings (value, and where it came from):")
    assert head == 16 and lines[head + 1] == "rig file: none"
    settings = lines[head + 2:]
    assert len(settings) == len(build_settings(cwd=tmp_path).sources)
    assert all(line.endswith("(default)") for line in settings)
    fast = aiko("run", "--check", "sidewinding", "--nodes", "3", cwd=tmp_path)
    lines = fast.stdout.splitlines()
    assert fast.returncode == 0 and lines.index("settings (value, and where it came from):") == 9
    assert any(line.split() == ["nodes", "3", "(flag)"] for line in lines)


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case", ["unknown-interface", "refused-adapter", "no-datastream",
                                  "no-such-folder", "existing-log"])
def test_set_up_errors_are_one_line_exit_2_and_leave_nothing(tmp_path, case):
    port = closed_port()
    can = ["--rig", "robot", "--can-interface", "slcan", "--can-channel",
           f"socket://127.0.0.1:{port}"]
    extra, needle = {
        "unknown-interface": (["--rig", "robot", "--can-interface", "nonsense",
                               "--can-channel", "x"],
                              "unknown interface; python-can's interfaces: aiko-loop, canalystii"),
        "refused-adapter": (can, f"CAN slcan socket://127.0.0.1:{port}"),
        "no-datastream": (can + ["--mocap", f"vicon-datastream:127.0.0.1:{port}"],
                          f"motion capture vicon-datastream 127.0.0.1:{port}: cannot connect"),
        "no-such-folder": (can + ["--out", "nowhere/t.mcap"], "no such folder nowhere"),
        "existing-log": (can + ["--out", "old.mcap"], "exists already"),
    }[case]
    (tmp_path / "old.mcap").write_bytes(b"a trial worth keeping")
    before = sorted(os.listdir(tmp_path))
    r = aiko("run", "still", *extra, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and needle in r.stderr
    assert sorted(os.listdir(tmp_path)) == before
    assert (tmp_path / "old.mcap").read_bytes() == b"a trial worth keeping"


def test_missing_nodes_at_bring_up_keep_a_log_that_says_why(tmp_path):
    emu, channel = start_emulator()
    out = tmp_path / "trial.mcap"
    try:
        r = aiko_process("run", "still", *robot_args(channel, 5), "--startup-timeout", "0.5",
                 "--out", str(out))
    finally:
        stop(emu)
    assert r.returncode == 2 and "no heartbeat from joint nodes 4, 5 within 0.5 s" in r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    data = read_trial(out)
    assert data.complete
    (_, missing), = data.events("nodes_missing")
    assert missing["data"]["missing"] == [4, 5]
    (_, end), = data.events("trial_end")
    assert end["data"]["reason"] == "nodes_missing"
    assert phases(data) == ["bring-up", "wind-down"]
