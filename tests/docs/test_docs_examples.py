"""The documentation's examples run as written: the Python API page's trial
from Python (settings, a session, a listener of the records) on the ideal
simulated Aiko in virtual time, in a folder of its own."""

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _example(page: str, heading: str) -> str:
    text = (ROOT / "docs" / page).read_text()
    section = text[text.index(heading):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_a_trial_from_python_runs_as_the_docs_show(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_example("python-api.md", "## A trial from Python"), "example", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines[0] == "rig file: none"
    assert any(line.split() == ["plant", "ideal", "(flag)"] for line in lines)
    assert any(line.startswith("completed ") for line in lines)
    assert any(line.startswith("the model ran at most ") for line in lines)
    logs = list(tmp_path.glob("trial-*.mcap"))
    assert len(logs) == 1 and logs[0].with_suffix(".png").exists()
