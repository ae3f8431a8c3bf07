"""Every console block of the site, run as a reader would type it: its `aiko`
commands one after another, each as a process of its own, in a fresh folder
that holds what the block names: the docs' example files (docs/examples) and
trial logs, stood up here. A command must end with exit status 0 and no
traceback; `aiko emulate`, which serves until Ctrl-C, is stopped with it
once it serves, and so is a command the block puts in the background (`&`)
once the block's last command has ended. What a block names and this machine
does not have is stood up and put in its place: the channel a background
`aiko emulate` printed for the one the page shows, a Dask scheduler and
worker for ``tcp://cluster:8786``.

A block that cannot run here says what it needs on the line before it: the
robot (its rig file, adapters, broker, the lab's motion capture at its
address: ``<!-- needs the robot -->``), ROS 2's own tools, the fuzzing's longer
search by hand; the list of those is checked below, so that none is marked by
mistake, and a block without `aiko` commands is either marked or one that
`.ci/run` runs as it is (the install, the test runs).

Not part of the default test run (marked ``site_commands``: real-time trials,
an optimisation of 400 candidates, a campaign on a cluster; about four
minutes on two cores): `.ci/run` runs them after it,
``python -m pytest -m site_commands -n 2 --dist load``."""

from __future__ import annotations

import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import AIKO_COMMAND, emulator_channel, made_once
from tests.docs.test_code_blocks import ROOT, _blocks, _commands

EXAMPLES = ROOT / "docs" / "examples"
TIMEOUT = 900.0
"""s a command may take (the optimisation of 400 candidates: 1-3 minutes)."""

NEEDS = {
    ("README.md", "## An experiment day on the robot"): "the robot",
    ("docs/commands/campaign.md", "# `aiko campaign`: a day of trials, resumable, with the "
                                  "series against the model"): "the robot",
    ("docs/commands/doctor.md", "# `aiko doctor`"): "the robot",
    ("docs/commands/run.md", "## Telemetry"): "the robot",
    ("docs/experiment-day.md", "## The day as a campaign"): "the robot",
    ("docs/mocap.md", "## Vicon Tracker: the UDP Object Stream"): "the robot",
    ("docs/mocap.md", "## Vicon DataStream"): "the robot",
    ("docs/mocap.md", "## Qualisys Track Manager"): "the robot",
    ("docs/ros2.md", "## Recipe: look at it with ROS 2's tools"): "ROS 2",
    ("docs/tests.md", "# Tests"): "a search by hand",
}
"""(page, heading) -> what the blocks marked there need: the lab's rig file
(``aiko.toml``, ``lab.toml``, ``can1``), its broker, its motion capture at
its address; ROS 2's own tools; the fuzzing's longer search by hand."""

RUN_BY_CI = ("pip install -e '.[test]' && python -m pytest -q", "python -m pytest -q",
             "python -m pytest -m site_commands -n 2 --dist load "
             "tests/docs/test_site_commands.py")
"""Blocks `.ci/run` runs as they are: the install and the test runs."""

TRIALS = {
    "trial-20261126-081500.mcap": "sidewinding",
    "trial-a.mcap": "sidewinding",
    "trial-b.mcap": "lateral-undulation",
    "trials/sidewinding-2026-11-27T10-15-02.mcap": "sidewinding",
}
"""The trial logs the blocks name, as 5 s trials in virtual time."""

MADE_BEFORE = {
    "bags/sidewinding-2026-11-27T10-15-02-rosbag2":
        "aiko export trials/sidewinding-2026-11-27T10-15-02.mcap --format rosbag2 --out bags",
}
"""What a block names that the page's block before it made: that block's command."""


@dataclass
class Block:
    page: str
    heading: str
    commands: list[str]
    needs: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.heading.lstrip('# ')[:40]}"


def _site_blocks() -> list[Block]:
    out = []
    for page, heading, body, needs in _blocks("console"):
        commands = _commands(body)
        if commands:
            out.append(Block(str(page.relative_to(ROOT)), heading.strip(), commands, needs))
    return out


