"""From settings to the parts of a session: the one place where
:class:`~aiko.experiments.trial.settings.RunSettings` become a
:class:`~aiko.experiments.trial.session.SessionConfig` (its
:class:`~aiko.experiments.trial.config.TrialConfig`, the simulated Aiko's
:class:`~aiko.experiments.rig.plant_params.PlantParams`, steering, telemetry,
the live views, the scene, the log's path) or the rig's
:class:`~aiko.experiments.trial.doctor.DoctorConfig`. ``aiko run``, ``aiko
campaign``, ``aiko doctor`` and Python users build them here::

    settings = build_settings({"nodes": 3, "duration": 5.0}, rig_file="aiko.toml")
    config = session_config(settings, get_gait("sidewinding"))
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from aiko.control.faults import FAULT
from aiko.control.gait import Gait
from aiko.control.steering import SteeringConfig
from aiko.control.supervisor import FaultPolicy
from aiko.drivers.can_bus import check_interface
from aiko.drivers.telemetry import MqttConfig
from aiko.experiments.files.campaign_plan import Entry, Plan, PlanError
from aiko.experiments.files.folders import FolderError, make_folder
from aiko.experiments.files.path_file import load_path_toml
from aiko.experiments.files.rig_file import RIG_FILE_NAME, mqtt_password, trial_stem
from aiko.experiments.files.scene_file import load_scene
from aiko.experiments.files.triallog import free_log_path
from aiko.experiments.rig.plant_params import PlantParams
from aiko.firmware_interface.faults import FaultSpecError, faults_by_node

from .config import TrialConfig
from .doctor import DoctorConfig
from .session import SessionConfig
from .settings import (
    MqttSettings,
    PlantSettings,
    RigSettings,
    RunSettings,
    SettingsError,
    SteeringSettings,
    build_settings,
    plan_value,
    without_password,
)

__all__ = ["session_config", "entry_settings", "trial_config", "trial_duration", "plant_params",
           "steering_config", "mqtt_config",
           "doctor_config", "default_out", "SIMULATED_DURATION"]

SIMULATED_DURATION = 15.0
"""Default trial length on the simulated rig, s (the paper's 15 s runs)."""


def session_config(settings: RunSettings, gait: Gait, out: Path | None = None) -> SessionConfig:
    """The session of these settings for ``gait`` (a preset or a gait file
    as loaded); ``out``: the trial log (default: the rig's trials folder and
    name pattern). SettingsError, RigFileError, SceneError, PathFileError
    for settings that cannot be used."""
    rig, trial = settings.rig, settings.trial
    mocap = rig.mocap.on(rig.rig)
    live_at = (lambda port: None if port is None else (rig.live_host, port))
    return SessionConfig(
        trial=trial_config(settings, gait), out=out or default_out(rig, gait.name),
        plant=plant_params(settings.plant, rig.nodes), scene=load_scene(trial.scene),
        parallel_model=trial.parallel_model, mocap_host=mocap.host, mocap_port=mocap.port,
        mqtt=mqtt_config(rig.mqtt, rig.rig_file), mqtt_model=rig.mqtt.model,
        live=live_at(trial.live), foxglove=live_at(trial.foxglove),
        settings=settings.as_metadata(), time=trial.time)


def entry_settings(plan: Plan, entry: Entry, flags: Mapping[str, Any] | None = None
                   ) -> RunSettings:
    """The settings of a campaign entry's trials: the defaults, the plan's rig
    file (or ./aiko.toml), the entry's settings and its duration, then the
    campaign's ``flags`` (``--time``). PlanError names the entry and key."""
    where = f"trial {plan.entries.index(entry) + 1} ({entry.name})"
    values = {}
    for key, value in entry.settings:
        try:
            name, checked = plan_value(key, value)
        except SettingsError as exc:
            raise PlanError(str(plan.path), exc.reason, f"{where}.{key}") from exc
        values[name] = checked
    values["duration"] = entry.duration
    try:
        return build_settings(flags, entry=values, rig_file=plan.rig_file)
    except SettingsError as exc:
        raise PlanError(str(plan.path), exc.reason, where) from exc


def trial_config(settings: RunSettings, gait: Gait) -> TrialConfig:
    """The trial's configuration (what the log's metadata keeps)."""
    rig, trial = settings.rig, settings.trial
    simulated = settings.simulated
    mocap = rig.mocap.on(rig.rig)
    policy = FaultPolicy(stop_on_current_limit=FAULT["current_limit"].tolerate not in trial.tolerate,
                         stop_on_encoder_fault=FAULT["encoder_fault"].tolerate not in trial.tolerate)
    return TrialConfig(
        gait=gait.name, nodes=rig.nodes, duration=trial_duration(settings), rig=rig.rig,
        can_interface="slcan" if simulated else rig.can.interface,
        can_channel="(the simulated Aiko's)" if simulated else rig.can.channel,
        bitrate=rig.can.bitrate, mocap=mocap.spec or "none", mocap_subject=mocap.subject,
        mocap_segment=mocap.segment, mocap_rate=mocap.rate,
        mqtt=without_password(rig.mqtt.url), startup_timeout=trial.startup_timeout,
        policy=policy, limit=math.radians(rig.limit_deg),
        omega_max=math.radians(rig.max_speed_deg_s), ramp_time=trial.ramp_time,
        end=trial.end, force=trial.force, steering=steering_config(settings.steering))


def trial_duration(settings: RunSettings) -> float | None:
    """The trial's length, s: as set, else 15 s on the simulated rig, else
    None (until Ctrl-C on the robot)."""
    if settings.trial.duration is None and settings.simulated:
        return SIMULATED_DURATION
    return settings.trial.duration


def plant_params(plant: PlantSettings, nodes: int) -> PlantParams:
    """The simulated Aiko of these settings: the preset with what differs."""
    base = PlantParams.ideal() if plant.preset == "ideal" else PlantParams.realistic()
    changes: dict = {name: getattr(plant, name) for name in
                     ("backlash_deg", "servo", "mocap_noise_mm", "mocap_latency_ms",
                      "start_curve") if getattr(plant, name) is not None}
    if plant.faults:
        try:
            by_node = faults_by_node(list(plant.faults))
        except FaultSpecError as exc:
            raise SettingsError(f"--plant-fault: {exc}", "plant_fault") from None
        for node in by_node:
            if node > nodes:
                raise SettingsError(f"--plant-fault for node {node}, but only nodes 1..{nodes} "
                                    "exist", "plant_fault")
        changes["faults"] = tuple(plant.faults)
    if plant.mocap_occlusion:
        changes["mocap_occlusion"] = tuple(plant.mocap_occlusion)
    if plant.seed is not None:
        changes["seed"] = plant.seed
    if plant.mu is not None:
        changes["mu_x"] = changes["mu_y"] = plant.mu
    if plant.mu_x is not None:
        changes["mu_x"] = plant.mu_x
    if plant.mu_y is not None:
        changes["mu_y"] = plant.mu_y
    return replace(base, **changes)


def steering_config(steering: SteeringSettings) -> SteeringConfig | None:
    """The steering laws' configuration (radians), or None without a target."""
    if not steering.wanted:
        return None
    laws = SteeringConfig(heading=0.0, k_p=steering.gain, k_i=steering.ki,
                          phi_max=math.radians(steering.max_deg), hold=steering.hold,
                          window=steering.window)
    if steering.heading_deg is not None:
        return replace(laws, heading=math.radians(steering.heading_deg))
    assert steering.path is not None
    spec = load_path_toml(steering.path)
    return replace(laws, heading=None, waypoints=spec.waypoints, lookahead=spec.lookahead,
                   accept=spec.accept)


def mqtt_config(mqtt: MqttSettings, rig_file: Path | None) -> MqttConfig | None:
    """The broker's settings (None without a broker): the URL, its CA file,
    the password from the environment variable the rig file names
    (RigFileError when that variable is not set)."""
    if not mqtt.url:
        return None
    cfg = MqttConfig.from_url(mqtt.url, mqtt.ca_file)
    password = mqtt_password(mqtt.password_env, str(rig_file or RIG_FILE_NAME))
    return cfg if password is None else replace(cfg, password=password)


def default_out(rig: RigSettings, gait_name: str) -> Path:
    """The trial log's path from the rig's trials folder and name pattern (the
    folder made if need be), never an existing file."""
    folder = Path(rig.trials_folder) if rig.trials_folder else Path(".")
    if rig.trials_folder:
        try:
            make_folder(folder)
        except FolderError as exc:
            raise SettingsError(f"trials folder {exc}", "trials_folder") from None
    return free_log_path(trial_stem(rig.trials_name, gait_name), folder)


def doctor_config(rig: RigSettings, trial_duration: float = 600.0,
                  kernels: bool = True) -> DoctorConfig:
    """The rig to check: the bus, the modules, motion capture, the broker
    (a password variable not set is the broker's row failing, not bad input),
    the trials folder's disk; ``trial_duration`` the longest trial planned, s."""
    from aiko.experiments.files.rig_file import RigFileError

    check_interface(rig.can.interface, rig.can.channel)
    mqtt, problem = None, None
    try:
        mqtt = mqtt_config(rig.mqtt, rig.rig_file)
    except RigFileError as exc:
        problem = str(exc)
    mocap = rig.mocap.on("robot")
    return DoctorConfig(
        can_interface=rig.can.interface, can_channel=rig.can.channel, bitrate=rig.can.bitrate,
        nodes=rig.nodes, mocap_source=mocap.source or "none", mocap_host=mocap.host,
        mocap_port=rig.mocap.port, mocap_subject=mocap.subject, mocap_segment=mocap.segment,
        mocap_rate=mocap.rate, mqtt=mqtt, mqtt_problem=problem,
        trials_folder=Path(rig.trials_folder or "."), trial_duration=trial_duration,
        kernels=kernels)
