"""The settings that describe the rig, for the commands that talk to it
(``aiko run``, ``aiko doctor``): defaults, then the rig file
(:mod:`aiko.experiments.files.rig_file`), then the flags; each value with where
it came from."""

from __future__ import annotations

import argparse
import math
from typing import Any
from urllib.parse import urlparse, urlunparse

from aiko.control.gait import JOINT_LIMIT
from aiko.control.preflight import OMEGA_MAX
from aiko.experiments.cli.args import ArgError
from aiko.experiments.files.rig_file import RigFile, Setting, find_rig_file, load_rig_file, merge

__all__ = ["RIG_DEFAULTS", "resolve", "describe", "as_metadata", "mocap_spec", "without_password",
           "mqtt_config"]

RIG_DEFAULTS: dict[str, Any] = {
    "rig": "simulated", "can_interface": "socketcan", "can_channel": "can0", "bitrate": None,
    "nodes": 10, "limit_deg": math.degrees(JOINT_LIMIT),
    "max_speed_deg_s": math.degrees(OMEGA_MAX),
    "mocap_source": None, "mocap_host": None, "mocap_port": None, "mocap_subject": "link6",
    "mocap_segment": "link6", "mocap_rate": 20.0, "mqtt": None, "mqtt_ca": None,
    "mqtt_password_env": None, "trials_folder": None, "trials_name": "trial-{time}",
    "live_host": "127.0.0.1",
}
"""Every rig setting and its value without a rig file or a flag (mocap_source
None: the simulated rig's stream on the simulated rig, none on the robot)."""


def _mocap_flags(spec: str | None, command: str) -> dict[str, Any]:
    """--mocap vicon-udp[:PORT] | vicon-datastream:HOST | none as settings."""
    if spec is None:
        return {}
    if spec == "none":
        return {"mocap_source": "none"}
    kind, _, arg = spec.partition(":")
    if kind == "vicon-udp":
        if not arg:
            return {"mocap_source": kind}
        try:
            port = int(arg)
        except ValueError:
            raise ArgError(f"aiko {command}: --mocap {spec}: the port must be an integer") from None
        if not 0 <= port <= 65535:
            raise ArgError(f"aiko {command}: --mocap {spec}: port out of range")
        return {"mocap_source": kind, "mocap_port": port}
    if kind == "vicon-datastream" and arg:
        return {"mocap_source": kind, "mocap_host": arg}
    raise ArgError(f"aiko {command}: --mocap {spec!r}: expected vicon-udp[:PORT], "
                   "vicon-datastream:HOST or none")


def resolve(args: argparse.Namespace, command: str) -> tuple[dict[str, Setting], RigFile | None]:
    """Merge the defaults, the rig file (``--rig-file`` or ./aiko.toml) and
    the flags; the merged values are written back into ``args`` under the
    flags' names, so the command reads them as if typed."""
    path = find_rig_file(getattr(args, "rig_file", None))
    rig = load_rig_file(path) if path is not None else None
    if rig is not None:   # a rig file describes the robot
        rig = RigFile(rig.path, {"rig": "robot", **rig.settings})
    flags = {name: getattr(args, name, None) for name in RIG_DEFAULTS}
    flags.update(_mocap_flags(getattr(args, "mocap", None), command))
    settings = merge(RIG_DEFAULTS, rig, flags)
    for name, s in settings.items():
        setattr(args, name, s.value)
    args.mocap = mocap_spec(settings)
    return settings, rig


def mqtt_config(args: argparse.Namespace):
    """The broker's settings from the merged ``args`` (None without a broker):
    the URL, its CA file, the password from the environment variable the rig
    file names (RigFileError when that variable is not set)."""
    from dataclasses import replace

    from aiko.drivers.telemetry import MqttConfig
    from aiko.experiments.files.rig_file import mqtt_password

    if not args.mqtt:
        return None
    cfg = MqttConfig.from_url(args.mqtt, args.mqtt_ca)
    password = mqtt_password(args.mqtt_password_env, str(args.rig_file or "aiko.toml"))
    return cfg if password is None else replace(cfg, password=password)


def mocap_spec(settings: dict[str, Setting]) -> str | None:
    """The --mocap spelling of the merged motion-capture settings."""
    source = settings["mocap_source"].value
    if source == "vicon-udp" and settings["mocap_port"].value is not None:
        return f"vicon-udp:{settings['mocap_port'].value}"
    if source == "vicon-datastream":
        return f"vicon-datastream:{settings['mocap_host'].value}"
    return source


def without_password(url: str | None) -> str | None:
    """A broker URL with any password taken out (what the log keeps)."""
    if url is None:
        return None
    u = urlparse(url)
    if u.password is None:
        return url
    netloc = u.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunparse(u._replace(netloc=f"{user}@{netloc[1]}"))


def describe(settings: dict[str, Setting], rig: RigFile | None) -> list[str]:
    """Lines for ``--check``: every setting, its value and where it came from."""
    lines = [f"rig file: {rig.path if rig is not None else 'none'}"]
    width = max(len(n) for n in settings)
    for name, s in settings.items():
        value = without_password(s.value) if name == "mqtt" else s.value
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        lines.append(f"  {name:{width}s}  {text:24s}  ({s.source})")
    return lines


def as_metadata(settings: dict[str, Setting], rig: RigFile | None) -> dict:
    """The merged settings for the trial log: value and source of each, the
    rig file's path; no password."""
    out = {name: {"value": without_password(s.value) if name == "mqtt" else s.value,
                  "source": s.source} for name, s in settings.items()}
    return {"rig_file": None if rig is None else str(rig.path), "settings": out}
