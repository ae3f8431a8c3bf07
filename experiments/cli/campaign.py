"""`aiko campaign PLAN.toml`: the trials of a plan, each as `aiko run` runs
it, into the campaign's folder with its index; again after a stop, it goes on
where it stopped; at the end, the series against the model."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from aiko.experiments.cli.args import ArgError, add_executor_options, executor_args

__all__ = ["add_parser", "cmd_campaign", "check_plan"]

PROMPT = "Enter: start · r: redo the last · s: skip · q: stop > "


def add_parser(sub) -> None:
    c = sub.add_parser(
        "campaign", help="run a plan of trials (gaits x repetitions), resumable, with the "
                         "series against the model at the end",
        description="Run every trial of a campaign plan (TOML: [campaign] name, folder, order, "
                    "seed, rig_file; [[trial]] gait, duration, repetitions and any aiko run "
                    "setting by its flag's name) as aiko run runs it, into the campaign's "
                    "folder (<entry>-<rep>.mcap) with an index, campaign.csv. Run again, it "
                    "goes on with the first trial not completed. On the robot it asks the "
                    "operator before each trial (Enter, r redo, s skip, q stop); on the "
                    "simulated rig it goes on by itself. When every trial is in virtual time "
                    "(--time virtual) they run at once, on local processes or a Dask "
                    "cluster (--scheduler), the index as one after another would write it. "
                    "Ends with summary.csv and summary.png.")
    c.add_argument("plan", type=Path, metavar="PLAN.toml")
    c.add_argument("--summary", action="store_true",
                   help="run nothing: print the series so far and write summary.csv/.png")
    c.add_argument("--time", choices=("real", "virtual"), default=None,
                   help="run every trial in this time (default: each entry's, real unless "
                        "it says time = \"virtual\"); virtual: the simulated rig in virtual "
                        "time, as fast as the computer allows")
    add_executor_options(c)
    c.add_argument("--ask", choices=("auto", "always", "never"), default="auto",
                   help="ask the operator before each trial: auto (on the robot, default), "
                        "always, never")
    c.set_defaults(func=cmd_campaign)


def check_plan(plan, flags: dict | None = None) -> dict:
    """Every entry as ``aiko run`` would take it (with the campaign's
    ``flags``), before anything starts: PlanError names the entry and key.
    Returns entry name -> rig ("simulated" or "robot")."""
    from aiko.experiments.files.campaign_plan import PlanError
    from aiko.experiments.files.gait_file import get_gait
    from aiko.experiments.trial.wiring import entry_settings, session_config
    from aiko.model.errors import AikoError

    src = str(plan.path)
    rigs = {}
    for i, entry in enumerate(plan.entries):
        where = f"trial {i + 1} ({entry.name})"
        try:
            gait = get_gait(entry.gait)
        except AikoError as exc:
            raise PlanError(src, str(exc), f"{where}.gait") from exc
        settings = entry_settings(plan, entry, flags)
        try:
            session_config(settings, gait, Path("check.mcap"))
        except AikoError as exc:
            raise PlanError(src, str(exc), where) from exc
        rigs[entry.name] = settings.rig.rig
    return rigs


def _trial_runner(plan, say, flags: dict | None = None):
    """The campaign's trial: ``aiko run``'s code on the entry's settings."""
    from aiko.experiments.cli.run import run_session_blocking
    from aiko.experiments.files.gait_file import get_gait
    from aiko.experiments.trial.campaign import Outcome
    from aiko.experiments.trial.wiring import entry_settings, session_config

    def run_trial(trial) -> Outcome:
        gait = get_gait(trial.entry.gait)
        session = session_config(entry_settings(plan, trial.entry, flags), gait, trial.out)
        report, interrupted = run_session_blocking(session, gait)
        result = report.result
        if interrupted or result is None:
            outcome = Outcome("aborted", report.metrics, "interrupted")
        elif result.reason == "fault":
            outcome = Outcome("fault", report.metrics, str(result.fault))
        else:
            outcome = Outcome("completed", report.metrics)
        outcome.posture = _posture(trial.out, result)
        say(_trial_line(trial, outcome))
        return outcome
    return run_trial


def _posture(log: Path, result) -> str:
    """The robot as last measured: link 6 and the joints' largest angle at
    the trial's end (its last STATE replies)."""
    from aiko.experiments.files.triallog import TrialLogError, read_trial

    parts = []
    if result is not None and result.last_link6 is not None:
        x, y, _ = result.last_link6
        parts.append(f"link 6 at ({x:+.3f}, {y:+.3f}) m")
    try:
        last: dict[int, tuple[float, float]] = {}
        for _, s in read_trial(log, topics=("/joint_state",)).records.get("/joint_state", []):
            last[s["node"]] = (s["alpha_h"], s["alpha_v"])
    except TrialLogError:
        last = {}
    if last:
        worst = max(max(abs(a), abs(b)) for a, b in last.values())
        parts.append(f"joints within {math.degrees(worst):.1f} deg of straight "
                     f"({len(last)} nodes answered)")
    return f"end of {log.name}: " + "; ".join(parts) if parts else ""


