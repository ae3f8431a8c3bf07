"""aiko.control: gait references, and (later) the streamer and supervisor.

The gait functions are pure; services take their bus and clock as arguments.
"""

from .gait import (JOINT_LIMIT, PRESETS, Gait, GaitError, get_gait, load_gait_toml,
                   references, soft_start_times)

__all__ = ["Gait", "GaitError", "PRESETS", "JOINT_LIMIT", "get_gait", "load_gait_toml",
           "references", "soft_start_times"]
