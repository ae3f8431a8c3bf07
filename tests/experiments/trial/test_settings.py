"""The settings below the command line: one table, four layers with their
sources, typed settings, the flags generated from the table, campaign
entries built without argv, and the wiring into a session."""

import math
from pathlib import Path

import pytest

from aiko.control.gait import PRESETS
from aiko.experiments.cli import build_parser
from aiko.experiments.cli.flags import given_flags
from aiko.experiments.files.campaign_plan import PlanError, load_plan
from aiko.experiments.trial.settings import (
    OPTIONS,
    PLAN_KEY,
    MocapSpec,
    SettingsError,
    build_settings,
    options_of,
    parse_mocap_spec,
    plan_value,
)
from aiko.experiments.trial.wiring import doctor_config, plant_params, session_config


def test_the_layers_and_their_sources(tmp_path):
    (tmp_path / "aiko.toml").write_text('[can]\nchannel = "can1"\n[joints]\nnodes = 4\n'
                                        '[mocap]\nsource = "vicon-udp"\nport = 51002\n')
    s = build_settings({"nodes": 3}, entry={"nodes": 5, "bitrate": 500000,
                                           "heading_deg": 10.0}, cwd=tmp_path)
    src = {name: (v.value, v.source) for name, v in s.sources.items()}
    assert src["rig"] == ("robot", "file")             # a rig file describes the robot
    assert src["can_channel"] == ("can1", "file")
    assert src["bitrate"] == (500000, "plan")
    assert src["nodes"] == (3, "flag")                 # flags over the plan over the file
    assert src["can_interface"] == ("socketcan", "default")
    assert s.rig.nodes == 3 and s.rig.can.channel == "can1" and s.rig.can.bitrate == 500000
    assert s.rig.mocap.spec == "vicon-udp:51002" and s.steering.heading_deg == 10.0
    assert set(s.as_metadata()["settings"]) == set(s.sources)


def test_without_a_rig_file_the_rig_is_simulated(tmp_path):
    s = build_settings(cwd=tmp_path)
    assert s.simulated and s.sources["rig"].source == "default"
    assert all(v.source == "default" for v in s.sources.values())
    assert s.rig.mocap.on("simulated").source == "vicon-udp"
    robot = build_settings({"rig": "robot"}, cwd=tmp_path)
    assert robot.rig.mocap.on("robot").spec == "none"


def test_the_robots_tracker_stream_defaults_to_its_port(tmp_path):
    s = build_settings({"rig": "robot", "mocap": MocapSpec("vicon-udp")}, cwd=tmp_path)
    assert s.rig.mocap.on("robot").port == 51001
    assert s.rig.mocap.on("simulated").port is None


@pytest.mark.parametrize("spec, want", [
    ("none", MocapSpec("none")), ("vicon-udp", MocapSpec("vicon-udp")),
    ("vicon-udp:51002", MocapSpec("vicon-udp", port=51002)),
    ("vicon-datastream:vicon.lab", MocapSpec("vicon-datastream", host="vicon.lab")),
])
def test_the_mocap_spec_is_read_in_one_place(spec, want):
    assert parse_mocap_spec(spec) == want


@pytest.mark.parametrize("spec", ["vicon-udp:x", "vicon-udp:70000", "optitrack",
                                  "vicon-datastream"])
def test_a_bad_mocap_spec_says_why_in_one_line(spec):
    with pytest.raises(ValueError) as e:
        parse_mocap_spec(spec)
    assert spec in str(e.value) and "\n" not in str(e.value)


def test_plan_keys_are_the_flags_names_and_checked_as_flags_are():
    assert plan_value("heading", 45) == ("heading_deg", 45.0)
    assert plan_value("backlash_deg", 2) == ("backlash_deg", 2.0)
    assert plan_value("plant_fault", "2:silent@1") == ("plant_fault", ("2:silent@1",))
    assert plan_value("tolerate", ["encoder-fault"]) == ("tolerate", ("encoder-fault",))
    assert plan_value("mocap", "vicon-udp:51003") == ("mocap",
                                                       MocapSpec("vicon-udp", port=51003))
    assert plan_value("no_model", True) == ("no_model", True)
    for key, value, needle in [("wobble", 1, "unknown key"),
                               ("plant", "perfect", "invalid choice: 'perfect'"),
                               ("nodes", 99, "nodes must lie in 1..63, got 99"),
                               ("no_model", "yes", "must be true or false"),
                               ("duration", True, "must be a string or a number"),
                               ("tolerate", "lost-node", "invalid choice")]:
        with pytest.raises(SettingsError, match=needle):
            plan_value(key, value)


