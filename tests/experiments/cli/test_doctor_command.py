"""`aiko doctor` as a lab runs it: against `aiko emulate --plant` over slcan on
loopback (every row ok, the modules left pre-operational), then with each part
missing or broken in turn (no emulator, a silent module, no motion capture,
the broker down, a trials folder that cannot be made): the part's row fails
and says what to check, the others stay ok, exit 1. Bad input exits 2."""

import re
import time

import can
import pytest

from aiko.firmware_interface.codec import Heartbeat, decode
from aiko.firmware_interface.protocol import NodeState
from tests.conftest import aiko, free_port, start_emulator, stop


@pytest.fixture(scope="module")
def plant_rig():
    """The simulated Aiko (3 modules), where its motion capture goes (UDP),
    and the port of its DataStream server."""
    udp = free_port()
    proc, channel = start_emulator("--plant", "--udp-target", f"127.0.0.1:{udp}",
                                   "--mocap-rate", "100", "--datastream-port", "0",
                                   "--qtm-port", "0")
    served = {}
    for _ in range(60):      # the ready lines that follow the channel's
        m = re.match(r"motion capture: .* on 127\.0\.0\.1:(\d+), the same frames \(aiko "
                     r"run --mocap ([a-z-]+):", proc.stdout.readline())
        if m:
            served[m.group(2)] = int(m.group(1))
            if len(served) == 2:
                break
    assert set(served) == {"vicon-datastream", "qualisys"}, served
    yield channel, udp, served
    stop(proc)


def _table(stdout):
    """{part: (status, rest of the line, the 'check:' line or '')} of the table."""
    rows, last = {}, None
    for line in stdout.splitlines():
        m = re.match(r"^(CAN adapter|joint \d+|motion capture|MQTT broker|disk|model kernels)"
                     r"\s+(ok|warn|fail|off|skip)\s+(.*)$", line)
        if m:
            last = m.group(1)
            rows[last] = [m.group(2), m.group(3), ""]
        elif line.strip().startswith("check:") and last is not None:
            rows[last][2] = line.strip()
    return {k: tuple(v) for k, v in rows.items()}


SLOW_ANSWER = "over 20 ms points at a loaded bus or PC"


def _healthy(row):
    """A working part's row: ok, or for a joint module the one warning that
    measures the machine rather than the module (its answers to the doctor's
    SYNCs slower than 20 ms, which a loaded shared machine can make them)."""
    status, _, check = row
    return status == "ok" or (status == "warn" and SLOW_ANSWER in check)


def _rig_file(folder, channel, udp, broker_port, trials="trials"):
    path = folder / "aiko.toml"
    path.write_text(f'[can]\ninterface = "slcan"\nchannel = "{channel}"\n'
                    f"[joints]\nnodes = 3\n"
                    f'[mocap]\nsource = "vicon-udp"\nport = {udp}\nsubject = "link2"\n'
                    f"rate = 20.0\n"
                    f'[mqtt]\nurl = "mqtt://127.0.0.1:{broker_port}/aiko"\n'
                    f'[trials]\nfolder = "{trials}"\n')
    return path


def _states(channel, seconds=0.35):
    """Every module's NMT state from its heartbeats."""
    bus = can.Bus(interface="slcan", channel=channel, ignore_config=True, sleep_after_open=0)
    states = {}
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            msg = bus.recv(0.05)
            if msg is not None:
                frame = decode(msg.arbitration_id, msg.data)
                if isinstance(frame, Heartbeat):
                    states[frame.node] = frame.state
    finally:
        bus.shutdown()
    return states


def test_every_part_ok_on_the_simulated_aiko(plant_rig, broker, tmp_path):
    channel, udp, _ = plant_rig
    _rig_file(tmp_path, channel, udp, broker)
    out = aiko("doctor", cwd=tmp_path)      # ./aiko.toml by default
    assert out.returncode == 0, out.stdout + out.stderr
    rows = _table(out.stdout)
    assert set(rows) == {"CAN adapter", "joint 1", "joint 2", "joint 3", "motion capture",
                         "MQTT broker", "disk", "model kernels"}
    assert all(_healthy(row) for row in rows.values()), out.stdout
    assert "back to pre-operational" in rows["joint 2"][1]
    assert "link2 in view in 100 %" in rows["motion capture"][1]
    assert "trials (to be made in" in rows["disk"][1]
    took = float(re.search(r"^ready \(([\d.]+) s\)$", out.stdout, re.M).group(1))
    assert took < 10.0
    assert _states(channel) == {n: NodeState.PRE_OPERATIONAL for n in (1, 2, 3)}
    assert not (tmp_path / "trials").exists()


