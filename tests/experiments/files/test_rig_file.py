"""The rig file: the documented example, defaults < file < flags with their
sources, one-line errors naming the file and the key, and `aiko run
--rig-file` against the emulator over slcan/TCP."""

import json
from pathlib import Path

import pytest

from aiko.experiments.files.rig_file import (
    RigFileError,
    find_rig_file,
    load_rig_file,
    mqtt_password,
    trial_stem,
)
from aiko.experiments.files.triallog import read_trial
from aiko.experiments.trial.options import MOCAP_SPELLING
from aiko.experiments.trial.settings import build_settings
from tests.conftest import aiko, aiko_process, start_emulator, stop

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "aiko.toml"


def test_the_documented_example_loads():
    rig = load_rig_file(EXAMPLE)
    s = rig.settings
    assert (s["can_interface"], s["can_channel"], s["bitrate"]) == ("socketcan", "can0", 1000000)
    assert s["nodes"] == 10 and s["limit_deg"] == 45.0 and s["max_speed_deg_s"] == 171.9
    assert (s["mocap_source"], s["mocap_port"], s["mocap_subject"]) == ("vicon-udp", 51001, "link6")
    assert s["mocap_rate"] == 20.0 and s["mqtt_password_env"] == "AIKO_MQTT_PASSWORD"
    # paths are relative to the rig file
    assert s["mqtt_ca"] == str(EXAMPLE.parent / "lab-ca.pem")
    assert s["trials_folder"] == str(EXAMPLE.parent / "trials")
    assert "password" not in json.dumps(s).replace("password_env", "")


def test_flags_override_the_file_which_overrides_the_defaults(tmp_path):
    f = tmp_path / "aiko.toml"
    f.write_text('[can]\nchannel = "can1"\n[joints]\nnodes = 4\n')
    merged = build_settings({"nodes": 3, "can_channel": None}, cwd=tmp_path).sources
    assert (merged["can_channel"].value, merged["can_channel"].source) == ("can1", "file")
    assert (merged["nodes"].value, merged["nodes"].source) == (3, "flag")
    assert (merged["bitrate"].value, merged["bitrate"].source) == (None, "default")
    assert find_rig_file(None, tmp_path) == f
    assert find_rig_file(None, tmp_path / "nowhere") is None
    assert find_rig_file("other.toml", tmp_path) == Path("other.toml")


@pytest.mark.parametrize("text, key, reason", [
    ('[cans]\nchannel = "can0"\n', "cans", "unknown table"),
    ('[can]\nchanel = "can0"\n', "can.chanel", "unknown key"),
    ("[can]\nbitrate = \"fast\"\n", "can.bitrate", "must be an integer"),
    ("[can]\nbitrate = 1e6\n", "can.bitrate", "must be an integer"),
    ("[joints]\nnodes = 11\n", "joints.nodes", "1..10"),
    ("[joints]\nlimit_deg = -5\n", "joints.limit_deg", "positive"),
    ('[mocap]\nsource = "optitrack"\n', "mocap.source", "one of vicon-udp"),
    ("[mocap]\nport = 70000\n", "mocap.port", "1..65535"),
    ('[mocap]\nsource = "vicon-datastream"\n', "mocap.host", "needs the server's host"),
    ('[mqtt]\nurl = "mqtt://b"\npassword_env = "A B"\n', "mqtt.password_env",
     "environment variable"),
    ('[mqtt]\npassword_env = "X"\n', "mqtt.password_env", "without a broker"),
    ('[trials]\nname = "{gait}-{date}"\n', "trials.name", "only {gait} and {time}"),
    ("can = 3\n", "can", "must be a table"),
])
def test_each_error_names_the_file_and_the_key(tmp_path, text, key, reason):
    f = tmp_path / "rig.toml"
    f.write_text(text)
    with pytest.raises(RigFileError) as e:
        load_rig_file(f)
    msg = str(e.value)
    assert str(f) in msg and f": {key}: " in msg and reason in msg and "\n" not in msg


