"""The ROS 2 side of a trial: topics, their standard message types, the
typestore that serialises them (rosbags', ROS 2 Jazzy, with ros-drivers'
``can_msgs/msg/Frame`` added from its message definition) and the time
stamps.

A trial exported as a rosbag2 (:mod:`aiko.experiments.files.rosbag2_export`)
and read back (:mod:`aiko.experiments.files.rosbag2_read`) uses these names.
Stamps are integer nanoseconds: the wall clock of the trial's start
(``wall_start`` of its ``trial_start`` event) plus the trial clock, added as
integers so the trial clock comes back to the nanosecond.
"""

from __future__ import annotations

from functools import cache

__all__ = ["TOPICS", "REQUIRED_TOPICS", "CAN_FRAME_MSG", "typestore", "joint_names",
           "split_joint_name", "to_ns", "EXTRA_TOPICS"]

CAN_FRAME_MSG = """\
std_msgs/Header header
uint32 id
bool is_rtr
bool is_extended
bool is_error
uint8 dlc
uint8[8] data
"""
"""``can_msgs/msg/Frame`` of ros-drivers' ros_canopen (ROS 2 branches), field for field."""

TOPICS: dict[str, str] = {
    "/trial": "std_msgs/msg/String",
    "/tf_static": "tf2_msgs/msg/TFMessage",
    "/joint_states": "sensor_msgs/msg/JointState",
    "/joint_references": "sensor_msgs/msg/JointState",
    "/reference_periods": "std_msgs/msg/String",
    "/tf": "tf2_msgs/msg/TFMessage",
    "/link6": "geometry_msgs/msg/PointStamped",
    "/model/link6": "geometry_msgs/msg/PointStamped",
    "/can/tx": "can_msgs/msg/Frame",
    "/can/rx": "can_msgs/msg/Frame",
    "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
    "/events": "std_msgs/msg/String",
}
"""Every topic of an exported trial and its message type."""

EXTRA_TOPICS = ("/reference_periods",)
"""Topics of ours beside the standard ones: each reference period's phase,
counter and exact send time (JSON), so the bag replays as the trial does."""

REQUIRED_TOPICS = ("/trial", "/joint_references", "/reference_periods", "/link6", "/events")
"""What a replay of a bag needs (the trial's metadata, the references with
their periods, link 6 from motion capture, the model's start)."""

LATCHED = ("/trial", "/tf_static")
"""Topics offered transient-local: ``ros2 bag play`` hands them to late subscribers."""


@cache
def typestore():
    """rosbags' ROS 2 Jazzy typestore with ``can_msgs/msg/Frame``."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    store.register(get_types_from_msg(CAN_FRAME_MSG, "can_msgs/msg/Frame"))
    return store


def joint_names(node: int) -> tuple[str, str]:
    """The two motors' names of a joint module: ``joint<n>_h``, ``joint<n>_v``."""
    return f"joint{node}_h", f"joint{node}_v"


def split_joint_name(name: str) -> tuple[int, int] | None:
    """(node, 0 for h or 1 for v) of a name of :func:`joint_names`, else None."""
    if not name.startswith("joint") or name[-2:] not in ("_h", "_v"):
        return None
    digits = name[5:-2]
    if not digits.isdigit():
        return None
    return int(digits), 0 if name.endswith("_h") else 1


def to_ns(t: float) -> int:
    """A time in s as integer nanoseconds (rounded)."""
    return int(round(t * 1e9))
