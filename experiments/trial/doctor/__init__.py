"""``aiko doctor``: every part of the rig checked in a few seconds, before an
experiment day, without moving the robot.

* :mod:`.report`: :class:`~.report.DoctorConfig` (what to check),
  :class:`~.report.Check` (one row: the part, its status, what was seen, what to
  check) and :class:`~.report.DoctorReport`.
* :mod:`.bus`: the CAN adapter and each joint module (heartbeat, NMT state,
  SYNC answered with STATE; each module left in the state it was found in).
* :mod:`.services`: motion capture (frame rate, the subject seen) and the MQTT
  broker (a connection accepted).
* :mod:`.host`: this PC (room for a trial log in the trials folder, the model's
  kernels compiled).
* :func:`check_rig` runs them all and returns the report.

May import aiko.experiments.files and the core packages; never the command line.
"""

from .report import Check, DoctorConfig, DoctorReport, Status
from .run import check_rig

__all__ = ["check_rig", "Check", "DoctorConfig", "DoctorReport", "Status"]
