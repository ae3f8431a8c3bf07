"""Sweeps on the local pool and a Dask LocalCluster; export of a trial as CSV,
Vector ASC and BLF (read back with python-can); aiko info."""

import csv
import json
import math

import can
import numpy as np
import pytest

from aiko.control import PRESETS
from aiko.experiments.analysis.executor import open_executor
from aiko.experiments.analysis.export import (
    can_messages,
    export_can,
    export_csv,
    trial_info,
)
from aiko.experiments.analysis.sweep import (
    SweepError,
    grid_points,
    parse_grid,
    run_sweep,
    sweep_figure,
    sweep_point,
)
from aiko.experiments.files.triallog import TrialLogError, read_trial, stream_frames
from aiko.model import SolverParams
from tests.conftest import aiko


def test_grid_specs_parse_and_bad_ones_are_named():
    grid = parse_grid("mu=0.1:0.5:3, A_h=20")
    np.testing.assert_allclose(grid["mu"], [0.1, 0.3, 0.5])
    assert grid_points(grid) == [{"mu": 0.1, "A_h": 20.0}, {"mu": 0.3, "A_h": 20.0},
                                 {"mu": 0.5, "A_h": 20.0}]
    for bad, needle in [("speed=1", "NAME one of"), ("mu=0.1:0.2", "LO:HI:N"),
                        ("mu=a:b:3", "LO:HI:N"), ("mu=-1", ">= 0"),
                        ("mu=0.1,mu_x=0.2", "not both"), ("A_h=1,A_h=2", "given twice"),
                        ("mu=0.1:0.2:0", "N >= 1")]:
        with pytest.raises(SweepError, match=needle):
            parse_grid(bad)


SWEEP_GRID = "mu=0.15:0.3:2,A_h=20:30:2"


def stable(rows):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]


def test_a_sweep_gives_the_same_table_on_the_local_pool_and_on_a_dask_cluster():
    from distributed import LocalCluster

    gait = PRESETS["sidewinding"]
    grid = parse_grid(SWEEP_GRID)
    with open_executor(workers=2) as pool:
        local = run_sweep(gait, grid, 1.0, executor=pool)
    # the pool's two processes finish out of order; the cluster's one worker
    # (and its nanny) is the dask path's check
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster:
        with open_executor(cluster.scheduler_address) as ex:
            dask = run_sweep(gait, grid, 1.0, executor=ex)
    inline = run_sweep(gait, grid, 1.0)
    assert len(local) == 4 and not any(r["error"] for r in local)
    assert stable(local) == stable(dask) == stable(inline)
    assert [(r["mu"], r["A_h"]) for r in local] == [(0.15, 20.0), (0.15, 30.0), (0.3, 20.0),
                                                    (0.3, 30.0)]
    # larger amplitude, farther: the model reacts to what was varied
    assert local[1]["distance_m"] > local[0]["distance_m"] > 0.01


def test_a_failed_point_is_a_row_with_its_error():
    row = sweep_point(PRESETS["sidewinding"], {"mu": 0.2}, 0.5,
                      solver=SolverParams(dt=0.05, drive="explicit"))
    assert row["error"] and math.isnan(row["distance_m"]) and row["mu"] == 0.2


def test_sweep_figure_heat_map_and_line(tmp_path):
    grid = parse_grid("mu=0.1:0.3:3,A_h=20:30:2")
    rows = [{**p, "distance_m": p["mu"] * p["A_h"], "error": ""} for p in grid_points(grid)]
    rows[2]["distance_m"] = math.nan   # a failed point stays blank
    fig = sweep_figure(rows, grid, "distance", "test")
    fig.savefig(tmp_path / "heat.png")
    assert len(fig.axes) == 2   # the map and its colour bar
    line = sweep_figure(rows[:3:2], {"mu": grid["mu"][:2], "A_h": grid["A_h"][:1]},
                        "distance", "line")
    assert len(line.axes) == 1 and len(line.axes[0].lines) == 1


def test_aiko_sweep_writes_the_table_and_figure(tmp_path):
    r = aiko("sweep", "sidewinding", "--grid", "mu=0.2:0.3:2", "--duration", "0.5",
             "--workers", "2", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(tmp_path / "sweep-sidewinding.csv")))
    assert [float(row["mu"]) for row in rows] == [0.2, 0.3]
    assert (tmp_path / "sweep-sidewinding.png").read_bytes()[:4] == b"\x89PNG"
    bad = aiko("sweep", "sidewinding", "--grid", "speed=1", "--out", str(tmp_path))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "NAME one of" in bad.stderr


