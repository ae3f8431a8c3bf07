"""The soak benchmark as CI runs it: one minute of sidewinding on the
simulated rig with the model in parallel, every process sampled, then the
log checked and read back by `aiko info`, `aiko replay` and `aiko export`
(the 30-minute run is by hand: docs/performance.md)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_one_minute_soak_keeps_every_period_and_its_memory(tmp_path):
    report_path = tmp_path / "soak.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--minutes", "1",
                          "--every", "5", "--json", str(report_path)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT / "benchmarks")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(report_path.read_text())
    # the trial: every period streamed, none missed; late means a period's
    # frames went out over 10 ms after its deadline. The bound is 0
    # late in 30 minutes; the 30-minute runs here had 48 and 10 of 18002 and a
    # one-minute run 0 or 1 of 602 on an idle machine (the runner streams in
    # the real-time class, but this machine stands still for 10-50 ms now
    # and then), so CI holds 1 % (6), against a stream that breaks
    trial = report["trial"]
    assert trial["periods"] >= 600 and trial["missed"] == 0 and trial["late"] <= 6, report
    # the log holds every period's SYNC with its ten REFs before it (the
    # stream's first SYNC reads where the joints are, without REFs) and
    # motion capture at 20 Hz to the end (a sample every 50 ms, stale or not)
    log = report["log"]
    assert log["complete"] and log["syncs"] == trial["periods"], log
    assert log["refs"] == 10 * (log["syncs"] - 1), log
    assert log["mocap"] >= 20 * 59 and log["mocap_last_s"] >= 59.0, log
    # each process's memory after the first 20 s grows by less than 5 % to
    # the trial's length (the comparison after the trial not counted; the
    # 30-minute bound; in one minute a leak of the runner's old 1.3 MB a
    # minute is under 1 %, so this catches only a fast one)
    roles = report["rss"]
    assert {"runner", "simulated Aiko", "physics", "parallel model"} <= set(roles), roles
    for role in ("runner", "simulated Aiko", "physics", "parallel model"):
        assert roles[role]["growth_pct"] < 5.0, (role, roles[role])
    # the tools read the minute's log
    for name in ("info", "replay", "export blf"):
        tool = report["tools"][name]
        assert tool["rc"] == 0, (name, tool)
