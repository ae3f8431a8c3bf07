"""Trials on the simulated rig in virtual time, for a lab's own tests.

A lab that adds a gait, a steering setting or a scene tests it the way the
stack tests itself: a whole trial on the simulated rig, in virtual time
(deterministic, no machine in it, a 15 s trial in seconds), and exact
assertions on what it logged::

    def test_my_gait_turns_left(aiko_trial):
        trial = aiko_trial("gaits/my-gait.toml", duration=10, plant="ideal")
        assert trial.reason == "completed" and trial.late_periods == 0
        assert trial.metrics["heading_experiment_deg"] > 60

``aiko_trial`` is a pytest fixture (this module is registered as the pytest
plugin ``aiko``: installed with the package, nothing to configure); outside
pytest, :func:`run_virtual_trial` does the same. The keyword arguments are
``aiko run``'s settings by name (:data:`aiko.experiments.trial.settings.OPTIONS`:
``duration``, ``plant``, ``heading_deg``, ``scene``, ``plant_fault``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # imported where used: pytest loads this plugin in every run
    from aiko.control.gait import Gait
    from aiko.experiments.files.triallog import TrialData
    from aiko.experiments.trial.fanout import Listener
    from aiko.experiments.trial.runner import TrialResult
    from aiko.experiments.trial.session import SessionReport

__all__ = ["VirtualTrial", "run_virtual_trial", "run_virtual_session", "aiko_trial"]


@dataclass(frozen=True)
class VirtualTrial:
    """A finished trial: its ``result`` and ``report`` (as ``aiko run``
    prints them), its ``log`` read back, where the log is (``path``)."""

    result: TrialResult
    report: SessionReport
    log: TrialData
    path: Path

    @property
    def reason(self) -> str:
        """completed, fault, interrupted or nodes_missing."""
        return self.result.reason

    @property
    def late_periods(self) -> int:
        return self.result.stream.late

    @property
    def metrics(self) -> dict | None:
        """The comparison's metrics (None without the parallel model)."""
        return self.report.metrics

    def events(self, kind: str | None = None) -> list[tuple[float, dict]]:
        """The log's /events of this kind (all without one): (t, record)."""
        return self.log.events(kind)

    @property
    def faults(self) -> list[tuple[float, dict]]:
        """The faults the supervisor stopped the trial for: (t, data)."""
        return [(t, e["data"]) for t, e in self.log.events("fault")]


def run_virtual_trial(gait: str | Gait, out: str | Path, *,
                      listeners: Sequence[Listener] = (),
                      rig_file: str | Path | None = None, **settings: Any) -> VirtualTrial:
    """Run ``gait`` (a preset's name, a gait file or a Gait) on the simulated
    rig in virtual time with these settings (``aiko run``'s, by name), its
    log written to ``out``; ``listeners`` get the trial's records as it runs.
    Without ``rig_file`` no rig file is read (a rig file describes a robot)."""
    from aiko.experiments.files.triallog import read_trial

    result, report = run_virtual_session(gait, out, listeners=listeners, rig_file=rig_file,
                                         **settings)
    return VirtualTrial(result, report, read_trial(out), Path(out))


def run_virtual_session(gait: str | Gait, out: str | Path, *,
                        listeners: Sequence[Listener] = (),
                        rig_file: str | Path | None = None,
                        **settings: Any) -> tuple[TrialResult, SessionReport]:
    """:func:`run_virtual_trial` without reading the log back: the trial's
    (result, report) only (a benchmark's timing, a caller that reads the log
    its own way)."""
    from aiko.control.gait import Gait
    from aiko.drivers.virtual_time import run_virtual
    from aiko.experiments.files.gait_file import get_gait
    from aiko.experiments.trial.session import SessionReport, run_session
    from aiko.experiments.trial.settings import build_settings
    from aiko.experiments.trial.wiring import session_config

    g = gait if isinstance(gait, Gait) else get_gait(str(gait))
    s = build_settings({"time": "virtual", **settings}, rig_file=rig_file,
                       look_for_rig_file=False)
    report = SessionReport()
    result = run_virtual(run_session(session_config(s, g, Path(out)), g, report,
                                     listeners=listeners))
    return result, report


def _trials_in(folder: Path) -> Callable[..., VirtualTrial]:
    count = 0

    def run(gait: str | Gait, **settings: Any) -> VirtualTrial:
        nonlocal count
        count += 1
        return run_virtual_trial(gait, folder / f"trial-{count}.mcap", **settings)
    return run


try:   # the fixture is pytest's; the rest of the module works without it
    import pytest
except ImportError:  # pragma: no cover - an installation without the test extras
    pytest = None  # type: ignore[assignment]

if pytest is not None:
    @pytest.fixture
    def aiko_trial(tmp_path: Path) -> Callable[..., VirtualTrial]:
        """``aiko_trial(gait, **settings)``: :func:`run_virtual_trial` with its
        log in the test's temporary folder (``trial-1.mcap``, ``trial-2.mcap``,
        ... for several trials in one test)."""
        return _trials_in(tmp_path)
