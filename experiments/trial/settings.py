"""A trial's settings below the command line: values laid in layers, typed
frozen settings.

Every setting that ``aiko run`` takes besides its gait (and that ``aiko
doctor`` and a campaign plan's entries share) is one
:class:`~aiko.experiments.trial.options.Option` of the table
:data:`~aiko.experiments.trial.options.OPTIONS` (re-exported here): its name,
default, flag, parser, help and group. The command line's parsers are
generated from it (:mod:`aiko.experiments.cli.flags`), a campaign plan's keys
are checked against it, and :func:`build_settings`, the
one function the CLI, ``aiko doctor``, ``aiko campaign`` and Python users
call, lays the values over each other:

    defaults  <  rig file (``aiko.toml``)  <  campaign entry  <  flags

keeping each value's source (``default``, ``file``, ``plan``, ``flag``: on
the command line or given by the caller) for ``aiko run --check`` and the
trial log. The result is a :class:`RunSettings`
of frozen dataclasses (:class:`RigSettings` with its :class:`CanSettings`,
:class:`MocapSettings` and :class:`MqttSettings`; :class:`TrialSettings`;
:class:`SteeringSettings`; :class:`PlantSettings`), which
:mod:`aiko.experiments.trial.wiring` turns into a session.

Units are in the names where they are not SI (``limit_deg``,
``heading_deg``, ``backlash_deg``, ``mocap_noise_mm``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aiko.control.gait import JOINT_LIMIT
from aiko.control.preflight import OMEGA_MAX
from aiko.drivers.mocap import VICON_UDP_PORT
from aiko.drivers.mocap_sources import SERVED_KINDS
from aiko.experiments.files.rig_file import RigFile, find_rig_file, load_rig_file

from .options import (
    FAULT_KINDS,
    OPTION,
    OPTIONS,
    PLAN_KEY,
    MocapSpec,
    Option,
    SettingsError,
    checked_number,
    options_of,
    parse_mocap_spec,
)

__all__ = ["Option", "OPTIONS", "OPTION", "PLAN_KEY", "Setting", "SettingsError", "MocapSpec",
           "parse_mocap_spec", "build_settings", "plan_value", "RunSettings", "RigSettings",
           "CanSettings", "MocapSettings", "MqttSettings", "TrialSettings", "SteeringSettings",
           "PlantSettings", "Source", "without_password", "FAULT_KINDS", "checked_number",
           "options_of"]

Source = Literal["default", "file", "plan", "flag"]



_FROM_FILE_ONLY = {"mqtt_password_env": None, "trials_name": "trial-{time}"}
"""Settings only the rig file gives (the password's variable, the log name
pattern)."""

_MOCAP_PARTS = ("mocap_source", "mocap_host", "mocap_port")
"""What ``mocap`` stands for in the layers (the rig file has them apart)."""


# ---------------------------------------------------------------- layers


@dataclass(frozen=True)
class Setting:
    """A merged value and where it came from."""

    value: Any
    source: Source


def plan_value(key: str, value: Any) -> tuple[str, Any]:
    """A campaign entry's ``key`` (its flag's name with underscores:
    ``heading``, ``backlash_deg``) and value (TOML: a string, number, boolean
    or list) as (setting name, value), checked as the flag would be;
    SettingsError says why not."""
    opt = PLAN_KEY.get(key)
    if opt is None:
        raise SettingsError("unknown key (not an aiko run setting)", key)
    try:
        return opt.name, _coerce(opt, value)
    except ValueError as exc:
        raise SettingsError(str(exc), opt.name) from None


def _coerce(opt: Option, value: Any) -> Any:
    if opt.kind == "switch":
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, got {value!r}")
        return value
    if opt.kind == "list":
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str) for v in items):
            raise ValueError(f"must be a string or a list of strings, got {value!r}")
        return tuple(opt.parse_text(v) for v in items)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"must be a string or a number, got {value!r}")
    return opt.parse_text(repr(value) if isinstance(value, float) else str(value))


def _layer(values: Mapping[str, Any], source: Source) -> dict[str, Setting]:
    """A layer's settings, ``mocap`` spelled out; None and empty lists are not given."""
    out: dict[str, Setting] = {}
    for name, value in values.items():
        switch_off = name in OPTION and OPTION[name].kind == "switch" and value is False
        if value is None or value == () or switch_off:
            continue
        if name == "mocap":
            spec = value if isinstance(value, MocapSpec) else parse_mocap_spec(value)
            out["mocap_source"] = Setting(spec.source, source)
            if spec.host is not None:
                out["mocap_host"] = Setting(spec.host, source)
            if spec.port is not None:
                out["mocap_port"] = Setting(spec.port, source)
            continue
        out[name] = Setting(value, source)
    return out


