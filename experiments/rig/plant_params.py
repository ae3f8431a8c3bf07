"""What makes the simulated Aiko differ from the ideal model: its settings,
apart from the plant (:mod:`aiko.experiments.rig.plant`) so that the command
line and the trial's configuration read them without loading the physics."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiko.model.errors import ParameterError
from aiko.model.params import SolverParams

if TYPE_CHECKING:
    from aiko.firmware_interface.emulator import JointModelParams

__all__ = ["PlantParams"]


@dataclass(frozen=True)
class PlantParams:
    """What makes the simulated robot differ from the ideal model.

    backlash_deg: free play between motor and link (deg, 3-5 on Aiko);
    servo: ``"module"`` (the firmware's duty- and speed-limited servo) or
    ``"ideal"`` (the motor is at its reference at every instant);
    mocap_noise_mm: standard deviation of white noise on every coordinate;
    mocap_latency_ms: age of the positions in each datagram; mocap_rate: datagrams
    per second (100 Hz like a Vicon system); mocap_occlusion: windows (t0, t1)
    of the robot's time, s, in which motion capture sees no link; mu_x, mu_y: the floor's friction
    (None: the trial's); seed: of the noise; u_tol, max_iter: the contact
    solver's velocity tolerance and iteration cap for the plant's physics
    (:class:`~aiko.model.SolverParams`): the robot's stand-in needs no 1e-8 m/s
    agreement, and with the free play the soft start took up to 500 sweeps per
    step at 1e-8 m/s (the realistic plant then fell 0.8 s behind real time);
    1e-7 m/s and 100 sweeps ran the same first 3 s 2.4x faster with link 6
    within 0.1 mm. The model's default is now 1e-6 m/s (with implicit drives
    and contact springs at 1 ms), and so is the plant's: against 1e-7 over 8 s
    of each preset (``benchmarks/plant_step.py``) link 6 ends within 5.5 mm
    in sidewinding (0.7 % of its 0.81 m path) and 0.0 mm in both lateral
    undulations, for 8-40 % less CPU (lateral undulation 0.86 -> 0.52 of a
    core, orthotropic 1.04 -> 0.65: what the rig's physics must keep up
    with). Since then 1e-5 m/s: against 1e-7 over 8 s link 6 ends within
    1.1 mm in sidewinding (0.4 mm RMS, 0.1 % of the path; 1e-6: 0.7 mm) and
    0.0 mm in both lateral undulations, with 4-6 sweeps a step instead of
    9-10 (CPU of the plant with its modules' ticks: orthotropic 0.58 -> 0.34
    of a core, lateral undulation 0.43 -> 0.34, sidewinding 0.33 -> 0.28):
    inside the rig, on two busy cores, the physics' chunks at the gait's
    costliest phases took longer than the time they simulate. The plant keeps the time step ``dt`` (0.5 ms) it was validated
    with: the physics catching up behind the modules with their record stays
    within 2 mm of a plant that keeps up over 1 s of a 4-link wave at 0.5 ms,
    11 mm at 1 ms (stick-slip amplifies the difference); at 1 ms lateral
    undulation needs twice the sweeps a step and costs as much. The cap is 30 sweeps: the free play's start transient
    (the gait's first 0.5 s) needed 52 sweeps a step on average at a cap of
    100, 313 of its 1000 steps at the cap, and cost 1.1-1.5 s of one core on
    the 2-core machine, so the physics fell 0.4-0.8 s behind real time in a
    trial; at 30 it costs 0.6 s, the trial's lag stays under 0.1 s, and link
    6 after 15 s is 3 mm from the cap of 100 in sidewinding (0.77 m travelled),
    0.0001 mm in lateral undulation. :meth:`ideal` uses the model's own
    settings.
    """

    backlash_deg: float = 4.0
    servo: str = "module"
    mocap_noise_mm: float = 0.5
    mocap_latency_ms: float = 0.0
    mocap_rate: float = 100.0
    # windows (t0, t1) of the simulated Aiko's time, s, in which motion capture sees no link
    mocap_occlusion: tuple[tuple[float, float], ...] = ()
    mu_x: float | None = None
    mu_y: float | None = None
    seed: int = 0
    u_tol: float = 1e-5
    max_iter: int = 30
    dt: float = 0.0005
    start_curve: str | None = None   # a curve file: the robot starts at rest along it
    # or at rest with these joint angles, rad: ((alpha_h, alpha_v) per joint), e.g.
    # a gait's start posture (a curve file's ``gait = true``)
    start_joint_angles: tuple[tuple[float, float], ...] | None = None
    # faults the emulated modules inject (``NODE:KIND[=V][@T]``, as ``aiko emulate --fault``)
    faults: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.servo not in ("module", "ideal"):
            raise ParameterError("servo", self.servo, "must be 'module' or 'ideal'")
        for name in ("backlash_deg", "mocap_noise_mm", "mocap_latency_ms"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ParameterError(name, v, "must be a finite number >= 0")
        for t0, t1 in self.mocap_occlusion:
            if not (math.isfinite(t0) and math.isfinite(t1) and 0 <= t0 < t1):
                raise ParameterError("mocap_occlusion", (t0, t1), "must be 0 <= t0 < t1")
        if not (math.isfinite(self.mocap_rate) and self.mocap_rate > 0):
            raise ParameterError("mocap_rate", self.mocap_rate, "must be positive")
        if not (math.isfinite(self.dt) and self.dt > 0):
            raise ParameterError("dt", self.dt, "must be positive")
        for name in ("mu_x", "mu_y"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ParameterError(name, v, "must be a finite number >= 0")

    @classmethod
    def ideal(cls, **changes) -> PlantParams:
        """Every imperfection off."""
        model = SolverParams()
        return cls(**{"backlash_deg": 0.0, "servo": "ideal", "mocap_noise_mm": 0.0,
                      "mocap_latency_ms": 0.0, "u_tol": model.u_tol,
                      "max_iter": model.max_iter, "dt": model.dt, **changes})

    @classmethod
    def realistic(cls, **changes) -> PlantParams:
        """Aiko as the lab has it: 4 degrees of free play, the module's servo,
        0.5 mm of mocap noise."""
        return cls(**changes)

    def solver_params(self) -> SolverParams:
        """The plant's time-stepping settings."""
        return SolverParams(dt=self.dt, u_tol=self.u_tol, max_iter=self.max_iter)

    def joint_params(self) -> JointModelParams:
        """The emulated modules' motor model for these settings."""
        from aiko.firmware_interface.emulator import JointModelParams
        return JointModelParams(backlash=math.radians(self.backlash_deg),
                                ideal=self.servo == "ideal")
