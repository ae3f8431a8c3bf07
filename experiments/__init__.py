"""aiko.experiments: the shell around the pure core. Everything that owns
sockets, tasks, clocks, processes and files, by concern:

============  ==========================================================  ====================
package       its job                                                     may import
============  ==========================================================  ====================
``cli``       the ``aiko`` command: one thin module per subcommand         everything below
``trial``     one trial on the rig or the robot: the session, the runner   analysis, rig, files
              as small composed services, the record fan-out, the child
              processes, the link to the parallel model
``analysis``  the work after a trial and offline: comparison, replay,      rig, files
              delay, fit, sweep, optimisation, export, offline
              simulation, previews, steering reports
``rig``       the simulated Aiko (plant, emulated rig) and the parallel    files
              model's process, with the start alignment both share
``files``     what is read and written on disk: the one TOML reader and    (nothing above)
              the gait, path, start-curve and scene files on it; the
              trial log (MCAP)
============  ==========================================================  ====================

Every package may import aiko.control, aiko.drivers, aiko.firmware_interface
and aiko.model; none of those imports this one. The import-linter contracts in
pyproject.toml hold these rules (``lint-imports`` in .ci/run).
"""