def _defaults() -> dict[str, Setting]:
    """Every setting at its default, in the table's order (``mocap`` as its
    parts; the rig file's own after the broker's and the trials' settings)."""
    out: dict[str, Setting] = {}
    for o in options_of("run"):
        if o.name == "mocap":
            out.update({n: Setting(None, "default") for n in _MOCAP_PARTS})
        else:
            out[o.name] = Setting(o.default, "default")
        if o.name == "mqtt_ca":
            out["mqtt_password_env"] = Setting(_FROM_FILE_ONLY["mqtt_password_env"], "default")
        if o.name == "trials_folder":
            out["trials_name"] = Setting(_FROM_FILE_ONLY["trials_name"], "default")
    return out


# ---------------------------------------------------------------- typed settings


@dataclass(frozen=True)
class CanSettings:
    interface: str = "socketcan"
    channel: str = "can0"
    bitrate: int | None = None


@dataclass(frozen=True)
class MocapSettings:
    """``source`` None: the rig's own (the simulated Aiko's Tracker stream on
    the simulated rig, none on the robot); ``host``: the DataStream server;
    ``port``: where a Tracker UDP stream is listened to (None: 51001 on the
    robot, any free port on the simulated rig); ``rate``: the logging rate, Hz."""

    source: str | None = None
    host: str | None = None
    port: int | None = None
    subject: str = "link6"
    segment: str = "link6"
    rate: float = 20.0

    def on(self, rig: str) -> MocapSettings:
        """These settings with the source and port the rig implies."""
        source = self.source or ("vicon-udp" if rig == "simulated" else "none")
        port = self.port
        if rig == "robot" and source == "vicon-udp" and port is None:
            port = VICON_UDP_PORT
        return MocapSettings(source, self.host if source in SERVED_KINDS else None,
                             port, self.subject, self.segment, self.rate)

    @property
    def spec(self) -> str | None:
        """The ``--mocap`` spelling (``vicon-udp:51001``, ...)."""
        if self.source == "vicon-udp" and self.port is not None:
            return f"vicon-udp:{self.port}"
        if self.source in SERVED_KINDS:
            return f"{self.source}:{self.host}"
        return self.source


@dataclass(frozen=True)
class MqttSettings:
    """The broker's URL (None: no telemetry), its CA file, the environment
    variable holding its password, and whether the model's link 6 goes too."""

    url: str | None = None
    ca_file: str | None = None
    password_env: str | None = None
    model: bool = False


@dataclass(frozen=True)
class RigSettings:
    rig: Literal["simulated", "robot"] = "simulated"
    can: CanSettings = field(default_factory=CanSettings)
    nodes: int = 10
    limit_deg: float = math.degrees(JOINT_LIMIT)
    max_speed_deg_s: float = math.degrees(OMEGA_MAX)
    mocap: MocapSettings = field(default_factory=MocapSettings)
    mqtt: MqttSettings = field(default_factory=MqttSettings)
    trials_folder: str | None = None
    trials_name: str = "trial-{time}"
    live_host: str = "127.0.0.1"
    rig_file: Path | None = None


@dataclass(frozen=True)
class TrialSettings:
    duration: float | None = None
    force: bool = False
    ramp_time: float | None = None
    end: str = "hold"
    tolerate: tuple[str, ...] = ()
    startup_timeout: float = 2.0
    parallel_model: bool = True
    time: Literal["real", "virtual"] = "real"
    scene: str | None = None
    live: int | None = None
    foxglove: int | None = None


@dataclass(frozen=True)
class SteeringSettings:
    """Steering through motion capture (no target: none); degrees as named."""

    heading_deg: float | None = None
    path: str | None = None
    gain: float = 0.25
    ki: float = 0.015
    max_deg: float = 15.0
    hold: float = 1.0
    window: float | None = None

    @property
    def wanted(self) -> bool:
        return self.heading_deg is not None or self.path is not None


