"""Does a trial on the simulated rig keep time with a browser on the live
page? Issue 31's test: `aiko run lateral-undulation-orthotropic --heading 45
--duration 40 --live 0` with headless Chromium (selenium) showing the live
page on the same machine for the whole trial, several runs:

    python benchmarks/rig_browser.py                 # 5 runs of 40 s
    python benchmarks/rig_browser.py --runs 2 --duration 20

Per run: how the trial ended, periods and late periods, SYNC->STATE (the
runner's), the simulated Aiko's own answer time and its physics' lag, as the
trial summary prints them. Needs Chromium and chromedriver (Debian: chromium
chromium-driver). Not part of the tests.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import cpu_times, describe, steal_percent
from rig_realtime import add_quiet_argument, quiet

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
_SUMMARY = {
    "ended": r"(trial completed|fault: [^\n]*)",
    "periods": r"(\d+) periods, (\d+) late, (\d+) missed",
    "rtt": r"SYNC->STATE p50 ([\d.]+) ms, p99 ([\d.]+) ms, max ([\d.]+) ms",
    "rig": r"on its bus p50 ([\d.]+) ms, p99 ([\d.]+) ms, max ([\d.]+) ms",
    "lag": r"physics lag max ([\d.]+) ms, p99 ([\d.]+) ms",
}


def _browser(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", f"--user-data-dir={profile}", "--window-size=1400,1000"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def run_once(duration: float, folder: str) -> str:
    out = Path(folder) / f"live-{time.monotonic_ns()}.mcap"
    run = subprocess.Popen([sys.executable, "-m", "aiko.experiments.cli", "run",
                            "lateral-undulation-orthotropic", "--heading", "45",
                            "--duration", str(duration), "--live", "0", "--out", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    driver, lines = None, []
    steal0 = cpu_times()
    try:
        assert run.stdout is not None
        for line in run.stdout:
            lines.append(line)
            if "live view: " in line:
                driver = _browser(tempfile.mkdtemp(dir=folder))
                driver.get(line.split("live view: ", 1)[1].strip())
                break
        lines += run.stdout.readlines()      # the browser draws meanwhile
        run.wait()
    finally:
        if driver is not None:
            driver.quit()
        if run.poll() is None:
            run.kill()
    text = "".join(lines)
    cells = []
    for pattern in _SUMMARY.values():
        m = re.search(pattern, text)
        cells.append(" / ".join(m.groups()) if m else "-")
    steal = steal_percent(steal0, cpu_times())
    cells.append("-" if steal is None else f"{steal:.1f}")
    return "| " + " | ".join(cells) + " |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=float, default=40.0)
    add_quiet_argument(ap)
    a = ap.parse_args()
    print(f"machine: {describe()}; {a.duration:g} s trials with Chromium on the live page")
    print("| ended | periods / late / missed | SYNC->STATE p50 / p99 / max ms "
          "| rig p50 / p99 / max ms | physics lag max / p99 ms | steal % |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(a.runs):
            quiet(a.quiet)
            print(run_once(a.duration, folder), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
