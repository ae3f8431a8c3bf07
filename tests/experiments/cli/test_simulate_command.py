"""`aiko simulate`: the command's contract (CSV columns, summary, errors)."""

import csv

import numpy as np
import pytest

from aiko.experiments.cli import main
from tests.conftest import aiko


def test_csv_has_the_contracted_columns_and_rows(tmp_path):
    out = tmp_path / "run.csv"
    assert main(["simulate", "sidewinding", "--duration", "0.5", "--links", "4",
                 "--rate", "10", "--out", str(out)]) == 0
    with out.open() as f:
        rows = list(csv.reader(f))
    header = rows[0]
    assert header == ["t", "x1", "y1", "z1", "x2", "y2", "z2", "x3", "y3", "z3", "x4", "y4", "z4",
                      "ah1", "ah2", "ah3", "av1", "av2", "av3", "work_J"]
    data = np.array(rows[1:], dtype=float)
    np.testing.assert_allclose(data[:, 0], np.arange(6) * 0.1, atol=1e-12)
    assert np.all(np.isfinite(data))
    assert data[0, 3] == pytest.approx(0.0525)  # resting on the ground at t = 0
    # the drives' work: zero at the start, never decreasing, some by the end
    assert data[0, -1] == 0 and np.all(np.diff(data[:, -1]) >= 0) and data[-1, -1] > 0


def test_summary_reports_link6_iterations_and_speed(capsys):
    assert main(["simulate", "still", "--duration", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "link 6: start (" in out and "distance 0.0000 m" in out
    assert "solver iterations mean" in out and "unconverged steps 0" in out
    assert "us/step" in out and "realtime factor" in out


@pytest.mark.parametrize("solver", ["newton", "jor", "sor"])
def test_every_solver_runs_a_gait_and_reports_its_speed(capsys, solver):
    assert main(["simulate", "sidewinding", "--duration", "0.1", "--solver", solver]) == 0
    out = capsys.readouterr().out
    assert f"solver {solver}," in out
    us = float(out.split(" us/step")[0].rsplit(" ", 1)[1])
    assert 0 < us < 1e6


def test_warm_start_option_reaches_the_solver(capsys):
    """--warm-start last is the paper's warm start: the same gait takes more
    sweeps than with the default extrapolated one; newton always uses it."""
    means = {}
    for how in ("extrapolated", "last"):
        assert main(["simulate", "lateral-undulation", "--duration", "0.3",
                     "--warm-start", how]) == 0
        out = capsys.readouterr().out
        assert f"{how} warm start" in out
        means[how] = float(out.split("solver iterations mean ")[1].split()[0])
    assert means["extrapolated"] < means["last"]
    assert main(["simulate", "still", "--duration", "0.01", "--solver", "newton"]) == 0
    assert "last warm start" in capsys.readouterr().out


def test_options_reach_the_model(capsys):
    assert main(["simulate", "still", "--duration", "0.5", "--slope", "20", "--mu", "0.1",
                 "--solver", "newton", "--links", "3", "--dt", "0.0005"]) == 0
    out = capsys.readouterr().out
    assert "3 links, mu_x 0.1, mu_y 0.1, slope 20 deg, solver newton, dt 0.0005 s" in out
    # tan(20 deg) > 0.1: it slides down the slope (-x)
    moved_x = float(out.split("moved (")[1].split(",")[0])
    assert moved_x < -0.05


def test_height_starts_in_the_air(tmp_path):
    out = tmp_path / "h.csv"
    assert main(["simulate", "still", "--duration", "0.05", "--height", "0.2",
                 "--out", str(out)]) == 0
    data = np.genfromtxt(out, delimiter=",", names=True)
    assert data["z1"][0] == pytest.approx(0.2525)
    assert data["z1"][1] < data["z1"][0]


@pytest.mark.parametrize("args,needle", [
    (["simulate", "slither"], "unknown gait"),
    (["simulate", "still", "--dt", "-0.001"], "dt must be a positive number"),
    (["simulate", "still", "--links", "0"], "links must be >= 1"),
    (["simulate", "still", "--k-N", "-3"], "k-N must be positive (or inf)"),
    (["simulate", "still", "--k-N", "nan"], "k-N must be positive (or inf)"),
    (["simulate", "still", "--mu", "0.2", "--mu-x", "0.1"], "either --mu or --mu-x"),
    (["simulate", "still", "--slope", "95"], "slope must lie in"),
    (["simulate", "still", "--solver", "cg"], "invalid choice"),
    (["simulate", "nope.toml"], "no such file"),
])
def test_bad_arguments_give_one_line_and_nonzero_exit(args, needle):
    r = aiko(*args)
    assert r.returncode != 0
    assert needle in r.stderr
    assert r.stderr.count("\n") == 1
    assert "Traceback" not in r.stderr


def test_malformed_toml_is_one_line(tmp_path):
    p = tmp_path / "g.toml"
    p.write_text("[gait]\nA_h = 30\n")
    r = aiko("simulate", str(p))
    assert r.returncode == 2 and "gait.omega_h: missing required key" in r.stderr
    assert r.stderr.count("\n") == 1


def test_unwritable_output_is_one_line(tmp_path):
    r = aiko("simulate", "still", "--duration", "0.01", "--out", str(tmp_path / "no" / "x.csv"))
    assert r.returncode == 2 and "cannot write" in r.stderr and "Traceback" not in r.stderr


def test_figure_uses_the_comparison_figure_with_the_model_alone(tmp_path):
    png = tmp_path / "run.png"
    assert main(["simulate", "sidewinding", "--duration", "0.5", "--figure", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from aiko.experiments.analysis.compare import Paths, comparison_figure
    fig = comparison_figure(Paths(np.zeros(0), np.zeros((0, 3)), np.arange(3.0),
                                  np.zeros((3, 3))), "t")
    labels = fig.axes[2].get_legend_handles_labels()[1]
    assert "model" in labels and not any("experiment" in label for label in labels)
