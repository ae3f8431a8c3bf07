"""A campaign in virtual time on a real Dask cluster (`dask scheduler` and
`dask worker` as processes) writes the same index as on local processes:
the same trials, outcomes and metrics, in the schedule's order."""

import csv

from tests.conftest import aiko

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


def test_a_virtual_campaign_on_a_dask_cluster_writes_the_local_runs_index(tmp_path, dask_cluster):
    local_plan = tmp_path / "local.toml"
    local_plan.write_text(PLAN.format(name="floor"))
    (tmp_path / "dask").mkdir()
    dask_plan = tmp_path / "dask" / "plan.toml"
    dask_plan.write_text(PLAN.format(name="floor"))
    local = aiko("campaign", str(local_plan), "--time", "virtual", "--workers", "1")
    assert local.returncode == 0, local.stderr
    assert "running them at once on local processes" in local.stdout
    remote = aiko("campaign", str(dask_plan), "--time", "virtual", "--scheduler", dask_cluster)
    assert remote.returncode == 0, remote.stderr
    assert f"running them at once on {dask_cluster}" in remote.stdout
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
