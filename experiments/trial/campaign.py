"""A campaign: the trials of a plan (:mod:`aiko.experiments.files.campaign_plan`)
run one after another into the campaign's folder, with an index that
survives any stop.

The folder holds ``campaign.json`` (the plan as it was when the campaign
started: a resume refuses a changed plan and says what changed),
``campaign.csv`` (the index: one row per trial run, skipped or aborted, appended
and fsynced, never rewritten) and the logs ``<entry>-<rep>.mcap`` (a redo or a
rerun gets ``<entry>-<rep>-2.mcap``, ...).

:class:`Campaign` is the loop; the trial itself is a callable the caller
gives (``aiko campaign`` runs each as ``aiko run`` would), and so is the
operator's answer between trials: the loop does no terminal I/O.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiko.experiments.files.campaign_index import METRICS, CampaignIndex, index_of
from aiko.experiments.files.campaign_plan import Entry, Plan, load_plan, schedule
from aiko.experiments.files.triallog import free_log_path
from aiko.model.errors import AikoError

__all__ = ["Campaign", "CampaignError", "CampaignResult", "TrialRun", "Outcome", "Upcoming",
           "plan_changes", "virtual_trial_outcome"]

DONE = ("completed", "skipped")


class CampaignError(AikoError):
    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True)
class TrialRun:
    """One trial to run: its entry, repetition and log."""

    entry: Entry
    repetition: int
    out: Path


@dataclass
class Outcome:
    """What a trial gave: ``outcome`` one of completed, fault, aborted;
    ``metrics`` the comparison's; ``note`` the fault; ``posture`` what was
    last measured of the robot (for the operator's next prompt)."""

    outcome: str
    metrics: dict | None = None
    note: str = ""
    posture: str = ""


@dataclass(frozen=True)
class Upcoming:
    """What the operator is asked about: the next trial and the last one."""

    entry: Entry
    repetition: int
    position: int        # 1-based among the trials left when the campaign (re)started
    total: int
    last: tuple[Entry, int, Outcome] | None


def plan_changes(old: dict, new: dict) -> list[str]:
    """What differs between two canonical plans, in words."""
    out = [f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in ("name", "order", "seed", "rig_file")
           if old.get(k) != new.get(k)]
    before = {e["name"]: e for e in old.get("entries", [])}
    after = {e["name"]: e for e in new.get("entries", [])}
    out += [f"trial {n!r} removed" for n in before if n not in after]
    out += [f"trial {n!r} added" for n in after if n not in before]
    for n in before:
        if n not in after:
            continue
        a, b = before[n], after[n]
        for k in ("gait", "duration", "repetitions"):
            if a[k] != b[k]:
                out.append(f"trial {n!r} {k} {a[k]!r} -> {b[k]!r}")
        for k in sorted(set(a["settings"]) | set(b["settings"])):
            if a["settings"].get(k) != b["settings"].get(k):
                out.append(f"trial {n!r} {k} {a['settings'].get(k)!r} -> "
                           f"{b['settings'].get(k)!r}")
    if not out and [e["name"] for e in old.get("entries", [])] != list(after):
        out.append("the trials' order")
    return out


@dataclass
class CampaignResult:
    ran: list[tuple[Entry, int, Outcome]] = field(default_factory=list)
    stopped: str | None = None     # why the campaign stopped early (None: it ran to the end)


class Campaign:
    """The campaign of ``plan`` in its folder (created on :meth:`open`)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.folder = plan.folder
        self.index = CampaignIndex(self.folder)
        self.stamp = self.folder / "campaign.json"

    def check(self) -> None:
        """CampaignError unless the folder is free or holds this campaign
        under the same plan. Creates nothing."""
        where = str(self.folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise CampaignError(where, "is a file, not a campaign folder")
        if not self.stamp.exists():
            if self.index.path.exists():
                raise CampaignError(where, "holds a campaign index (campaign.csv) without its "
                                           "campaign.json: another campaign's folder?")
            return
        try:
            stored = json.loads(self.stamp.read_text())
        except (OSError, ValueError) as exc:
            raise CampaignError(str(self.stamp), f"unreadable ({exc})") from exc
        plan = stored.get("plan", {}) if isinstance(stored, dict) else {}
        if plan.get("name") != self.plan.name:
            raise CampaignError(where, f"holds campaign {plan.get('name')!r}, not "
                                       f"{self.plan.name!r}")
        changes = plan_changes(plan, self.plan.canonical())
        if changes:
            raise CampaignError(str(self.plan.path), "the plan changed since the campaign "
                                                     "started: " + "; ".join(changes))

    def open(self) -> None:
        """Check, then make the folder and keep the plan in it."""
        self.check()
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self.stamp.exists():
            tmp = self.stamp.with_suffix(".json.tmp")
            tmp.write_text(json.dumps({"plan": self.plan.canonical(),
                                       "started": time.strftime("%Y-%m-%dT%H:%M:%S")},
                                      indent=1))
            os.replace(tmp, self.stamp)

    def _orphans(self) -> None:
        """Logs in the folder that the index does not name: the trials a
        killed campaign was running. Each gets an "aborted" row."""
        named = {r["file"] for r in self.index.rows()}
        for log in sorted(self.folder.glob("*.mcap")):
            if log.name in named:
                continue
            for entry, rep in schedule(self.plan):
                stem = f"{entry.name}-{rep}"
                rest = log.stem[len(stem):]
                if log.stem.startswith(stem) and (rest == "" or (rest[:1] == "-"
                                                                 and rest[1:].isdigit())):
                    started = time.strftime("%Y-%m-%dT%H:%M:%S",
                                            time.localtime(log.stat().st_mtime))
                    self._record(entry, rep, log, started, Outcome(
                        "aborted", None, "the campaign was stopped during this trial "
                                         "(its log ends early)"))
                    break

    def pending(self) -> list[tuple[Entry, int]]:
        """The scheduled trials whose latest row is not completed or skipped."""
        done = {(r["entry"], r["repetition"]) for r in index_of(self.folder)
                if r["outcome"] in DONE}
        return [(e, rep) for e, rep in schedule(self.plan) if (e.name, str(rep)) not in done]

    def _plan_changed(self) -> str | None:
        try:
            now = load_plan(self.plan.path)
        except AikoError as exc:
            return f"the plan file cannot be read any more: {exc}"
        changes = plan_changes(self.plan.canonical(), now.canonical())
        return "the plan changed: " + "; ".join(changes) if changes else None

    def _record(self, entry: Entry, rep: int, out: Path | None, started: str,
                result: Outcome) -> None:
        metrics = result.metrics or {}
        self.index.append({"entry": entry.name, "repetition": rep,
                           "file": "" if out is None else out.name, "start_time": started,
                           "outcome": result.outcome, "note": result.note,
                           **{k: metrics.get(k, "") for k in METRICS}})

    def _run_one(self, run_trial: Callable[[TrialRun], Outcome], entry: Entry,
                 rep: int) -> Outcome:
        out = free_log_path(f"{entry.name}-{rep}", self.folder)
        started = time.strftime("%Y-%m-%dT%H:%M:%S")
        result = run_trial(TrialRun(entry, rep, out))
        self._record(entry, rep, out, started, result)
        return result

    def run(self, run_trial: Callable[[TrialRun], Outcome],
            ask: Callable[[Upcoming], str] | None = None,
            say: Callable[[str], None] = lambda text: None) -> CampaignResult:
        """Run what is pending. ``ask`` (None: go on by itself) answers
        "start", "redo" (the last trial again), "skip" or "quit" before each
        trial. A trial that ends "aborted" (Ctrl-C) stops the campaign after
        its row is written."""
        self.open()
        self._orphans()
        queue = self.pending()
        res = CampaignResult()
        last: tuple[Entry, int, Outcome] | None = None
        i = 0
        while i < len(queue):
            entry, rep = queue[i]
            changed = self._plan_changed()
            if changed:
                res.stopped = changed
                break
            action = "start" if ask is None else ask(Upcoming(entry, rep, i + 1, len(queue), last))
            if action == "quit":
                res.stopped = "stopped by the operator"
                break
            if action == "skip":
                self._record(entry, rep, None, time.strftime("%Y-%m-%dT%H:%M:%S"),
                             Outcome("skipped"))
                say(f"skipped {entry.name} #{rep}")
                i += 1
                continue
            if action == "redo":
                if last is None:
                    say("nothing to redo yet")
                    continue
                entry, rep = last[0], last[1]
            else:
                i += 1
            result = self._run_one(run_trial, entry, rep)
            last = (entry, rep, result)
            res.ran.append(last)
            if result.outcome == "aborted":
                res.stopped = "interrupted"
                break
            if ask is None and self.plan.pause > 0 and i < len(queue):
                time.sleep(self.plan.pause)
        return res

    def run_parallel(self, executor: cf.Executor, flags: dict | None = None,
                     say: Callable[[str], None] = lambda text: None) -> CampaignResult:
        """Run what is pending at once on ``executor`` (a process pool or a
        Dask cluster's, :func:`aiko.experiments.analysis.executor.open_executor`),
        every trial in virtual time (:func:`virtual_trial_outcome`): their
        rows go into the index in the schedule's order, as a run one after
        another would write them. The workers read the plan and write the
        logs where this process would: on a cluster, a shared folder."""
        self.open()
        self._orphans()
        res = CampaignResult()
        changed = self._plan_changed()
        if changed:
            res.stopped = changed
            return res
        submitted = []
        for entry, rep in self.pending():
            out = free_log_path(f"{entry.name}-{rep}", self.folder)
            started = time.strftime("%Y-%m-%dT%H:%M:%S")
            submitted.append((entry, rep, out, started, executor.submit(
                virtual_trial_outcome, str(self.plan.path), entry.name, rep, str(out),
                dict(flags or {}))))
        try:
            for entry, rep, out, started, future in submitted:
                result = _outcome_of(future)
                self._record(entry, rep, out, started, result)
                res.ran.append((entry, rep, result))
                say(f"{entry.name} #{rep}: {result.outcome}"
                    + (f" ({result.note})" if result.note else ""))
        finally:
            for *_, future in submitted:
                future.cancel()
        return res


def _outcome_of(future: cf.Future) -> Outcome:
    """A worker's outcome; a worker that failed is an aborted trial, said why."""
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - a worker's failure is the trial's row
        return Outcome("aborted", None, f"its worker failed: {type(exc).__name__}: {exc}")


def virtual_trial_outcome(plan_path: str, entry_name: str, repetition: int, out: str,
                          flags: dict | None = None) -> Outcome:
    """One trial of a plan's entry in virtual time, wherever it runs (a worker
    of a process pool or of a Dask cluster): the log at ``out``, the outcome.
    CampaignError for an entry that is not in virtual time."""
    from aiko.drivers.virtual_time import run_virtual
    from aiko.experiments.files.gait_file import get_gait

    from .session import SessionReport, run_session
    from .wiring import entry_settings, session_config

    plan = load_plan(plan_path)
    entry = next(e for e in plan.entries if e.name == entry_name)
    settings = entry_settings(plan, entry, flags)
    if settings.trial.time != "virtual":
        raise CampaignError(f"{plan_path}: {entry_name}", "runs in real time, one at a time")
    gait = get_gait(entry.gait)
    report = SessionReport()
    result = run_virtual(run_session(session_config(settings, gait, Path(out)), gait, report))
    if result.reason == "fault":
        return Outcome("fault", report.metrics, str(result.fault))
    if result.reason != "completed":
        return Outcome("aborted", report.metrics, result.reason)
    return Outcome("completed", report.metrics)