def test_settings_that_do_not_go_together(tmp_path):
    for values, needle in [({"heading_deg": 10.0, "path": "p.toml"}, "--heading or --path"),
                           ({"plant_mu": 0.2, "plant_mu_x": 0.1}, "--plant-mu or"),
                           ({"rig": "robot", "start_curve": "c.toml"}, "robot starts where"),
                           ({"rig": "robot", "plant_fault": ("2:silent",)}, "simulated Aiko"),
                           ({"mocap": MocapSpec("vicon-datastream")}, "needs the server's host")]:
        with pytest.raises(SettingsError, match=needle):
            build_settings(values, cwd=tmp_path)
    with pytest.raises(SettingsError, match="not a setting"):
        build_settings({"wobble": 1}, cwd=tmp_path)


def _parsed(argv):
    return build_parser().parse_args(argv)


def test_each_flag_is_declared_once_by_the_table():
    """run and doctor take the rig's flags from the one table: same flag, same
    help; the run parser's flags are exactly the table's plus its own."""
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices
    by_command = {name: {a.dest: a for a in sub[name]._actions} for name in ("run", "doctor")}
    for opt in OPTIONS:
        for command in set(opt.commands) & {"run", "doctor"}:
            action = by_command[command][opt.name]
            assert opt.flag_name in action.option_strings
            assert action.help.startswith(opt.help.replace("%", "%%"))
            assert action.default is None
    own = {"help", "gait", "check", "out", "rig_file"}
    assert set(by_command["run"]) - own == {o.name for o in options_of("run")}
    assert set(PLAN_KEY) >= {"heading", "backlash_deg", "plant", "mocap", "nodes"}


# flags of one name that mean different things in different commands
SAME_NAME_OTHER_MEANING = {
    "--out": "a file or a folder, per command", "--duration": "a trial's, a simulation's, "
    "the longest planned (doctor)", "--json": "the doctor's report; info's output",
    "--budget": "evaluations of a fit or an optimisation", "--bounds": "per command",
    "--seed": "mocap noise (emulate); the optimiser's", "--mocap-rate": "the logging rate "
    "(run); the stream's datagrams (emulate)", "--plant": "a preset (run); serve the "
    "physics (emulate)", "--mu": "one friction; a list of them (optimize)",
    "--start-curve": "the model's start (simulate); the simulated Aiko's",
    "--plant-mu-x": "hidden in emulate: run's simulated floor, passed on",
    "--plant-mu-y": "as --plant-mu-x",
}


def test_no_flag_is_declared_in_two_modules_unless_it_means_another_thing():
    import re
    from collections import defaultdict

    where = defaultdict(set)
    for path in (Path(__file__).resolve().parents[3] / "experiments" / "cli").glob("*.py"):
        for flag in re.findall(r'add_argument\(\s*"(--[a-z0-9-]+)"', path.read_text()):
            where[flag].add(path.stem)
    repeated = {flag for flag, modules in where.items() if len(modules) > 1}
    assert repeated <= set(SAME_NAME_OTHER_MEANING), repeated - set(SAME_NAME_OTHER_MEANING)


