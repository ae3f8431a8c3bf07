"""The lab's example test file of docs/testing.md runs as a lab runs it: by
pytest, in a folder of its own, the `aiko_trial` fixture coming from the
installed package's plugin."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_labs_example_tests_pass_as_copied(tmp_path):
    shutil.copy(ROOT / "docs" / "examples" / "test_lab_trials.py", tmp_path)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p",
                          "no:cacheprovider", "test_lab_trials.py"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout
