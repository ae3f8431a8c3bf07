"""The virtual trial benchmark, short: a 2 s sidewinding trial timed whole
and in its parts, the parts accounted for once each (none inside another)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PARTS = {"physics (compiled ticks)", "waiting for the model's thread", "trial log",
         "camera frames", "comparison and figure"}


def test_a_short_virtual_trial_is_timed_whole_and_in_parts(tmp_path):
    out = tmp_path / "vt.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "virtual_trial.py"),
                          "--duration", "2", "--rounds", "1", "--presets", "sidewinding",
                          "--parts", "--json", str(out)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT / "benchmarks")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(out.read_text())
    side = report["presets"]["sidewinding"]
    assert report["duration_s"] == 2.0 and len(side["trial_s"]) == 1 and side["command_s"] == []
    assert side["trial_s"][0] > 0
    parts = side["parts_s"]
    assert set(parts) == PARTS, parts
    assert all(v > 0 for v in parts.values()), parts
    assert sum(parts.values()) < side["timed_run_s"], (parts, side["timed_run_s"])
    assert "sidewinding" in run.stdout and "the rest" in run.stdout