def test_the_command_line_and_python_build_the_same_session(tmp_path):
    argv = ["run", "lateral-undulation", "--nodes", "4", "--heading", "30",
            "--plant", "ideal", "--plant-fault", "2:silent@1", "--tolerate", "encoder-fault",
            "--mqtt", "mqtt://u:pw@127.0.0.1:1883/lab", "--mqtt-model", "--duration", "5"]
    from_cli = build_settings(given_flags(_parsed(argv), "run"), cwd=tmp_path)
    from_python = build_settings({"nodes": 4, "heading_deg": 30.0, "plant": "ideal",
                                  "plant_fault": ("2:silent@1",),
                                  "tolerate": ("encoder-fault",),
                                  "mqtt": "mqtt://u:pw@127.0.0.1:1883/lab",
                                  "mqtt_model": True, "duration": 5.0}, cwd=tmp_path)
    assert from_cli == from_python
    gait = PRESETS["lateral-undulation"]
    out = tmp_path / "t.mcap"
    a, b = session_config(from_cli, gait, out), session_config(from_python, gait, out)
    assert a == b
    tc = a.trial
    assert (tc.nodes, tc.duration, tc.rig, tc.mocap) == (4, 5.0, "simulated", "vicon-udp")
    assert tc.steering is not None and tc.steering.heading == pytest.approx(math.radians(30))
    assert not tc.policy.stop_on_encoder_fault and tc.policy.stop_on_current_limit
    assert tc.mqtt == "mqtt://u@127.0.0.1:1883/lab"       # no password in the log
    assert a.mqtt is not None and a.mqtt.password == "pw" and a.mqtt_model
    assert a.plant.faults == ("2:silent@1",) and a.plant.backlash_deg == 0.0
    assert a.settings["settings"]["mqtt"]["value"] == "mqtt://u@127.0.0.1:1883/lab"


def test_a_fault_for_a_node_that_is_not_there(tmp_path):
    s = build_settings({"nodes": 3, "plant_fault": ("5:silent",)}, cwd=tmp_path)
    with pytest.raises(SettingsError, match="node 5, but only nodes 1..3 exist"):
        plant_params(s.plant, s.rig.nodes)


def test_the_trials_folder_and_name_pattern_give_the_log(tmp_path):
    (tmp_path / "aiko.toml").write_text('[trials]\nfolder = "day1"\nname = "{gait}-x"\n'
                                        '[can]\ninterface = "virtual"\n')
    s = build_settings(cwd=tmp_path)
    cfg = session_config(s, PRESETS["sidewinding"])
    assert cfg.out == tmp_path / "day1" / "sidewinding-x.mcap" and cfg.out.parent.is_dir()


def test_the_doctor_checks_the_rig_the_settings_describe(tmp_path):
    s = build_settings({"can_interface": "virtual", "can_channel": "x", "nodes": 2,
                        "mocap": MocapSpec("vicon-datastream", host="vicon.lab")}, cwd=tmp_path)
    cfg = doctor_config(s.rig, 120.0, kernels=False)
    assert (cfg.can_interface, cfg.nodes, cfg.mocap_source, cfg.mocap_host) == (
        "virtual", 2, "vicon-datastream", "vicon.lab")
    assert cfg.trial_duration == 120.0 and not cfg.kernels and cfg.trials_folder == Path(".")


def test_a_campaign_entry_becomes_settings_without_argv(tmp_path):
    from aiko.experiments.trial.wiring import entry_settings

    plan_file = tmp_path / "plan.toml"
    plan_file.write_text('[campaign]\nname = "c"\n[[trial]]\ngait = "lateral-undulation"\n'
                         'duration = 4.0\nrepetitions = 1\nheading = 20\nplant = "ideal"\n'
                         'plant_fault = ["2:silent@3"]\n[[trial]]\ngait = "sidewinding"\n'
                         'duration = 3.0\nrepetitions = 1\nnodes = 70\n')
    plan = load_plan(plan_file)
    s = entry_settings(plan, plan.entries[0])
    assert s.sources["heading_deg"].source == "plan" and s.steering.heading_deg == 20.0
    assert s.trial.duration == 4.0 and s.plant.faults == ("2:silent@3",)
    with pytest.raises(PlanError, match=r"trial 2 \(sidewinding\)\.nodes: nodes must lie"):
        entry_settings(plan, plan.entries[1])


def test_every_default_a_help_text_quotes_is_the_settings_default():
    """A number a help text gives as the default is the option's default, to
    the digits quoted (the motors' speed was once "default 103.1" over a
    default of 171.9 deg/s). Options whose default is None (another layer
    decides: the gait's duration, the plant's seed) quote what that layer
    gives."""
    import re

    quoted = 0
    for o in OPTIONS:
        for m in re.finditer(r"default:? (-?\d+(?:\.(\d+))?)", o.help):
            if o.default is None:
                continue
            half_digit = 0.5 * 10.0 ** -len(m[2] or "")
            assert abs(float(m[1]) - o.default) <= half_digit, (o.name, m[0], o.default)
            quoted += 1
    assert quoted >= 8
