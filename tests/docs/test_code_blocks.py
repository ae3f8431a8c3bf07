"""The site's code blocks against the code: every `aiko` command a console
block shows parses with today's command line (its flags and values), and every
Python block runs, page by page in one namespace as a reader would paste
them, with what it names (a bag, an adapter's channel) stood up by the test.
A block that cannot run here says what it needs on the line before it
(``<!-- needs the robot -->``, ``<!-- needs ROS 2 -->``); a page's blocks
that another test runs are listed in RUN_ELSEWHERE."""

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from aiko.experiments.cli import build_parser
from aiko.experiments.cli.args import ArgError
from tests.conftest import aiko, start_emulator, stop

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
_NEEDS = re.compile(r"<!-- needs (.+?) -->$")

RUN_ELSEWHERE = {
    ("python-api.md", "## A trial from Python"): "tests/docs/test_docs_examples.py",
    ("testing.md", None): "tests/docs/test_lab_example.py",
}
"""(page, heading or None for the whole page) -> the test that runs them."""

_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks(lang: str):
    """(page, heading above, text, what it needs or "") of every block in ``lang``."""
    for page in PAGES:
        text = page.read_text()
        for m in _BLOCK.finditer(text):
            if m.group(1) != lang or "--8<--" in m.group(2):
                continue
            before = text[:m.start()]
            headings = re.findall(r"^#+ .*$", before, re.M)
            needs = _NEEDS.search(before.rstrip())
            yield page, headings[-1] if headings else "", m.group(2), needs[1] if needs else ""


def _commands(body: str) -> list[str]:
    """The ``$ aiko ...`` commands of a console block, continuation lines joined."""
    out, current = [], None
    for line in body.splitlines():
        if current is not None:
            current += " " + line.strip()
        elif line.startswith("$ "):
            current = line[2:]
        if current is not None:
            if current.endswith("\\"):
                current = current[:-1]
                continue
            out.extend(c.strip() for c in current.split("&&"))
            current = None
    return [c for c in out if c.startswith("aiko ")]


COMMANDS = [(page.relative_to(ROOT), cmd) for page, _, body, _ in _blocks("console")
            for cmd in _commands(body)]


def test_the_site_shows_commands():
    assert len(COMMANDS) > 40 and {str(p) for p, _ in COMMANDS} >= {
        "README.md", "docs/mocap.md", "docs/commands/run.md", "docs/commands/optimize.md"}


@pytest.mark.parametrize("page, command", COMMANDS, ids=[f"{p}:{c[:40]}" for p, c in COMMANDS])
def test_every_command_on_the_site_parses(page, command):
    argv = shlex.split(command.rstrip("& "), comments=True)[1:]
    try:
        build_parser().parse_args(argv)
    except ArgError as exc:
        pytest.fail(f"{page}: `{command}`: {exc}")
    except SystemExit as exc:         # --help and --version end the parse
        assert exc.code == 0, f"{page}: `{command}`"


def _elsewhere(page: Path, heading: str) -> bool:
    return ((page.name, heading.strip()) in RUN_ELSEWHERE
            or (page.name, None) in RUN_ELSEWHERE)


@pytest.fixture(scope="module")
def bag(tmp_path_factory, realistic_trial):
    out = tmp_path_factory.mktemp("bags")
    r = aiko("export", str(realistic_trial[1]), "--format", "rosbag2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    return next(out.glob("*-rosbag2"))


@pytest.fixture(scope="module")
def adapter():
    proc, channel = start_emulator()
    yield channel
    stop(proc)


def _page_code(name: str) -> str:
    """A page's Python blocks, in order, that run here."""
    parts = [body for page, heading, body, marked in _blocks("python")
             if page.name == name and not marked and not _elsewhere(page, heading)]
    assert parts, name
    return "\n".join(parts)


def _run(code: str, tmp_path, monkeypatch) -> str:
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs", "exec"), {"__name__": "docs"})
    return out.getvalue()


def test_every_python_block_runs_here_or_says_why_not():
    pages = {page.name for page, heading, _, marked in _blocks("python")
             if not marked and not _elsewhere(page, heading)}
    assert pages == {"python-api.md", "ros2.md", "simulated-rig.md", "doctor.md"}, pages


def test_the_python_api_pages_blocks_run(tmp_path, monkeypatch):
    _run(_page_code("python-api.md"), tmp_path, monkeypatch)


def test_the_ros2_pages_block_reads_a_bag(bag, tmp_path, monkeypatch):
    code = _page_code("ros2.md").replace('"bags/sidewinding-2026-11-27T10-15-02-rosbag2"',
                                         repr(str(bag)))
    lines = _run(code, tmp_path, monkeypatch).splitlines()
    assert len(lines) > 50 and all(len(line.split()) == 3 for line in lines)


def test_the_simulated_rig_pages_block_opens_the_adapter(adapter, tmp_path, monkeypatch):
    code = _page_code("simulated-rig.md").replace("socket://127.0.0.1:40123", adapter)
    _run(code + "\nmsg = bus.recv(2.0)\nprint(hex(msg.arbitration_id))\nbus.shutdown()\n",
         tmp_path, monkeypatch)


def test_the_doctor_pages_block_checks_a_rig(adapter, tmp_path, monkeypatch):
    code = _page_code("doctor.md").replace("socket://127.0.0.1:4000", adapter)
    out = _run(code, tmp_path, monkeypatch)
    # three modules answer of the ten named: not ready, the adapter and those three ok
    assert out.startswith("False [('CAN adapter', <Status.OK: 'ok'>"), out
    assert "('joint 3', <Status.OK: 'ok'>" in out and "('joint 4', <Status.FAIL" in out