@pytest.mark.parametrize("broken, flags, part, words, hint", [
    ("no emulator", lambda: ["--can-channel", f"socket://127.0.0.1:{free_port()}"],
     "CAN adapter", "Connection refused", "plugged in"),
    ("no motion capture", lambda: ["--mocap", f"vicon-udp:{free_port()}"],
     "motion capture", "no frame in 1 s", "is the stream on"),
    ("broker down", lambda: ["--mqtt", f"mqtt://127.0.0.1:{free_port()}"],
     "MQTT broker", "Connection refused", "is the broker running"),
    ("folder cannot be made", lambda: ["--trials-folder", "notes.txt/trials"],
     "disk", "cannot be made (notes.txt is a file)", "[trials] folder"),
])
def test_a_broken_part_fails_its_row_only(plant_rig, broker, tmp_path, broken, flags, part,
                                          words, hint):
    channel, udp, _ = plant_rig
    _rig_file(tmp_path, channel, udp, broker)
    (tmp_path / "notes.txt").write_text("not a folder")
    out = aiko("doctor", *flags(), cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    rows = _table(out.stdout)
    status, seen, check = rows[part]
    assert status == "fail" and words in seen, out.stdout
    assert check.startswith("check:") and hint in check
    others = {p: r for p, r in rows.items() if p != part}
    if broken == "no emulator":
        assert all(r[0] == "skip" for p, r in others.items() if p.startswith("joint"))
        others = {p: r for p, r in others.items() if not p.startswith("joint")}
    assert all(_healthy(r) for r in others.values()), out.stdout
    assert re.search(rf"^not ready: {part} \([\d.]+ s\)$", out.stdout, re.M)


@pytest.mark.parametrize("kind", ["vicon-datastream", "qualisys"])
@pytest.mark.parametrize("subject, served, status, words", [
    ("link2", True, "ok", "link2 in view in 100 %"),
    ("aiko", True, "fail", "'aiko' never in view (objects: link1, link2, link3, link4)"),
    ("link2", False, "fail", "cannot connect"),
])
def test_the_served_mocap_row(plant_rig, broker, tmp_path, kind, subject, served, status,
                              words):
    """The simulated Aiko's DataStream and QTM RT servers through the vendors'
    own clients: the rate, the subject in view; a subject not served names
    those that are; a server that does not answer is one line."""
    channel, udp, ports = plant_rig
    _rig_file(tmp_path, channel, udp, broker)
    port = ports[kind] if served else free_port()
    out = aiko("doctor", "--mocap", f"{kind}:127.0.0.1:{port}", "--mocap-subject",
               subject, cwd=tmp_path)
    rows = _table(out.stdout)
    seen = rows["motion capture"]
    assert seen[0] == status and words in seen[1], out.stdout + out.stderr
    assert f"{kind} 127.0.0.1:{port}" in seen[1]
    if status == "ok":
        rate = float(re.search(r": (\d+) frames/s", seen[1]).group(1))
        assert 20 <= rate <= 120, seen   # the rig's 100 Hz; a loaded client skips frames
    assert out.returncode == (0 if status == "ok" else 1)


def test_a_silent_module_fails_its_row_the_others_are_put_back(tmp_path):
    proc, channel = start_emulator("--fault", "2:silent")
    try:
        out = aiko("doctor", "--can-interface", "slcan", "--can-channel", channel,
                   "--nodes", "3", cwd=tmp_path)
        states = _states(channel)
    finally:
        stop(proc)
    assert out.returncode == 1, out.stdout + out.stderr
    rows = _table(out.stdout)
    assert rows["joint 2"][0] == "fail" and "no heartbeat in 1.5 s" in rows["joint 2"][1]
    assert "module 2's power" in rows["joint 2"][2]
    assert _healthy(rows["joint 1"]) and _healthy(rows["joint 3"]), out.stdout
    assert all("back to pre-operational" in rows[j][1] for j in ("joint 1", "joint 3"))
    assert rows["motion capture"][0] == rows["MQTT broker"][0] == "off"
    assert states == {1: NodeState.PRE_OPERATIONAL, 3: NodeState.PRE_OPERATIONAL}


def test_json_report(tmp_path):
    out = aiko("doctor", "--can-interface", "slcan", "--can-channel",
               f"socket://127.0.0.1:{free_port()}", "--nodes", "2", "--json", cwd=tmp_path)
    assert out.returncode == 1
    import json
    report = json.loads(out.stdout)
    assert report["ready"] is False
    assert [c["status"] for c in report["checks"][:3]] == ["fail", "skip", "skip"]


def test_a_password_variable_not_set_fails_the_broker_row(tmp_path, monkeypatch):
    monkeypatch.delenv("AIKO_TEST_NO_SUCH_VARIABLE", raising=False)
    (tmp_path / "aiko.toml").write_text(
        '[can]\ninterface = "slcan"\nchannel = "socket://127.0.0.1:1"\n[joints]\nnodes = 1\n'
        '[mqtt]\nurl = "mqtt://lab@127.0.0.1:1883"\npassword_env = "AIKO_TEST_NO_SUCH_VARIABLE"\n')
    out = aiko("doctor", cwd=tmp_path)
    rows = _table(out.stdout)
    assert out.returncode == 1
    assert rows["MQTT broker"][0] == "fail"
    assert "AIKO_TEST_NO_SUCH_VARIABLE is not set" in rows["MQTT broker"][1]


@pytest.mark.parametrize("args, rig_file, words", [
    (["--can-interface", "nosuchbus"], None, "unknown interface"),
    (["--mocap", "vicon-udp:port"], None, "the port must be an integer"),
    ([], "[can]\nbitrate = 'fast'\n", "can.bitrate"),
    ([], "[joints]\nnodes = 3\ncolour = 'red'\n", "joints.colour"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, rig_file, words):
    if rig_file is not None:
        (tmp_path / "aiko.toml").write_text(rig_file)
    out = aiko("doctor", *args, cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert words in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "CAN adapter" not in out.stdout     # nothing checked
