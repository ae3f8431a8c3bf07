"""A trial exported as a rosbag2, read with a second, independent reader
(mcap-ros2-support's decoder, which parses the message definitions stored in
the bag; the bag is written with rosbags), and read back for `aiko replay`."""

import json
import shutil
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pytest
import yaml
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from aiko.experiments.analysis.replay_files import replay_trial
from aiko.experiments.analysis.rosbag2_diagnostics import node_level
from aiko.experiments.analysis.rosbag2_export import BagExportError, export_rosbag2
from aiko.experiments.files.ros_types import TOPICS
from aiko.experiments.files.triallog import TrialLogError, read_trial
from aiko.firmware_interface.codec import JointState, decode
from aiko.firmware_interface.protocol import ANGLE_SCALE, NodeState, Status
from tests.conftest import aiko


@pytest.fixture(scope="module")
def exported(realistic_trial, tmp_path_factory):
    """(the trial, its bag folder, every message of the bag by topic)."""
    trial = realistic_trial[1]
    out = tmp_path_factory.mktemp("bag")
    r = aiko("export", str(trial), "--format", "rosbag2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    folder = out / f"{trial.stem}-rosbag2"
    assert str(folder) in r.stdout and "12 topics" in r.stdout
    by_topic = defaultdict(list)
    with open(next(folder.glob("*.mcap")), "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for schema, channel, message, ros_msg in reader.iter_decoded_messages():
            by_topic[channel.topic].append(Decoded(schema, message, ros_msg))
    return read_trial(trial), folder, by_topic


@dataclass
class Decoded:
    schema: object
    message: object
    ros_msg: object

    @property
    def log_time_ns(self) -> int:
        return self.message.log_time

    @property
    def publish_time_ns(self) -> int:
        return self.message.publish_time


def _stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec


def test_every_topic_has_its_standard_type_and_count(exported):
    data, folder, by_topic = exported
    assert set(by_topic) == set(TOPICS)
    for topic, msgs in by_topic.items():
        assert {m.schema.name for m in msgs} == {TOPICS[topic]}, topic
        assert {m.schema.encoding for m in msgs} == {"ros2msg"}
    tracked, model = data.tracked(), data.records["/model"]
    expected = {"/trial": 1, "/tf_static": 1,
                "/joint_states": len(data.records["/joint_state"]),
                "/joint_references": len(data.records["/references"]),
                "/reference_periods": len(data.records["/references"]),
                "/link6": len(tracked), "/model/link6": len(model),
                "/tf": len(tracked) + len(model),
                "/can/tx": len(data.records["/can/tx"]), "/can/rx": len(data.records["/can/rx"]),
                "/events": len(data.records["/events"])}
    for topic, n in expected.items():
        assert len(by_topic[topic]) == n, topic
    assert len(tracked) > 50 and len(model) > 50
    # ros2 bag info reads metadata.yaml: the counts and types are there too
    meta = yaml.safe_load((folder / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["storage_identifier"] == "mcap"
    listed = {t["topic_metadata"]["name"]: (t["topic_metadata"]["type"], t["message_count"])
              for t in meta["topics_with_message_count"]}
    assert listed == {topic: (TOPICS[topic], len(msgs)) for topic, msgs in by_topic.items()}
    assert meta["relative_file_paths"] == [f"{folder.name}.mcap"]


def test_stamps_are_the_log_times_and_monotonic(exported):
    data, _, by_topic = exported
    wall = data.events("trial_start")[0][1]["data"]["wall_start"]
    for topic, msgs in by_topic.items():
        log = [m.log_time_ns for m in msgs]
        assert log == sorted(log), topic
        for m in msgs:
            assert m.publish_time_ns == m.log_time_ns
            if hasattr(m.ros_msg, "header"):
                assert _stamp_ns(m.ros_msg) == m.log_time_ns, topic
    # the trial's message at the log's first record; a camera frame at the
    # time it was received, which may come before the logger's first sample
    first = min(m.log_time_ns for msgs in by_topic.values() for m in msgs)
    t_trial = by_topic["/trial"][0].log_time_ns
    assert abs(t_trial * 1e-9 - (wall + data.span[0])) < 1e-6
    t_frame = data.tracked()[0][0]
    assert abs(first * 1e-9 - (wall + min(data.span[0], t_frame))) < 1e-6
    trial = json.loads(by_topic["/trial"][0].ros_msg.data)
    assert trial["metadata"]["gait_name"] == "sidewinding"
    assert trial["comparison"] == data.records["/comparison"][-1][1]["metrics"]


def test_joint_states_are_the_state_replies_to_the_codecs_resolution(exported):
    data, _, by_topic = exported
    replies = []
    for _, r in data.records["/can/rx"]:
        frame = decode(r["id"], bytes.fromhex(r["data"]))
        if isinstance(frame, JointState):
            replies.append(frame)
    msgs = [m.ros_msg for m in by_topic["/joint_states"]]
    assert len(msgs) == len(replies) > 100
    for msg, frame in zip(msgs, replies, strict=True):
        n = frame.node
        assert list(msg.name) == [f"joint{n}_h", f"joint{n}_v"]
        assert np.allclose(msg.position, [frame.alpha_h, frame.alpha_v], atol=ANGLE_SCALE / 2,
                           rtol=0)
        assert list(msg.effort) == [frame.duty_h, frame.duty_v]   # duty, percent PWM
    refs = [m.ros_msg for m in by_topic["/joint_references"]]
    for msg, (_, d) in zip(refs, data.records["/references"], strict=True):
        assert list(msg.name[:2]) == ["joint1_h", "joint1_v"] and len(msg.name) == 20
        assert list(msg.position[0::2]) == d["alpha_h"] and list(msg.velocity[1::2]) == d["omega_v"]


def test_tf_and_points_are_the_mocap_and_model_samples(exported):
    data, _, by_topic = exported
    static = by_topic["/tf_static"][0].ros_msg.transforms
    assert [(t.header.frame_id, t.child_frame_id) for t in static] == [("world", "mocap"),
                                                                       ("world", "model")]
    mocap = [m.ros_msg.transforms for m in by_topic["/tf"]
             if m.ros_msg.transforms[0].header.frame_id == "mocap"]
    model = [m.ros_msg.transforms for m in by_topic["/tf"]
             if m.ros_msg.transforms[0].header.frame_id == "model"]
    for tfs, (_, p) in zip(mocap, data.tracked(), strict=True):
        v = tfs[0].transform.translation
        assert tfs[0].child_frame_id == "link6" and (v.x, v.y, v.z) == p
    for tfs, (_, d) in zip(model, data.records["/model"], strict=True):
        assert [t.child_frame_id for t in tfs] == [f"model/link{i}" for i in range(1, 12)]
        got = [(t.transform.translation.x, t.transform.translation.y, t.transform.translation.z)
               for t in tfs]
        assert np.array_equal(got, d["positions"])
    for m, (_, p) in zip(by_topic["/link6"], data.tracked(), strict=True):
        assert (m.ros_msg.point.x, m.ros_msg.point.y, m.ros_msg.point.z) == p
    for m, (_, d) in zip(by_topic["/model/link6"], data.records["/model"], strict=True):
        assert (m.ros_msg.point.x, m.ros_msg.point.y, m.ros_msg.point.z) == (d["x"], d["y"], d["z"])
        assert m.ros_msg.header.frame_id == "model"


def test_can_frames_byte_for_byte(exported):
    data, _, by_topic = exported
    for topic in ("/can/tx", "/can/rx"):
        for m, (_, r) in zip(by_topic[topic], data.records[topic], strict=True):
            f = m.ros_msg
            assert f.id == r["id"] and not (f.is_extended or f.is_rtr or f.is_error)
            assert bytes(f.data[:f.dlc]).hex() == r["data"] and not any(f.data[f.dlc:])


def test_diagnostics_and_events(exported):
    data, _, by_topic = exported
    events = [json.loads(m.ros_msg.data) for m in by_topic["/events"]]
    assert events == [e for _, e in data.records["/events"]]
    arrays = [m.ros_msg for m in by_topic["/diagnostics"]]
    nodes = [a for a in arrays if len(a.status) == 10]
    assert len(nodes) >= int(data.span[1] - data.span[0])   # once a second
    assert {s.level for s in nodes[2].status} == {0}          # all operational by then
    assert any(s.name == "aiko/trial" and "safe stop (completed)" in s.message
               for a in arrays for s in a.status)
    assert node_level(None, None)[0] == 3
    assert node_level(NodeState.PRE_OPERATIONAL, 0) == (1, "pre-operational")
    assert node_level(NodeState.OPERATIONAL, Status.OPERATIONAL | Status.HOLDING) == (
        1, "operational, holding")


def test_the_bag_replays_as_the_trial_does(exported, tmp_path):
    data, folder, _ = exported
    for sub in "abc":
        (tmp_path / sub).mkdir()
    direct = replay_trial(data.path, out=tmp_path / "a")
    via_bag = replay_trial(folder, out=tmp_path / "b")
    via_file = replay_trial(next(folder.glob("*.mcap")), out=tmp_path / "c")
    assert direct.error is None and via_bag.error is None and via_file.error is None
    assert via_bag.start == direct.start == "the parallel model's start (logged)"
    for key, value in direct.metrics.items():
        if isinstance(value, float):
            assert via_bag.metrics[key] == pytest.approx(value, abs=1e-9, rel=0), key
            assert via_file.metrics[key] == pytest.approx(value, abs=1e-9, rel=0), key
        elif key != "windows":
            assert via_bag.metrics[key] == value, key
    r = aiko("replay", str(folder), "--out", str(tmp_path))
    assert r.returncode == 0 and "link 6, experiment" in r.stdout, r.stderr
    info = aiko("info", str(folder))
    assert info.returncode == 0 and "sidewinding on the simulated rig" in info.stdout


def test_a_truncated_trial_exports_what_it_holds(realistic_trial, tmp_path):
    raw = realistic_trial[1].read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(raw[:len(raw) // 2])
    r = aiko("export", str(cut), "--format", "rosbag2", "--out", str(tmp_path))
    assert r.returncode == 0 and "the file ends early" in r.stdout, r.stderr
    back = read_trial(tmp_path / "cut-rosbag2")
    assert back.truncated and 0 < len(back.records["/can/rx"]) < len(
        read_trial(realistic_trial[1]).records["/can/rx"])


def test_bad_input_is_a_one_line_error_and_leaves_nothing(exported, tmp_path):
    data, folder, _ = exported
    text = tmp_path / "notes.mcap"
    text.write_text("not a trial\n")
    r = aiko("export", str(text), "--format", "rosbag2", "--out", str(tmp_path))
    assert r.returncode == 2 and "not an MCAP file" in r.stderr and len(r.stderr.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.mcap"]
    with pytest.raises(BagExportError, match="exists already"):
        export_rosbag2(data, folder)
    # a bag without what a replay needs: the topics it lacks are named
    lacking = tmp_path / "lacking"
    shutil.copytree(folder, lacking)
    meta = lacking / "metadata.yaml"
    doc = yaml.safe_load(meta.read_text())
    info = doc["rosbag2_bagfile_information"]
    info["topics_with_message_count"] = [t for t in info["topics_with_message_count"]
                                         if t["topic_metadata"]["name"] != "/link6"]
    meta.write_text(yaml.safe_dump(doc))
    (lacking / f"{folder.name}.mcap").rename(lacking / "other.mcap")
    info["relative_file_paths"] = ["other.mcap"]
    info["files"][0]["path"] = "other.mcap"
    meta.write_text(yaml.safe_dump(doc))
    r = aiko("replay", str(lacking), "--out", str(tmp_path))
    assert r.returncode != 0 and "no topic /link6" in r.stdout + r.stderr
    (lacking / "metadata.yaml").write_text("rosbag2_bagfile_information: [1, 2\n")
    with pytest.raises(TrialLogError, match="unreadable rosbag2"):
        read_trial(lacking)
