"""A screenshot of the live page at the end of a steered trial on the simulated rig.

    python benchmarks/live_screenshot.py [--duration 30] [--out runs/live]

Runs `aiko run lateral-undulation-orthotropic --path line.toml --live 0` (a
line 0.3 m to the left of the start, the realistic plant on a floor of mu_x
0.15, mu_y 0.4), opens the page in headless Chromium (Debian's chromium and
chromium-driver) while the trial runs and saves the page as it looks when the
trial has ended: docs/figures/live-view.png. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

FIGURE = Path(__file__).resolve().parents[1] / "docs" / "figures" / "live-view.png"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--out", type=Path, default=Path("runs/live"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "line.toml"
    path.write_text("[path]\nwaypoints = [[0.0, 0.3], [3.0, 0.3]]\n")
    run = subprocess.Popen(
        [sys.executable, "-m", "aiko.experiments.cli", "run", "lateral-undulation-orthotropic",
         "--duration", str(args.duration), "--path", str(path), "--plant-mu-x", "0.15",
         "--plant-mu-y", "0.4", "--live", "0", "--out", str(args.out / "live.mcap")],
        stdout=subprocess.PIPE, text=True)
    url = next(line.split("live view: ", 1)[1].strip() for line in run.stdout
               if "live view: " in line)
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--no-first-run", f"--user-data-dir={tempfile.mkdtemp()}",
              "--window-size=1400,1000"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        driver.get(url)
        while driver.execute_script("return document.body.dataset.state") in (
                "connecting", "waiting", "running"):
            time.sleep(0.5)
        time.sleep(1.0)                    # the comparison arrives after the end
        FIGURE.write_bytes(driver.get_screenshot_as_png())
    finally:
        driver.quit()
    print(run.stdout.read())
    run.wait()
    print(f"wrote {FIGURE}")


if __name__ == "__main__":
    main()