@dataclass(frozen=True)
class PlantSettings:
    """The simulated Aiko: a preset and what differs from it (None: the preset's)."""

    preset: Literal["realistic", "ideal"] = "realistic"
    backlash_deg: float | None = None
    servo: str | None = None
    mocap_noise_mm: float | None = None
    mocap_latency_ms: float | None = None
    mocap_occlusion: tuple[tuple[float, float], ...] = ()
    start_curve: str | None = None
    faults: tuple[str, ...] = ()
    seed: int | None = None
    mu: float | None = None
    mu_x: float | None = None
    mu_y: float | None = None


@dataclass(frozen=True)
class RunSettings:
    """Everything a trial is set up with, and where each value came from
    (``sources``: setting name -> :class:`Setting`)."""

    rig: RigSettings
    trial: TrialSettings
    steering: SteeringSettings
    plant: PlantSettings
    sources: Mapping[str, Setting]

    @property
    def simulated(self) -> bool:
        return self.rig.rig == "simulated"

    def describe(self) -> list[str]:
        """Lines for ``--check``: the rig file, then every setting, its value
        and where it came from (no password)."""
        rig_file = self.rig.rig_file
        lines = [f"rig file: {rig_file if rig_file is not None else 'none'}"]
        width = max(len(n) for n in self.sources)
        for name, s in self.sources.items():
            value = _shown(name, s.value)
            text = f"{value:.6g}" if isinstance(value, float) else str(value)
            lines.append(f"  {name:{width}s}  {text:24s}  ({s.source})")
        return lines

    def as_metadata(self) -> dict:
        """The settings for the trial log: value and source of each, the rig
        file's path; no password."""
        out = {name: {"value": _json(_shown(name, s.value)), "source": s.source}
               for name, s in self.sources.items()}
        rig_file = self.rig.rig_file
        return {"rig_file": None if rig_file is None else str(rig_file), "settings": out}


def _shown(name: str, value: Any) -> Any:
    return without_password(value) if name == "mqtt" else value


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def without_password(url: str | None) -> str | None:
    """A broker URL with any password taken out (what logs and tables keep)."""
    from urllib.parse import urlparse, urlunparse

    if url is None:
        return None
    u = urlparse(url)
    if u.password is None:
        return url
    netloc = u.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunparse(u._replace(netloc=f"{user}@{netloc[1]}"))


# ---------------------------------------------------------------- the one function


def build_settings(flags: Mapping[str, Any] | None = None, *, rig_file: str | Path | None = None,
                   entry: Mapping[str, Any] | None = None, cwd: Path | None = None,
                   look_for_rig_file: bool = True) -> RunSettings:
    """The settings of a trial: the defaults, then the rig file (``rig_file``,
    else, with ``look_for_rig_file``, ``aiko.toml`` in ``cwd`` or the working
    folder if there is one; a rig file describes the robot), then a campaign
    ``entry``'s settings (checked with :func:`plan_value`), then ``flags``
    (setting name -> value, None for a flag not given). RigFileError for a
    bad rig file, SettingsError for a value that cannot be used."""
    path = (find_rig_file(rig_file, cwd) if rig_file is not None or look_for_rig_file
            else None)
    rig = load_rig_file(path) if path is not None else None
    merged = _defaults()
    if rig is not None:   # a rig file describes the robot
        merged.update(_layer({"rig": "robot", **rig.settings}, "file"))
    if entry:
        merged.update(_layer(entry, "plan"))
    merged.update(_layer(_known(flags or {}), "flag"))
    return _typed(merged, rig)


def _known(flags: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(flags) - {o.name for o in options_of("run")})
    if unknown:
        raise SettingsError(f"{unknown[0]}: not a setting of a trial", unknown[0])
    return dict(flags)


