"""Campaigns: the plan file, the loop (with a stand-in trial), and whole
campaigns on the simulated rig: to the end, killed and resumed, a faulted
trial, the operator's prompt through a pseudo-terminal."""

import csv
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiko.experiments.analysis.campaign_summary import summarize
from aiko.experiments.files.campaign_index import CampaignIndex, index_of
from aiko.experiments.files.campaign_plan import PlanError, load_plan, schedule
from aiko.experiments.trial.campaign import Campaign, CampaignError, Outcome
from tests.conftest import AIKO_COMMAND, aiko

PLAN = """\
[campaign]
name = "floor-a"
folder = "{folder}"
order = "{order}"
seed = 3

[[trial]]
gait = "sidewinding"
duration = {duration}
repetitions = {reps}
plant = "ideal"
time = "virtual"
{extra}
[[trial]]
gait = "lateral-undulation"
duration = {duration}
repetitions = {reps}
plant = "ideal"
time = "virtual"
{extra}"""


def write_plan(tmp_path: Path, name="plan.toml", folder="floor-a", order="as-written",
               duration=3.0, reps=2, extra="", text=None) -> Path:
    path = tmp_path / name
    path.write_text(text if text is not None else PLAN.format(
        folder=folder, order=order, duration=duration, reps=reps, extra=extra))
    return path


def fake_trial(outcomes=None, log=None):
    """A stand-in for `aiko run`: writes the log file, answers the next outcome."""
    outcomes = list(outcomes or [])

    def run(trial):
        trial.out.write_bytes(b"log")
        if log is not None:
            log.append((trial.entry.name, trial.repetition, trial.out.name))
        kind = outcomes.pop(0) if outcomes else "completed"
        return Outcome(kind, {"final_error_m": 0.01, "distance_ratio": 1.0} if
                       kind == "completed" else None, "lost node 2" if kind == "fault" else "")
    return run


# ---------------------------------------------------------------- the plan file
def test_a_plan_is_read_with_paths_relative_to_it_and_a_seeded_order(tmp_path):
    plan = load_plan(write_plan(tmp_path, order="shuffled", extra='scene = "obst.toml"\n'))
    assert plan.folder == tmp_path / "floor-a" and plan.rig_file is None
    assert [e.name for e in plan.entries] == ["sidewinding", "lateral-undulation"]
    assert dict(plan.entries[0].settings) == {"plant": "ideal", "time": "virtual",
                                               "scene": str(tmp_path / "obst.toml")}
    order = [(e.name, r) for e, r in schedule(plan)]
    assert sorted(order) == sorted([("sidewinding", 1), ("sidewinding", 2),
                                    ("lateral-undulation", 1), ("lateral-undulation", 2)])
    assert order == [(e.name, r) for e, r in schedule(load_plan(plan.path))]   # seeded
    assert order != [(e.name, r) for e, r in schedule(
        load_plan(write_plan(tmp_path, "p2.toml")))]


@pytest.mark.parametrize("change, needle", [
    (("repetitions = 2", "repetitions = 0", 1), "trial 1 (sidewinding).repetitions: must be a "
                                                "whole number >= 1, got 0"),
    (("seed = 3", "seed = 3\ncolour = 1", 1), "campaign.colour: unknown key"),
    (("plant = \"ideal\"", "out = \"x.mcap\"", 1), "trial 1 (sidewinding).out: is the "
                                                   "campaign's to set"),
    (("order = \"as-written\"", "order = \"random\"", 1), "campaign.order: must be one of"),
    (("duration = 3.0", "duration = -1", 1), "trial 1 (sidewinding).duration: must be > 0"),
])
def test_bad_plans_name_the_entry_and_key(tmp_path, change, needle):
    text = PLAN.format(folder="f", order="as-written", duration=3.0, reps=2, extra="")
    with pytest.raises(PlanError, match=r"plan\.toml: " + needle.replace("(", r"\(").replace(
            ")", r"\)").replace(".", r"\.").replace("+", r"\+")):
        load_plan(write_plan(tmp_path, text=text.replace(*change)))


