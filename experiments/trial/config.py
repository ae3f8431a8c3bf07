"""What defines a trial (:class:`TrialConfig`, stored in the trial log's
metadata): the gait, the joints, the rig's bus and motion capture, the fault
policy, the ramp and the end, steering, the preflight's limits."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiko.control.gait import JOINT_LIMIT
from aiko.control.preflight import OMEGA_MAX
from aiko.control.steering import SteeringConfig
from aiko.control.supervisor import FaultPolicy

__all__ = ["TrialConfig", "END_CHOICES"]

END_CHOICES = ("hold", "straight")
"""How a trial that ran its duration ends: hold the last posture, or ramp
every joint to 0 first."""

@dataclass(frozen=True)
class TrialConfig:
    """Everything that defines a trial (stored in the log's metadata)."""

    gait: str
    nodes: int = 10
    duration: float | None = None
    period: float = 0.1
    startup_timeout: float = 2.0
    rig: str = "robot"
    can_interface: str = "socketcan"
    can_channel: str = "can0"
    bitrate: int | None = None
    mocap: str = "none"
    mocap_subject: str = "link6"
    mocap_segment: str = "link6"
    mocap_rate: float = 20.0
    mqtt: str | None = None
    policy: FaultPolicy = field(default_factory=FaultPolicy)
    ramp_time: float | None = None   # None: the automatic duration
    end: str = "hold"                # or "straight"
    force: bool = False              # stream a gait the preflight refused
    steering: SteeringConfig | None = None   # close the loop through motion capture
    limit: float = JOINT_LIMIT       # rad, the joints' limit the preflight checks
    omega_max: float = OMEGA_MAX     # rad/s, the motors' full-duty speed (preflight)

    def __post_init__(self) -> None:
        if self.end not in END_CHOICES:
            raise ValueError(f"end must be one of {', '.join(END_CHOICES)}, got {self.end!r}")
        if self.ramp_time is not None and not self.ramp_time >= 0:
            raise ValueError(f"ramp_time must be >= 0, got {self.ramp_time!r}")
