"""What the stack reads and writes on disk, and nothing else.

* :mod:`.tomlfile`: the one reader of hand-written TOML files; every reader
  below turns a missing, unreadable or malformed file into a one-line error
  through it.
* :mod:`.gait_file` (gaits), :mod:`.path_file` (paths to follow),
  :mod:`.start_curve` (start postures along a curve), :mod:`.scene_file`
  (pegs and steps).
* :mod:`.triallog`: the trial log, one MCAP file per trial, and its reader.

May import the core packages only (aiko.model, aiko.control for the gait's
dataclass); no other part of aiko.experiments.
"""