@pytest.mark.parametrize("case, needle", [
    ("unknown-key", "trial 2 (lateral-undulation).wobble: unknown key (not an aiko run setting)"),
    ("unknown-gait", "trial 1 (sidewinding-fast).gait: sidewinding-fast: unknown gait"),
    ("zero-reps", "repetitions: must be a whole number >= 1, got 0"),
    ("bad-value", "trial 1 (sidewinding).plant: invalid choice: 'perfect'"),
    ("other-campaign", "holds campaign 'floor-b', not 'floor-a'"),
    ("foreign-index", "holds a campaign index (campaign.csv) without its campaign.json"),
])
def test_bad_plans_are_one_line_errors_and_nothing_starts(tmp_path, case, needle):
    text = PLAN.format(folder="f", order="as-written", duration=3.0, reps=2, extra="")
    if case == "unknown-key":
        text = text.rstrip() + "\nwobble = 2\n"
    elif case == "unknown-gait":
        text = text.replace('gait = "sidewinding"', 'gait = "sidewinding-fast"')
    elif case == "zero-reps":
        text = text.replace("repetitions = 2", "repetitions = 0", 1)
    elif case == "bad-value":
        text = text.replace('plant = "ideal"', 'plant = "perfect"', 1)
    elif case == "other-campaign":
        other = write_plan(tmp_path, "other.toml", folder="f",
                           text=text.replace('name = "floor-a"', 'name = "floor-b"'))
        Campaign(load_plan(other)).open()
    else:
        (tmp_path / "f").mkdir()
        (tmp_path / "f" / "campaign.csv").write_text("entry,repetition\n")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    r = aiko("campaign", str(write_plan(tmp_path, text=text)))
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(before + ["plan.toml"])


# ---------------------------------------------------------------- the loop
def test_the_loop_records_every_trial_and_resumes_with_what_is_left(tmp_path):
    plan = load_plan(write_plan(tmp_path))
    ran = []
    res = Campaign(plan).run(fake_trial(["completed", "fault"], ran))
    assert res.stopped is None and len(ran) == 4
    rows = CampaignIndex(plan.folder).rows()
    assert [(r["entry"], r["repetition"], r["outcome"]) for r in rows] == [
        ("sidewinding", "1", "completed"), ("sidewinding", "2", "fault"),
        ("lateral-undulation", "1", "completed"), ("lateral-undulation", "2", "completed")]
    assert rows[1]["note"] == "lost node 2" and rows[0]["final_error_m"] == "0.01"
    # again: only the faulted trial runs, into a new file (logs are never overwritten)
    ran.clear()
    Campaign(load_plan(plan.path)).run(fake_trial([], ran))
    assert ran == [("sidewinding", 2, "sidewinding-2-2.mcap")]
    assert {r["outcome"] for r in index_of(plan.folder)} == {"completed"}
    assert len(CampaignIndex(plan.folder).rows()) == 5


def test_a_log_the_index_does_not_name_is_recorded_as_aborted(tmp_path):
    plan = load_plan(write_plan(tmp_path))
    answers = iter(["start", "quit"])
    Campaign(plan).run(fake_trial(), lambda up: next(answers))
    (plan.folder / "sidewinding-2.mcap").write_bytes(b"\x89MCAP0\r\n")   # killed mid-trial
    ran = []
    Campaign(plan).run(fake_trial([], ran))
    rows = CampaignIndex(plan.folder).rows()
    assert (rows[1]["entry"], rows[1]["repetition"], rows[1]["outcome"]) == (
        "sidewinding", "2", "aborted") and "stopped during this trial" in rows[1]["note"]
    assert ran[0] == ("sidewinding", 2, "sidewinding-2-2.mcap") and len(ran) == 3


def test_an_aborted_trial_stops_the_campaign_and_a_torn_row_is_ignored(tmp_path):
    plan = load_plan(write_plan(tmp_path))
    res = Campaign(plan).run(fake_trial(["completed", "aborted"]))
    assert res.stopped == "interrupted" and len(CampaignIndex(plan.folder).rows()) == 2
    with open(plan.folder / "campaign.csv", "a") as f:
        f.write("lateral-undulation,1,lateral-undulation-1.mcap,2026-11-27T10:00:00,compl")
    assert len(CampaignIndex(plan.folder).rows()) == 2
    assert [(e.name, r) for e, r in Campaign(plan).pending()] == [
        ("sidewinding", 2), ("lateral-undulation", 1), ("lateral-undulation", 2)]
    Campaign(plan).run(fake_trial())
    assert len(index_of(plan.folder)) == 4
    with open(plan.folder / "campaign.csv") as f:
        assert all(len(row) == 14 for row in csv.reader(f) if row[0] != "entry" and
                   row[-1] != "compl")