def _trial_line(trial, outcome) -> str:
    m = outcome.metrics or {}
    text = f"{trial.entry.name} #{trial.repetition}: {outcome.outcome}"
    if outcome.note:
        text += f" ({outcome.note})"
    if "final_error_m" in m:
        text += (f"; final error {100 * m['final_error_m']:.1f} cm, net displacement ratio "
                 f"{m['distance_ratio']:.2f}")
    return text + f"; log {trial.out}"


def _asker(mode: str, rigs: dict):
    """The operator's prompt (None: never ask)."""
    if mode == "never" or (mode == "auto" and "robot" not in rigs.values()):
        return None

    def ask(up) -> str:
        if mode == "auto" and rigs.get(up.entry.name) != "robot":
            return "start"
        print(f"next: {up.position}/{up.total} {up.entry.name} #{up.repetition} "
              f"({up.entry.gait}, {up.entry.duration:g} s)")
        if up.last is not None:
            entry, rep, out = up.last
            print(f"last: {entry.name} #{rep} {out.outcome}"
                  + (f"; robot as last measured, {out.posture}" if out.posture else ""))
        else:
            print("robot: not measured yet in this run of the campaign")
        while True:
            try:
                answer = input(PROMPT).strip().lower()
            except (EOFError, KeyboardInterrupt):
                print()
                return "quit"
            choice = {"": "start", "r": "redo", "s": "skip", "q": "quit"}.get(answer)
            if choice is not None:
                return choice
            print("  answer Enter, r, s or q")
    return ask


def cmd_campaign(args: argparse.Namespace) -> int:
    from aiko.experiments.files.campaign_plan import load_plan
    from aiko.experiments.trial.campaign import Campaign

    plan = load_plan(args.plan)
    campaign = Campaign(plan)
    if args.summary:
        if not campaign.index.path.exists():
            raise ArgError(f"aiko campaign: {plan.folder}: no campaign index yet")
        return _summary(plan.folder)
    flags = {"time": args.time}
    rigs = check_plan(plan, flags)
    campaign.check()
    pending = campaign.pending()
    print(f"campaign {plan.name}: {len(pending)} of "
          f"{sum(e.repetitions for e in plan.entries)} trials to run, into {plan.folder}")

    def say(text: str) -> None:
        print(f"aiko campaign: {text}", flush=True)

    res = _run(campaign, plan, args, flags, rigs, say)
    left = len(campaign.pending())
    if res.stopped is not None:
        print(f"aiko campaign: {res.stopped}; {left} trial(s) left: run "
              f"`aiko campaign {args.plan}` again to go on", file=sys.stderr)
    _summary(plan.folder)
    if res.stopped == "interrupted":
        return 130
    return 2 if res.stopped is not None and res.stopped.startswith("the plan") else 0


def _run(campaign, plan, args, flags: dict, rigs: dict, say):
    """One trial after another, or, when every trial is in virtual time and
    nobody is asked, all at once on local processes or a Dask cluster."""
    from aiko.experiments.analysis.executor import open_executor
    from aiko.experiments.trial.wiring import entry_settings

    asker = _asker(args.ask, rigs)
    virtual = all(entry_settings(plan, e, flags).trial.time == "virtual" for e in plan.entries)
    wants_pool = args.scheduler is not None or args.workers is not None
    if wants_pool and not virtual:
        raise ArgError("aiko campaign: --scheduler and --workers run the trials in virtual "
                       "time: give --time virtual, or time = \"virtual\" to every entry")
    if wants_pool and asker is not None:
        raise ArgError("aiko campaign: trials run at once on --scheduler or --workers ask "
                       "nobody: give --ask never")
    if not virtual or asker is not None:
        return campaign.run(_trial_runner(plan, say, flags), asker, say)
    with open_executor(*executor_args(args)) as executor:
        say("every trial in virtual time: running them at once on "
            + (args.scheduler or "local processes"))
        return campaign.run_parallel(executor, flags, say)


def _summary(folder: Path) -> int:
    from aiko.experiments.analysis.campaign_summary import (
        summarize,
        summary_figure,
        write_summary,
    )

    summaries = summarize(folder)
    print(f"{'entry':24s} {'runs':>4s} {'net disp. exp. m':>17s} {'model m':>8s} "
          f"{'ratio':>12s} {'heading diff. deg':>17s} {'RMS error cm':>13s}")
    for s in summaries:
        st = s.stats
        print(f"{s.entry:24s} {s.repetitions:4d} "
              f"{_pm(st['net_displacement_experiment_m_mean'], st['net_displacement_experiment_m_sd'], 3):>17s} "
              f"{st['net_displacement_model_m_mean']:8.3f} "
              f"{_pm(st['ratio_mean'], st['ratio_sd'], 2):>12s} "
              f"{_pm(st['heading_difference_deg_mean'], st['heading_difference_deg_sd'], 1):>17s} "
              f"{_pm(100 * st['rms_error_m_mean'], 100 * st['rms_error_m_sd'], 1):>13s}"
              + (f"  ({s.faults} fault(s))" if s.faults else "")
              + (f"  ({s.skipped} skipped)" if s.skipped else ""))
    print(f"summary: {write_summary(folder, summaries)}, {summary_figure(folder, summaries)}")
    return 0


def _pm(mean: float, sd: float, digits: int) -> str:
    if not math.isfinite(mean):
        return "-"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"
