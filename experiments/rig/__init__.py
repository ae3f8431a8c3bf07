"""The simulated Aiko and the parallel model.

* :mod:`.plant`: the simulated Aiko's physics behind the emulated joint
  modules (free play, servo, torque saturation, logging delay) and what motion
  capture sees of it.
* :mod:`.simrig`: the simulated rig (emulated modules behind an slcan adapter
  on TCP, the plant, a Vicon Tracker UDP source), run by ``aiko emulate``.
* :mod:`.parallel_model`: the ideal model fed the references as they are sent,
  in its own process (``python -m aiko.experiments.rig.parallel_model``).
* :mod:`.alignment`: the start posture and placement both models start from.

May import aiko.experiments.files and the core packages only.
"""
