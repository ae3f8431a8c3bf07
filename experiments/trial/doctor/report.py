"""What ``aiko doctor`` checks and what it found: one :class:`Check` a part."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

from aiko.drivers.telemetry import MqttConfig

__all__ = ["Status", "Check", "DoctorConfig", "DoctorReport"]


class Status(StrEnum):
    """A part's verdict. Only FAIL makes the rig not ready."""

    OK = "ok"
    WARN = "warn"      # works, but something deserves a look
    FAIL = "fail"      # a trial would not run, or not as planned
    OFF = "off"        # not configured (no motion capture, no broker)
    SKIP = "skip"      # not checked: a part it needs failed


@dataclass(frozen=True)
class Check:
    """One row of the table: ``part`` (e.g. "joint 3"), its status, what was
    seen and, unless it is ok, what to check."""

    part: str
    status: Status
    seen: str
    hint: str = ""


@dataclass(frozen=True)
class DoctorConfig:
    """The rig to check, from the merged rig settings (rig file and flags).

    ``mqtt_problem`` is a reason the broker cannot even be tried (its password's
    environment variable not set); ``trial_duration`` (s) is the longest trial
    the disk must hold. The windows are how long each check listens (s)."""

    can_interface: str = "socketcan"
    can_channel: str = "can0"
    bitrate: int | None = None
    nodes: int = 10
    mocap_source: str = "none"
    mocap_host: str | None = None
    mocap_port: int | None = None
    mocap_subject: str = "link6"
    mocap_segment: str = "link6"
    mocap_rate: float = 20.0
    mqtt: MqttConfig | None = None
    mqtt_problem: str | None = None
    trials_folder: Path = Path(".")
    trial_duration: float = 600.0
    kernels: bool = True
    heartbeat_window: float = 0.5
    heartbeat_grace: float = 1.0
    mocap_window: float = 1.0
    mqtt_timeout: float = 3.0

    @property
    def heartbeat_limit(self) -> float:
        """The longest the check listens for a module's heartbeat (s)."""
        return self.heartbeat_window + self.heartbeat_grace


@dataclass
class DoctorReport:
    """Every row, in the order checked, and the seconds the checks took."""

    checks: list[Check] = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def ready(self) -> bool:
        return not self.failed

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == Status.FAIL]

    def to_dict(self) -> dict:
        return {"ready": self.ready, "elapsed_s": self.elapsed,
                "checks": [{**asdict(c), "status": c.status.value} for c in self.checks]}
