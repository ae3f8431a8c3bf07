"""aiko.control: gait references, the 10 Hz reference streamer, the supervisor,
the ramp, the preflight and the steering loop.

The gait functions are pure; services take their bus and clock as arguments.
Gait files are read by :mod:`aiko.experiments.files.gait_file`.
"""

from .gait import JOINT_LIMIT, PRESETS, Gait, GaitError, references, soft_start_times

__all__ = ["Gait", "GaitError", "PRESETS", "JOINT_LIMIT", "references", "soft_start_times"]