@pytest.mark.parametrize("fmt", ["asc", "blf"])
def test_exported_can_logs_read_back_the_logged_frames_exactly(ideal_trial, tmp_path, fmt):
    data = read_trial(ideal_trial[1])
    logged = can_messages(data)
    assert len(logged) == len(data.records["/can/tx"]) + len(data.records["/can/rx"])
    path = tmp_path / f"t.{fmt}"
    # streamed from the file, in the order the loaded trial gives
    streamed = list(stream_frames(ideal_trial[1]))
    assert streamed == data.can_frames()
    assert export_can(iter(streamed), data.wall_start(), path) == len(logged)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"t.{fmt}"]   # no part left
    back = list(can.LogReader(str(path)))
    assert [(m.arbitration_id, bytes(m.data), m.is_rx, m.is_extended_id) for m in back] == \
        [(m.arbitration_id, bytes(m.data), m.is_rx, False) for m in logged]
    t_back = np.array([m.timestamp for m in back])
    t_logged = np.array([m.timestamp for m in logged])
    # ASC stores times from its start in microseconds; BLF absolute in nanoseconds
    np.testing.assert_allclose(t_back - t_back[0], t_logged - t_logged[0], atol=2e-6)


def test_csv_export_and_info(ideal_trial, tmp_path):
    data = read_trial(ideal_trial[1])
    files = {p.name: p for p in export_csv(data, tmp_path, "ideal")}
    assert {"ideal-references.csv", "ideal-joint_state.csv", "ideal-mocap.csv",
            "ideal-model.csv", "ideal-events.csv"} <= set(files)
    refs = list(csv.DictReader(open(files["ideal-references.csv"])))
    assert len(refs) == len(data.records["/references"]) and "alpha_h_10" in refs[0]
    assert sum(1 for _ in open(files["ideal-mocap.csv"])) == 1 + len(data.records["/mocap"])
    info = trial_info(data)
    assert info["gait"] == "sidewinding" and info["rig"] == "simulated"
    assert info["gait_periods"] == 51 and info["phases"][:3] == ["bring-up", "ramp", "gait"]
    assert info["comparison"]["rms_error_m"] < 0.01
    assert info["scene"] == "flat floor"
    r = aiko("info", str(ideal_trial[1]), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["channels"] == info["channels"]
    r = aiko("export", str(ideal_trial[1]), "--format", "blf", "--out", str(tmp_path))
    assert r.returncode == 0 and f"{len(can_messages(data))} CAN frames" in r.stdout
    notlog = tmp_path / "x.mcap"
    notlog.write_text("no")
    r = aiko("info", str(notlog))
    assert r.returncode == 2 and "not an MCAP file" in r.stderr and "Traceback" not in r.stderr


def test_an_unreachable_scheduler_is_a_one_line_error(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = aiko("sweep", "still", "--grid", "mu=0.2", "--duration", "0.1", "--scheduler",
             f"tcp://127.0.0.1:{port}", "--out", str(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert f"executor tcp://127.0.0.1:{port}: cannot reach the scheduler" in r.stderr
    assert not list(tmp_path.iterdir())


def test_a_sweep_among_pegs():
    """The amplitude of lateral undulation in the pegs-grid field: the preset's
    40 deg goes forward; 20 deg starts inside a peg of the middle row (a row
    with its error, the sweep goes on)."""
    from aiko.model.scene import SCENE_PRESETS

    rows = run_sweep(PRESETS["lateral-undulation"], parse_grid("A_h=20:40:2"), 3.0,
                     scene=SCENE_PRESETS["pegs-grid"])
    assert "overlaps the peg at" in rows[0]["error"]
    # forward (+x, give or take link 6's own swing), where the bare floor goes back
    assert rows[1]["error"] == "" and rows[1]["distance_m"] > 0.3
    assert abs(rows[1]["heading_deg"]) < 30


@pytest.mark.parametrize("fmt", ["asc", "blf"])
def test_a_can_export_that_fails_leaves_no_file(tmp_path, fmt):
    def frames():
        yield (0.0, "/can/tx", 0x80, b"")
        raise TrialLogError("t.mcap", "cannot read (Input/output error)")
    with pytest.raises(TrialLogError):
        export_can(frames(), 0.0, tmp_path / f"t.{fmt}")
    assert list(tmp_path.iterdir()) == []
