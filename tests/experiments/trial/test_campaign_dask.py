"""A campaign in virtual time on a real Dask cluster (`dask scheduler` and
`dask worker` as processes) writes the same index as on local processes:
the same trials, outcomes and metrics, in the schedule's order."""

import csv
import shutil
import socket
import subprocess
import time

import pytest

from tests.conftest import aiko, free_port

PLAN = """\
[campaign]
name = "{name}"
order = "shuffled"
seed = 5

[[trial]]
gait = "sidewinding"
duration = 1.0
repetitions = 3
plant = "ideal"

[[trial]]
gait = "lateral-undulation"
duration = 1.0
repetitions = 3
plant = "ideal"
"""

KEYS = ("entry", "repetition", "file", "outcome", "note", "final_error_m", "rms_error_m",
        "distance_ratio")


def index(folder):
    with open(folder / "campaign.csv") as f:
        return [{k: row[k] for k in KEYS} for row in csv.DictReader(f)]


def wait_for_port(port, proc, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("the dask scheduler ended")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the dask scheduler did not listen")


@pytest.fixture
def cluster():
    """A dask scheduler on a free loopback port and one worker process (no
    nanny: nothing here restarts it)."""
    dask = shutil.which("dask")
    if dask is None:
        pytest.fail("the dask command is not installed (dask[distributed])")
    port = free_port()
    scheduler = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                  "--no-dashboard"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
    worker = None
    try:
        wait_for_port(port, scheduler)
        worker = subprocess.Popen([dask, "worker", f"tcp://127.0.0.1:{port}", "--nworkers", "1",
                                   "--nthreads", "1", "--no-nanny", "--no-dashboard"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        yield f"tcp://127.0.0.1:{port}"
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()


def test_a_virtual_campaign_on_a_dask_cluster_writes_the_local_runs_index(tmp_path, cluster):
    local_plan = tmp_path / "local.toml"
    local_plan.write_text(PLAN.format(name="floor"))
    (tmp_path / "dask").mkdir()
    dask_plan = tmp_path / "dask" / "plan.toml"
    dask_plan.write_text(PLAN.format(name="floor"))
    local = aiko("campaign", str(local_plan), "--time", "virtual", "--workers", "1")
    assert local.returncode == 0, local.stderr
    assert "running them at once on local processes" in local.stdout
    remote = aiko("campaign", str(dask_plan), "--time", "virtual", "--scheduler", cluster)
    assert remote.returncode == 0, remote.stderr
    assert f"running them at once on {cluster}" in remote.stdout
    a, b = index(tmp_path / "floor"), index(tmp_path / "dask" / "floor")
    assert len(a) == 6 and all(r["outcome"] == "completed" for r in a)
    assert a == b                                   # metrics to the last digit
    assert [r["entry"] for r in a] != sorted(r["entry"] for r in a)   # the shuffled order
    assert (tmp_path / "dask" / "floor" / "summary.png").exists()


def test_a_pool_is_for_virtual_time_and_asks_nobody(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(name="real"))
    r = aiko("campaign", str(plan), "--workers", "2")
    assert r.returncode == 2 and "give --time virtual" in r.stderr
    r = aiko("campaign", str(plan), "--time", "virtual", "--workers", "2", "--ask", "always")
    assert r.returncode == 2 and "--ask never" in r.stderr
    assert not (tmp_path / "real").exists()         # nothing started
