"""One trial on the simulated rig or the robot, and the session around it.

* :mod:`.session`: a whole experiment as ``aiko run`` runs it (rig, parallel
  model, log, trial, comparison, clean-up): :func:`~.session.run_session`.
* :mod:`.runner`: :func:`~.runner.run_trial`, a short wiring of the trial's
  services into one TaskGroup; :class:`~.runner.TrialConfig`,
  :class:`~.runner.TrialResult`.
* :mod:`.services`: the trial's parts, each an object owning its state and
  running as one named task (CAN dispatcher, stream phases, mocap sink, model
  start, child watch, reporter), and the state they share.
* :mod:`.fanout`: :class:`~.fanout.Fanout` hands every record of the trial
  (period, joint state, mocap sample, model sample, steering, event, status)
  to its listeners (trial log, telemetry, live views). A new listener is one
  class with ``on_record`` and one line in :func:`~.runner.run_trial`'s
  wiring (see :mod:`.fanout`).
* :mod:`.processes`: the one owner of the processes a trial starts.
* :mod:`.model_link`: the trial's side of the parallel model's process.

May import aiko.experiments.analysis, .rig and .files, and the core packages;
never the command line.
"""
