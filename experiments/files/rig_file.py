"""The rig file: a lab's robot and room described once, in TOML, beside its
trials (``aiko.toml`` in the working folder is read by default).

Tables and keys (every table and key optional; a value left out keeps the
command's default)::

    [can]
    interface = "socketcan"        # any python-can interface
    channel = "can0"
    bitrate = 1000000              # bit/s
    [joints]
    nodes = 10                     # joint modules 1..nodes (node id i drives joint i)
    limit_deg = 45.0               # the joints' mechanical limit (the preflight's)
    max_speed_deg_s = 171.9        # the motors' full-duty speed (the preflight's)
    [mocap]
    source = "vicon-udp"           # vicon-udp | vicon-datastream | qualisys | none
    host = "192.168.10.2"          # the DataStream host
    port = 51001                   # the UDP port the Tracker sends to
    subject = "link6"
    segment = "link6"
    rate = 20.0                    # Hz, the logging rate
    [mqtt]
    url = "mqtts://aiko@broker.lab:8883/aiko"
    ca_file = "lab-ca.pem"         # relative to the rig file
    password_env = "AIKO_MQTT_PASSWORD"   # the password's environment variable
    model = false                  # publish the parallel model's link 6 too
    [trials]
    folder = "trials"              # relative to the rig file
    name = "{gait}-{time}"         # {gait}, {time} (YYYYmmdd-HHMMSS)
    [live]
    host = "127.0.0.1"             # the live page's and Foxglove's address

Pure: :func:`load_rig_file` reads and checks a file into a frozen
:class:`RigFile` (the settings layers it takes part in are
:mod:`aiko.experiments.trial.settings`). A password is never part of a RigFile:
only the name of the environment variable that holds it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from aiko.drivers.mocap_sources import SERVED_KINDS
from aiko.experiments.files.tomlfile import read_toml
from aiko.model.errors import AikoError

__all__ = ["RigFile", "RigFileError", "load_rig_file", "find_rig_file", "RIG_FILE_NAME",
           "MOCAP_SOURCES", "trial_stem", "mqtt_password", "rig_file_keys"]

RIG_FILE_NAME = "aiko.toml"
"""The rig file read by default from the working folder."""

MOCAP_SOURCES = ("vicon-udp", *SERVED_KINDS, "none")


class RigFileError(AikoError):
    """A rig file that cannot be used: ``source`` (the file), ``key`` (the
    table.key at fault, or None), ``reason``; its message is one line."""

    def __init__(self, source: str, reason: str, key: str | None = None) -> None:
        where = f"{source}: {key}: " if key else f"{source}: "
        super().__init__(f"rig file {where}{reason}")
        self.source, self.reason, self.key = source, reason, key


def _text(v, src, key):
    if not isinstance(v, str) or not v:
        raise RigFileError(src, f"must be a non-empty string, got {v!r}", key)
    return v


def _int(lo, hi):
    def check(v, src, key):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise RigFileError(src, f"must be an integer in {lo}..{hi}, got {v!r}", key)
        return v
    return check


def _positive(v, src, key):
    if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
            or v <= 0):
        raise RigFileError(src, f"must be a positive number, got {v!r}", key)
    return float(v)


def _choice(options):
    def check(v, src, key):
        if v not in options:
            raise RigFileError(src, f"must be one of {', '.join(options)}, got {v!r}", key)
        return v
    return check


def _bool(v, src, key):
    if not isinstance(v, bool):
        raise RigFileError(src, f"must be true or false, got {v!r}", key)
    return v


def _env_name(v, src, key):
    v = _text(v, src, key)
    if not (v.replace("_", "").isalnum() and not v[0].isdigit()):
        raise RigFileError(src, f"must name an environment variable, got {v!r}", key)
    return v


# table -> key -> (check, the setting it gives: a flag's name in `aiko run`)
_SCHEMA: dict[str, dict[str, tuple[Any, str]]] = {
    "can": {"interface": (_text, "can_interface"), "channel": (_text, "can_channel"),
            "bitrate": (_int(10_000, 8_000_000), "bitrate")},
    "joints": {"nodes": (_int(1, 10), "nodes"), "limit_deg": (_positive, "limit_deg"),
               "max_speed_deg_s": (_positive, "max_speed_deg_s")},
    "mocap": {"source": (_choice(MOCAP_SOURCES), "mocap_source"), "host": (_text, "mocap_host"),
              "port": (_int(1, 65535), "mocap_port"), "subject": (_text, "mocap_subject"),
              "segment": (_text, "mocap_segment"), "rate": (_positive, "mocap_rate")},
    "mqtt": {"url": (_text, "mqtt"), "ca_file": (_text, "mqtt_ca"),
             "password_env": (_env_name, "mqtt_password_env"), "model": (_bool, "mqtt_model")},
    "trials": {"folder": (_text, "trials_folder"), "name": (_text, "trials_name")},
    "live": {"host": (_text, "live_host")},
}

def rig_file_keys() -> list[tuple[str, str, str]]:
    """Every key a rig file takes: (table, key, the setting it gives, by the
    setting's name in :data:`aiko.experiments.trial.options.OPTIONS`)."""
    return [(table, key, setting) for table, keys in _SCHEMA.items()
            for key, (_, setting) in keys.items()]


_RELATIVE = ("mqtt_ca", "trials_folder")
"""Settings that are paths: relative to the rig file's folder."""


@dataclass(frozen=True)
class RigFile:
    """A checked rig file: ``path`` and the settings it gives, by the name of
    the setting (``can_channel``, ``mocap_port``, ...), paths made absolute."""

    path: Path
    settings: dict[str, Any] = field(default_factory=dict)


def load_rig_file(path: str | Path) -> RigFile:
    """Read and check a rig file; RigFileError names the file, the key and
    what is wrong (an unknown table or key, a wrong type, a value out of
    range, a name pattern with unknown fields)."""
    path = Path(path)
    src = str(path)
    doc = read_toml(path, lambda s, reason: RigFileError(s, reason))
    settings: dict[str, Any] = {}
    for table, body in doc.items():
        keys = _SCHEMA.get(table)
        if keys is None:
            raise RigFileError(src, f"unknown table (expected {', '.join(_SCHEMA)})", table)
        if not isinstance(body, dict):
            raise RigFileError(src, "must be a table", table)
        for key, value in body.items():
            if key not in keys:
                raise RigFileError(src, f"unknown key (expected {', '.join(keys)})",
                                   f"{table}.{key}")
            check, name = keys[key]
            settings[name] = check(value, src, f"{table}.{key}")
    for name in _RELATIVE:
        if name in settings:
            settings[name] = str((path.parent / settings[name]).resolve())
    _check_together(settings, src)
    return RigFile(path.resolve(), settings)


def _check_together(s: dict[str, Any], src: str) -> None:
    """What single keys cannot say: the DataStream needs its host, the name
    pattern knows {gait} and {time} only."""
    if s.get("mocap_source") in SERVED_KINDS and "mocap_host" not in s:
        raise RigFileError(src, f"{s['mocap_source']} needs the server's host", "mocap.host")
    if "trials_name" in s:
        try:
            trial_stem(s["trials_name"], "g")
        except (KeyError, IndexError, ValueError) as exc:
            raise RigFileError(src, f"only {{gait}} and {{time}} may appear ({exc})",
                               "trials.name") from None
    if "mqtt_password_env" in s and "mqtt" not in s:
        raise RigFileError(src, "a password without a broker (mqtt.url)", "mqtt.password_env")


def find_rig_file(given: str | Path | None, cwd: Path | None = None) -> Path | None:
    """The rig file to use: the one given, else ``aiko.toml`` in the working
    folder if there is one, else None."""
    if given is not None:
        return Path(given)
    default = (cwd or Path.cwd()) / RIG_FILE_NAME
    return default if default.is_file() else None


def trial_stem(pattern: str, gait: str, now: datetime | None = None) -> str:
    """A trial log's name without ``.mcap`` from the [trials] name pattern:
    ``{gait}`` the gait's name, ``{time}`` YYYYmmdd-HHMMSS."""
    return pattern.format(gait=gait, time=f"{(now or datetime.now()):%Y%m%d-%H%M%S}")


def mqtt_password(env_name: str | None, source: str) -> str | None:
    """The broker's password from the environment variable the rig file names
    (None without one); RigFileError when it is not set."""
    if env_name is None:
        return None
    value = os.environ.get(env_name)
    if value is None:
        raise RigFileError(source, f"the environment variable {env_name} is not set",
                           "mqtt.password_env")
    return value