def test_a_missing_or_broken_file(tmp_path):
    with pytest.raises(RigFileError, match="no such file"):
        load_rig_file(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[can\n")
    with pytest.raises(RigFileError, match="not valid TOML"):
        load_rig_file(bad)


def test_the_password_comes_from_the_environment_only(monkeypatch):
    monkeypatch.setenv("AIKO_TEST_PW", "s3cret")
    assert mqtt_password("AIKO_TEST_PW", "aiko.toml") == "s3cret"
    assert mqtt_password(None, "aiko.toml") is None
    monkeypatch.delenv("AIKO_TEST_PW")
    with pytest.raises(RigFileError, match="AIKO_TEST_PW is not set"):
        mqtt_password("AIKO_TEST_PW", "aiko.toml")


def test_trial_names_follow_the_pattern():
    from datetime import datetime
    stem = trial_stem("{gait}-{time}", "sidewinding", datetime(2026, 11, 27, 9, 5, 1))
    assert stem == "sidewinding-20261127-090501"


def test_run_check_says_where_each_value_came_from(tmp_path):
    (tmp_path / "aiko.toml").write_text('[can]\nchannel = "can7"\n[joints]\nnodes = 4\n'
                                        '[mocap]\nsource = "none"\n')
    r = aiko("run", "sidewinding", "--check", "--nodes", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()
            if line.startswith("  ") and len(line.split()) == 3}
    assert rows["can_channel"][1:] == ["can7", "(file)"]
    assert rows["nodes"][1:] == ["3", "(flag)"]
    assert rows["rig"][1:] == ["robot", "(file)"]
    assert rows["can_interface"][1:] == ["socketcan", "(default)"]
    assert f"rig file: {tmp_path / 'aiko.toml'}" in r.stdout
    # the preflight table covers the nodes asked for (3 joints, not the file's 4)
    assert "      3  " in r.stdout and "      4  " not in r.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text("[joints]\nnodes = \"ten\"\n")
    r = aiko("run", "sidewinding", "--check", "--rig-file", str(bad), cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert f"{bad}: joints.nodes: must be an integer" in r.stderr


def test_aiko_run_with_a_rig_file_against_the_emulator(tmp_path):
    """The robot's settings from the rig file only: slcan over TCP to `aiko
    emulate`, no motion capture, trials in the file's folder and pattern; the
    merged settings and their sources in the log."""
    emu, channel = start_emulator()
    try:
        (tmp_path / "lab.toml").write_text(
            f'[can]\ninterface = "slcan"\nchannel = "{channel}"\n[joints]\nnodes = 3\n'
            '[mocap]\nsource = "none"\n[trials]\nfolder = "out/day1"\nname = "{gait}-x"\n')
        r = aiko_process("run", "still", "--rig-file", "lab.toml", "--duration", "1", "--no-model",
                 cwd=tmp_path)
    finally:
        stop(emu)
    assert r.returncode == 0, r.stderr
    assert "trial completed" in r.stdout and "nodes ok 3/3" in r.stdout
    log = tmp_path / "out" / "day1" / "still-x.mcap"
    meta = read_trial(log).metadata
    settings = json.loads(meta["rig_settings"]) if isinstance(meta["rig_settings"], str) \
        else meta["rig_settings"]
    assert settings["rig_file"] == str((tmp_path / "lab.toml").resolve())
    s = settings["settings"]
    assert s["can_channel"] == {"value": channel, "source": "file"}
    assert s["rig"] == {"value": "robot", "source": "file"}
    assert s["bitrate"]["source"] == "default"


@pytest.mark.parametrize("spec, needle", [
    ("vicon-udp:x", "argument --mocap: vicon-udp:x: the port must be an integer"),
    ("vicon-udp:70000", "argument --mocap: vicon-udp:70000: port out of range"),
    ("optitrack", f"expected {MOCAP_SPELLING}"),
    ("vicon-datastream", f"expected {MOCAP_SPELLING}"),
])
def test_a_bad_mocap_flag_is_one_line(spec, needle, tmp_path):
    r = aiko("run", "sidewinding", "--check", "--mocap", spec, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr


def test_the_mocap_flag_overrides_the_file(tmp_path):
    (tmp_path / "aiko.toml").write_text('[mocap]\nsource = "vicon-udp"\nport = 51001\n'
                                        'host = "192.168.10.2"\n')
    r = aiko("run", "sidewinding", "--check", "--mocap", "vicon-datastream:vicon.lab",
             cwd=tmp_path)
    rows = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()
            if line.startswith("  ") and len(line.split()) == 3}
    assert rows["mocap_source"] == ["vicon-datastream", "(flag)"]
    assert rows["mocap_host"] == ["vicon.lab", "(flag)"]
    assert rows["mocap_port"] == ["51001", "(file)"]