def test_redo_skip_and_quit_as_the_operator_answers(tmp_path):
    plan = load_plan(write_plan(tmp_path))
    answers = iter(["start", "redo", "skip", "quit"])
    asked, ran = [], []

    def ask(up):
        asked.append((up.entry.name, up.repetition, up.position, up.total,
                      None if up.last is None else up.last[2].outcome))
        return next(answers)
    res = Campaign(plan).run(fake_trial([], ran), ask)
    assert res.stopped == "stopped by the operator"
    assert ran == [("sidewinding", 1, "sidewinding-1.mcap"),
                   ("sidewinding", 1, "sidewinding-1-2.mcap")]
    assert asked[0] == ("sidewinding", 1, 1, 4, None)
    assert asked[1][:2] == ("sidewinding", 2) and asked[1][4] == "completed"
    assert [(r["entry"], r["repetition"], r["outcome"]) for r in index_of(plan.folder)] == [
        ("sidewinding", "1", "completed"), ("sidewinding", "2", "skipped")]


def test_a_plan_changed_under_a_campaign_is_refused_with_what_changed(tmp_path):
    path = write_plan(tmp_path)
    plan = load_plan(path)
    calls = []

    def change_the_plan_after_one(trial):
        calls.append(trial)
        path.write_text(path.read_text().replace("duration = 3.0", "duration = 5.0", 1))
        return fake_trial()(trial)
    res = Campaign(plan).run(change_the_plan_after_one)
    assert len(calls) == 1
    assert res.stopped == "the plan changed: trial 'sidewinding' duration 3.0 -> 5.0"
    with pytest.raises(CampaignError, match="the plan changed since the campaign started: "
                                            "trial 'sidewinding' duration 3.0 -> 5.0"):
        Campaign(load_plan(path)).check()


# ---------------------------------------------------------------- on the simulated rig
def _rows(folder: Path) -> list[dict]:
    return CampaignIndex(folder).rows()