BLOCKS = _site_blocks()
RUN = [b for b in BLOCKS if not b.needs]


def test_the_blocks_that_do_not_run_here_say_why():
    marked = {}
    for page, heading, body, needs in _blocks("console"):
        key = (str(page.relative_to(ROOT)), heading.strip())
        if needs:
            assert NEEDS.get(key) == needs, (key, needs)
            marked[key] = needs
        elif not _commands(body):           # no `aiko` command: .ci/run's own lines
            lines = [line[2:].split("#")[0].strip() for line in body.splitlines()
                     if line.startswith("$ ")]
            assert lines and all(line in RUN_BY_CI for line in lines), (key, lines)
    assert marked == NEEDS


@dataclass
class Shell:
    """The folder a block runs in and what it has put in the background."""

    cwd: Path
    replace: dict[str, str] = field(default_factory=dict)
    background: list[tuple[str, subprocess.Popen]] = field(default_factory=list)

    def argv(self, command: str) -> list[str]:
        for old, new in self.replace.items():
            command = command.replace(old, new)
        return shlex.split(command.rstrip("& "), comments=True)[1:]

    def start(self, command: str) -> subprocess.Popen:
        return subprocess.Popen([*AIKO_COMMAND, *self.argv(command)], cwd=self.cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, command: str) -> None:
        if command.rstrip().endswith("&"):
            proc = self.start(command)
            self._until_served(command, proc)
            self.background.append((command, proc))
        elif self.argv(command)[0] == "emulate":
            proc = self.start(command)
            self._until_served(command, proc)
            time.sleep(1.0)
            _stopped(command, proc)
        else:
            done = subprocess.run([*AIKO_COMMAND, *self.argv(command)], cwd=self.cwd,
                                  capture_output=True, text=True, timeout=TIMEOUT)
            _check(command, done.returncode, done.stdout, done.stderr)

    def _until_served(self, command: str, proc: subprocess.Popen) -> None:
        """Wait until `aiko emulate` names its channel (it serves from then
        on), which then stands for the page's in the commands after it."""
        channel = emulator_channel(proc)
        if channel is None:
            _stopped(command, proc)
            pytest.fail(f"`{command}` did not say it serves")
        self.replace["socket://127.0.0.1:40123"] = channel

    def close(self) -> None:
        for command, proc in self.background:
            _stopped(command, proc)


def _stopped(command: str, proc: subprocess.Popen) -> None:
    """Ctrl-C, as a user ends a server; it must end cleanly."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"`{command}` did not end on Ctrl-C: {err[-2000:]}")
    _check(command, proc.returncode, out, err)


def _check(command: str, code: int, out: str, err: str) -> None:
    assert code == 0 and "Traceback" not in err, (
        f"`{command}` exited {code}:\n{out[-2000:]}\n{err[-3000:]}")


@pytest.fixture(scope="session")
def trial_logs(tmp_path_factory) -> dict[str, Path]:
    logs = {}
    for gait in sorted(set(TRIALS.values())):
        run, out = made_once(tmp_path_factory, f"site-{gait}", gait, "--time", "virtual",
                             "--duration", "5")
        assert run.returncode == 0, run.stderr
        logs[gait] = out
    return logs


@pytest.mark.site_commands
@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_the_block_runs_as_shown(block, tmp_path, trial_logs, request):
    text = " ".join(shlex.join(Shell(tmp_path).argv(c)) for c in block.commands)  # no comments
    for example in EXAMPLES.iterdir():      # not aiko.toml unless named: it is the robot's
        if example.name in text:
            shutil.copy(example, tmp_path)
    before = [c for name, c in MADE_BEFORE.items() if name in text and c not in block.commands]
    for name, gait in TRIALS.items():
        if name in text or any(name in c for c in before):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(trial_logs[gait], tmp_path / name)
    shell = Shell(tmp_path)
    for command in before:
        shell.run(command)
    if any("tcp://cluster:8786" in c for c in block.commands):
        shell.replace["tcp://cluster:8786"] = request.getfixturevalue("dask_cluster")
    try:
        for command in block.commands:
            shell.run(command)
    finally:
        shell.close()
