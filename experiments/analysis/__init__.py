"""The work after a trial, and offline work on the model: it reads trial
logs (:mod:`aiko.experiments.files.triallog`), never the runner's internals.

* comparison and replay: :mod:`.compare` (simulation against experiment, the
  paper's figures), :mod:`.replay` (one logged trial against the model),
  :mod:`.replay_files` (``aiko replay``'s files and summary), :mod:`.delay`;
* identification and search: :mod:`.fit`, :mod:`.sweep`, :mod:`.optimize`,
  :mod:`.optimize_run`, :mod:`.bounds` (the ``--bounds`` they share) and
  :mod:`.executor` (a process pool or a Dask cluster);
* the model offline: :mod:`.simulate` (``aiko simulate``'s engine),
  :mod:`.preview` (a head path through the tractrix);
* reports and formats: :mod:`.export` (CSV, ASC, BLF, ``aiko info``),
  :mod:`.steering_report`.

May import aiko.experiments.rig and .files and the core packages.
"""