def test_a_campaign_on_the_simulated_rig_killed_and_resumed(tmp_path):
    """2 entries x 2 repetitions of 3 s in virtual time: killed once two
    trials have ended (a third may have ended before the kill landed), run
    again it runs only what is left; the summary covers all four."""
    plan = write_plan(tmp_path)
    folder = tmp_path / "floor-a"
    proc = subprocess.Popen([*AIKO_COMMAND, "campaign", str(plan)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while len(_rows(folder)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert len(_rows(folder)) >= 2, "the first two trials did not end"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
    done = len([x for x in _rows(folder) if x["outcome"] == "completed"])
    assert done in (2, 3)
    r = aiko("campaign", str(plan))
    assert r.returncode == 0, r.stderr
    assert f"{4 - done} of 4 trials to run" in r.stdout
    rows = [x for x in _rows(folder) if x["outcome"] != "aborted"]
    assert [(x["entry"], x["repetition"]) for x in rows] == [
        ("sidewinding", "1"), ("sidewinding", "2"), ("lateral-undulation", "1"),
        ("lateral-undulation", "2")]
    assert all(x["outcome"] == "completed" for x in rows) and len(rows) == 4
    for x in rows:
        assert (folder / x["file"]).stat().st_size > 10_000
    summaries = summarize(folder)
    assert [(s.entry, s.repetitions) for s in summaries] == [("sidewinding", 2),
                                                             ("lateral-undulation", 2)]
    for s in summaries:
        assert 0.7 < s.stats["ratio_mean"] < 1.3 and s.stats["ratio_sd"] < 0.2
        assert 0.02 < s.stats["net_displacement_experiment_m_mean"] < 0.5
    with open(folder / "summary.csv") as f:
        table = list(csv.DictReader(f))
    assert [t["entry"] for t in table] == ["sidewinding", "lateral-undulation"]
    assert (folder / "summary.png").stat().st_size > 20_000
    assert "sidewinding" in r.stdout and "summary:" in r.stdout
    again = aiko("campaign", str(plan), "--summary")
    assert again.returncode == 0 and "0 of 4" not in again.stdout and "lateral-undulation" in (
        again.stdout)
    fit = aiko("replay", str(folder), "--out", str(tmp_path / "replays"))
    assert fit.returncode == 0 and fit.stdout.count("link 6, experiment") == 4, fit.stderr


def test_a_faulted_trial_is_recorded_and_the_campaign_goes_on(tmp_path):
    text = """\
[campaign]
name = "faults"

[[trial]]
gait = "sidewinding"
name = "node-2-silent"
duration = 4.0
no_model = true
plant = "ideal"
plant_fault = ["2:silent@2.5"]

[[trial]]
gait = "sidewinding"
duration = 2.0
no_model = true
plant = "ideal"
"""     # in real time: `aiko campaign --time virtual` below
    plan = write_plan(tmp_path, text=text)
    r = aiko("campaign", str(plan), "--time", "virtual")
    assert r.returncode == 0, r.stderr
    rows = _rows(tmp_path / "faults")
    assert [(x["entry"], x["outcome"]) for x in rows] == [("node-2-silent", "fault"),
                                                          ("sidewinding", "completed")]
    assert "node 2" in rows[0]["note"] and (tmp_path / "faults" / rows[0]["file"]).exists()
    assert "node-2-silent #1: fault" in r.stdout


class Terminal:
    """The campaign's side of a pseudo-terminal, read as a stream: each
    :meth:`expect` consumes the output up to and including its needle."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = ""

    def expect(self, needle: str, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while needle not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, f"no {needle!r} in {self.buf[-2000:]!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096).decode(errors="replace")
                except OSError:
                    chunk = ""
                assert chunk, f"the campaign ended before {needle!r}: {self.buf[-2000:]!r}"
                self.buf += chunk
        end = self.buf.index(needle) + len(needle)
        seen, self.buf = self.buf[:end], self.buf[end:]
        return seen

    def answer(self, text: str) -> None:
        os.write(self.fd, text.encode() + b"\n")


def test_the_operator_prompt_through_a_terminal(tmp_path):
    """Enter runs the first trial, r redoes it, s skips the next, q stops."""
    plan = write_plan(tmp_path, duration=2.0, extra="no_model = true\n")
    pid, fd = pty.fork()
    if pid == 0:   # the child: the campaign on the terminal
        os.execvp(sys.executable, [*AIKO_COMMAND, "campaign",
                                   str(plan), "--ask", "always"])
    term = Terminal(fd)
    prompt = "q: stop > "
    try:
        seen = term.expect(prompt)
        assert "next: 1/4 sidewinding #1" in seen and "not measured yet" in seen
        term.answer("")
        seen = term.expect(prompt)
        assert "sidewinding #1: completed" in seen and "next: 2/4 sidewinding #2" in seen
        assert "robot as last measured, end of sidewinding-1.mcap: link 6 at" in seen
        term.answer("x")
        assert "answer Enter, r, s or q" in term.expect(prompt)
        term.answer("r")
        seen = term.expect(prompt)
        assert "sidewinding #1: completed" in seen and "sidewinding-1-2.mcap" in seen
        term.answer("s")
        seen = term.expect(prompt)
        assert "skipped sidewinding #2" in seen and "next: 3/4 lateral-undulation #1" in seen
        term.answer("q")
        assert "stopped by the operator; 2 trial(s) left" in term.expect("summary:")
    finally:
        done, status = os.waitpid(pid, os.WNOHANG)
        deadline = time.monotonic() + 20
        while done == 0 and time.monotonic() < deadline:   # its summary, then its exit
            time.sleep(0.1)
            done, status = os.waitpid(pid, os.WNOHANG)
        if done == 0:   # a test that failed half-way leaves it waiting for an answer
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    rows = _rows(tmp_path / "floor-a")
    assert [(x["entry"], x["repetition"], x["outcome"], x["file"]) for x in rows] == [
        ("sidewinding", "1", "completed", "sidewinding-1.mcap"),
        ("sidewinding", "1", "completed", "sidewinding-1-2.mcap"),
        ("sidewinding", "2", "skipped", "")]


def test_the_documented_example_plan_is_valid_and_runs_on_the_robot(monkeypatch):
    from aiko.experiments.cli.campaign import check_plan

    root = Path(__file__).resolve().parents[3]
    monkeypatch.setenv("AIKO_MQTT_PASSWORD", "secret")   # the example rig file names it
    plan = load_plan(root / "docs" / "examples" / "campaign.toml")
    assert plan.order == "shuffled" and plan.rig_file == root / "docs" / "examples" / "aiko.toml"
    assert check_plan(plan) == {"sidewinding": "robot", "lateral-undulation": "robot"}
    assert [r for _, r in schedule(plan)].count(3) == 2


def test_fit_and_replay_take_a_campaign_folder_for_its_completed_trials(tmp_path):
    from aiko.experiments.cli.args import ArgError, trial_files

    plan = load_plan(write_plan(tmp_path))
    Campaign(plan).run(fake_trial(["fault", "completed", "completed", "completed"]))
    logs = trial_files("fit", [plan.folder, tmp_path / "other.mcap"])
    assert [p.name for p in logs] == ["sidewinding-2.mcap", "lateral-undulation-1.mcap",
                                      "lateral-undulation-2.mcap", "other.mcap"]
    empty = load_plan(write_plan(tmp_path, "empty.toml", folder="empty"))
    Campaign(empty).run(fake_trial(["fault"] * 4))
    with pytest.raises(ArgError, match="the campaign has no completed trial yet"):
        trial_files("fit", [empty.folder])
    r = aiko("fit", str(empty.folder), "--params", "mu")
    assert r.returncode == 2 and "no completed trial yet" in r.stderr