def _typed(s: dict[str, Setting], rig_file: RigFile | None) -> RunSettings:
    v = {name: setting.value for name, setting in s.items()}
    _check_together(v)
    if v["mocap_source"] == "vicon-datastream" and s["mocap_segment"].source != "default":
        _check_segment(v)
    mocap = MocapSettings(source=v["mocap_source"], host=v["mocap_host"], port=v["mocap_port"],
                          subject=v["mocap_subject"], segment=v["mocap_segment"],
                          rate=v["mocap_rate"])
    mqtt = MqttSettings(url=v["mqtt"], ca_file=v["mqtt_ca"], password_env=v["mqtt_password_env"],
                        model=v["mqtt_model"])
    rig = RigSettings(
        rig=v["rig"], can=CanSettings(v["can_interface"], v["can_channel"], v["bitrate"]),
        nodes=v["nodes"], limit_deg=v["limit_deg"], max_speed_deg_s=v["max_speed_deg_s"],
        mocap=mocap, mqtt=mqtt, trials_folder=v["trials_folder"], trials_name=v["trials_name"],
        live_host=v["live_host"], rig_file=None if rig_file is None else rig_file.path)
    trial = TrialSettings(
        duration=v["duration"], force=v["force"], ramp_time=v["ramp_time"], end=v["end"],
        tolerate=tuple(v["tolerate"]), startup_timeout=v["startup_timeout"],
        parallel_model=not v["no_model"], time=v["time"], scene=v["scene"], live=v["live"],
        foxglove=v["foxglove"])
    steering = SteeringSettings(
        heading_deg=v["heading_deg"], path=v["path"], gain=v["steer_gain"], ki=v["steer_ki"],
        max_deg=v["steer_max_deg"], hold=v["steer_hold"], window=v["steer_window"])
    plant = PlantSettings(
        preset=v["plant"], backlash_deg=v["backlash_deg"], servo=v["servo"],
        mocap_noise_mm=v["mocap_noise_mm"], mocap_latency_ms=v["mocap_latency_ms"],
        mocap_occlusion=tuple(v["mocap_occlusion"]), start_curve=v["start_curve"], faults=tuple(v["plant_fault"]), seed=v["plant_seed"],
        mu=v["plant_mu"], mu_x=v["plant_mu_x"], mu_y=v["plant_mu_y"])
    return RunSettings(rig, trial, steering, plant, s)


def _check_together(v: dict[str, Any]) -> None:
    """What one setting alone cannot say."""
    if v["heading_deg"] is not None and v["path"] is not None:
        raise SettingsError("give either --heading or --path, not both", "path")
    if v["plant_mu"] is not None and (v["plant_mu_x"] is not None
                                      or v["plant_mu_y"] is not None):
        raise SettingsError("give either --plant-mu or --plant-mu-x/--plant-mu-y, not both",
                            "plant_mu")
    simulated = v["rig"] == "simulated"
    if v["start_curve"] is not None and not simulated:
        raise SettingsError("--start-curve places the simulated Aiko; the robot starts where "
                            "it lies", "start_curve")
    if v["plant_fault"] and not simulated:
        raise SettingsError("--plant-fault is for the simulated Aiko (--rig simulated)",
                            "plant_fault")
    if v["time"] == "virtual":
        _check_virtual(v)
    if v["mocap_source"] in SERVED_KINDS and not v["mocap_host"]:
        raise SettingsError(f"--mocap {v['mocap_source']} needs the server's host", "mocap")


def _check_segment(v: dict[str, Any]) -> None:
    """A segment given for the DataStream is its subject's own (the vendor's
    client reads a Tracker object: a subject whose one segment bears its name)."""
    if v["mocap_segment"] != v["mocap_subject"]:
        raise SettingsError(f"mocap segment {v['mocap_segment']!r}: the DataStream client reads "
                            "the segment named as its subject (a Tracker object), "
                            f"{v['mocap_subject']!r}", "mocap_segment")



def _check_virtual(v: dict[str, Any]) -> None:
    """Virtual time is the simulated rig's, on its own clock: no robot, no
    live view (a page or Foxglove watch the wall), no telemetry."""
    if v["rig"] != "simulated":
        raise SettingsError("--time virtual runs the simulated rig; the robot keeps real time",
                            "time")
    for name, flag in (("live", "--live"), ("foxglove", "--foxglove"), ("mqtt", "--mqtt")):
        if v[name] is not None:
            raise SettingsError(f"--time virtual with {flag}: a viewer watches in real time",
                                "time")
    if v["mocap_source"] not in (None, "vicon-udp"):
        raise SettingsError("--time virtual takes the simulated Aiko's motion capture, not "
                            f"--mocap {v['mocap_source']}", "time")
