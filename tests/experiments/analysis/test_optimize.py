"""Gait optimisation: the strategies on known objectives, feasibility, the
Pareto front, a tiny end-to-end `aiko optimize` with its outputs and resume."""

import csv
import json
import math
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.control.gait import PRESETS
from aiko.experiments.analysis.optimize import (
    INFEASIBLE,
    OptimizeConfig,
    OptimizeError,
    evaluate_candidate,
    evaluate_point,
    objective_values,
    pareto_front,
    parse_bounds,
    parse_mu,
    parse_vary,
    run_optimization,
)
from aiko.experiments.analysis.optimize_run import RunFolder
from aiko.experiments.files.gait_file import load_gait_toml
from tests.conftest import AIKO_COMMAND, aiko

SIDEWINDING = PRESETS["sidewinding"]


def known(point_speed, point_cot=None, infeasible=lambda p: False):
    """An evaluate() of known objectives over points (no model)."""
    calls = []

    def evaluate(points):
        calls.append(len(points))
        rows = []
        for p in points:
            if infeasible(p):
                rows.append({"feasible": False, "speed_m_s": math.nan, "cot": math.nan,
                             "work_J": math.nan, "distance_m": math.nan, "violation": 0.5,
                             "reason": "outside the known region"})
                continue
            rows.append({"feasible": True, "speed_m_s": point_speed(p),
                         "cot": point_cot(p) if point_cot else 1.0, "work_J": 1.0,
                         "distance_m": 1.0, "violation": 0.0, "reason": ""})
        return rows
    evaluate.calls = calls
    return evaluate


def test_cma_finds_the_optimum_of_a_known_objective_and_skips_infeasible_points():
    """Speed peaks at A_h 30 deg, delta_h -70 deg; every candidate with
    A_h > 38 deg is infeasible (recorded, never the best)."""
    config = OptimizeConfig(vary=("A_h", "delta_h"), bounds=parse_bounds(None, ["A_h", "delta_h"]),
                            budget=240, seed=3)

    def speed(p):
        return 0.1 - ((p["A_h"] - 30) / 40) ** 2 - ((p["delta_h"] + 70) / 240) ** 2

    res = run_optimization(SIDEWINDING, config, evaluate=known(speed, infeasible=lambda p:
                                                               p["A_h"] > 38))
    assert res.best["A_h"] == pytest.approx(30.0, abs=0.5)
    assert res.best["delta_h"] == pytest.approx(-70.0, abs=2.0)
    bad = [r for r in res.history if not r["feasible"]]
    assert bad and all(r["A_h"] > 38 and r["objective"] > INFEASIBLE for r in bad)
    assert res.best["feasible"] and res.evaluations <= 240
    assert [r["evaluation"] for r in res.history] == list(range(res.evaluations))


def test_the_search_is_deterministic_and_resumes_without_evaluating_twice():
    config = OptimizeConfig(vary=("A_h", "omega_h", "delta_h"),
                            bounds=parse_bounds(None, ["A_h", "omega_h", "delta_h"]),
                            budget=60, seed=5, popsize=6)

    def speed(p):
        return -abs(p["A_h"] - 20) / 40 - abs(p["omega_h"] - 90) / 180

    full = run_optimization(SIDEWINDING, config, evaluate=known(speed))
    # the strategy's draws are its own: other users of numpy's global random
    # state in between change nothing
    noisy = known(speed)

    def draws_between(points):
        np.random.rand(7)
        return noisy(points)

    assert [r["A_h"] for r in run_optimization(SIDEWINDING, config,
                                                evaluate=draws_between).history] == \
        [r["A_h"] for r in full.history]
    part = run_optimization(SIDEWINDING, OptimizeConfig(**{**config.__dict__, "budget": 24}),
                            evaluate=known(speed))
    ev = known(speed)
    resumed = run_optimization(SIDEWINDING, config, previous=part.history, evaluate=ev)
    keys = ("A_h", "omega_h", "delta_h", "speed_m_s")
    assert [[r[k] for k in keys] for r in resumed.history] == \
        [[r[k] for k in keys] for r in full.history]
    assert resumed.evaluated == full.evaluations - 24 == sum(ev.calls)


def test_a_history_of_another_search_is_refused():
    config = OptimizeConfig(vary=("A_h", "delta_h"), bounds=parse_bounds(None, ["A_h", "delta_h"]),
                            budget=12, seed=1, popsize=4)
    run = run_optimization(SIDEWINDING, config, evaluate=known(lambda p: -p["A_h"]))
    other = OptimizeConfig(**{**config.__dict__, "seed": 2})
    with pytest.raises(OptimizeError, match="does not match this search at generation 0"):
        run_optimization(SIDEWINDING, other, previous=run.history,
                         evaluate=known(lambda p: -p["A_h"]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-1, 1), st.floats(0, 5)), min_size=1, max_size=40))
def test_pareto_points_are_mutually_non_dominated_and_dominate_the_rest(points):
    F = np.array(points)
    front = pareto_front(F)
    P = F[front]
    for i in range(len(P)):
        for j in range(len(P)):
            if i != j:
                assert not (np.all(P[j] <= P[i]) and np.any(P[j] < P[i]))
    for k in set(range(len(F))) - set(front.tolist()):
        assert np.any(np.all(P <= F[k], axis=1))  # dominated by, or equal to, a front point


def test_nsga2_finds_a_known_speed_cot_front():
    """speed = x, CoT = 0.1 + x^2 + (y - 0.5)^2 over the unit box of A_h, A_v:
    faster costs more; the front is y = 0.5 (A_v 15 deg), CoT = 0.1 + speed^2."""
    config = OptimizeConfig(vary=("A_h", "A_v"),
                            bounds={"A_h": (0.0, 40.0), "A_v": (0.0, 30.0)},
                            objective="both", budget=400, popsize=20, seed=2)
    res = run_optimization(
        SIDEWINDING, config,
        evaluate=known(lambda p: p["A_h"] / 40,
                       lambda p: 0.1 + (p["A_h"] / 40) ** 2 + (p["A_v"] / 30 - 0.5) ** 2))
    assert len(res.front) >= 8
    F = np.array([objective_values(r, "both") for r in res.front])
    assert len(pareto_front(F)) == len(F)
    # close to the true front: A_v near 15 deg, CoT near 0.1 + speed^2
    assert np.median([abs(r["A_v"] - 15.0) for r in res.front]) < 1.5
    for r in res.front:
        assert 0.1 + r["speed_m_s"] ** 2 <= r["cot"] < 0.1 + r["speed_m_s"] ** 2 + 0.03
    speeds = [r["speed_m_s"] for r in res.front]
    assert max(speeds) > 0.9 and min(speeds) < 0.3     # spread along the front


def test_candidates_beyond_the_limits_or_diverging_are_infeasible_not_errors():
    # A_h 60 deg: the references would be clamped at the joint limit (45 deg)
    row = evaluate_candidate(SIDEWINDING, {"A_h": 60.0}, 1.0)
    assert not row["feasible"] and "joint limit" in row["reason"] and row["violation"] > 0.2
    assert math.isnan(row["speed_m_s"])
    # 400 deg/s of omega_h: more than the motors' speed
    row = evaluate_candidate(SIDEWINDING, {"omega_h": 400.0}, 1.0)
    assert not row["feasible"] and "deg/s" in row["reason"]
    # in-phase horizontal joints at 147 deg/s: the snake flails its links 30 cm high
    flail = {"A_h": 19.2, "omega_h": 146.5, "delta_h": -1.3, "A_v": 12.8, "delta_0": 97.4}
    row = evaluate_candidate(SIDEWINDING, flail, 6.0)
    assert not row["feasible"] and row["reason"].startswith("tumbled: a link rose"), row
    assert row["violation"] > 2.0
    # a 4 ms step with the paper's explicit PD torques: they diverge
    row = evaluate_candidate(SIDEWINDING, {"A_h": 30.0}, 1.0, dt=0.004, drive="explicit")
    assert not row["feasible"] and row["reason"].startswith("diverged"), row
    assert objective_values(row, "speed")[0] > INFEASIBLE


def test_a_feasible_candidate_reports_speed_and_cost_of_transport_per_friction():
    row = evaluate_candidate(SIDEWINDING, {"A_h": 30.0}, 3.0, mu=(0.15, 0.3))
    assert row["feasible"], row
    assert row["speed_m_s"] == min(row["speed@0.15"], row["speed@0.3"]) > 0.005
    assert row["cot"] == max(row["cot@0.15"], row["cot@0.3"]) > 0
    assert 0 < row["work_J"] < 50


def test_on_the_simulated_aiko_the_free_play_is_in_the_score():
    """A fast sidewinding the model alone found (A_v 7 deg) against the
    modules' 4 deg of free play: measured 22.3 cm/s on the model, 22.2 on the
    simulated Aiko without play, 2.1 with it over 12 s (the realistic rig:
    2.2); the paper's preset (A_v 10 deg) keeps 10.1 of its 10.8."""
    from pathlib import Path

    from aiko.experiments.files.gait_file import load_gait_toml

    fast = load_gait_toml(Path(__file__).parents[3] / "benchmarks" / "gaits" /
                          "sidewinding-fast.toml")
    point = {k: math.degrees(getattr(fast, k)) for k in ("A_h", "A_v", "delta_0")}
    model = evaluate_candidate(fast, point, 6.0)
    tight = evaluate_candidate(fast, point, 6.0, backlash_deg=0.0, servo="ideal")
    loose = evaluate_candidate(fast, point, 6.0, backlash_deg=4.0)
    assert model["feasible"] and tight["feasible"] and loose["feasible"]
    assert tight["speed_m_s"] == pytest.approx(model["speed_m_s"], rel=0.05)
    assert loose["speed_m_s"] < 0.4 * model["speed_m_s"], (model, loose)


def test_bad_requests_are_one_line_errors():
    with pytest.raises(OptimizeError, match="unknown 'speed'"):
        parse_vary("A_h,speed")
    with pytest.raises(OptimizeError, match="A_v is not one of the varied"):
        parse_bounds("A_v=0:10", ["A_h"])
    with pytest.raises(OptimizeError, match="need finite LO < HI"):
        parse_bounds("A_h=30:10", ["A_h"])
    with pytest.raises(OptimizeError, match="frictions must be finite and > 0"):
        parse_mu("0.2,-1")
    with pytest.raises(OptimizeError, match="CMA-ES needs at least two varied parameters"):
        OptimizeConfig(vary=("A_h",), bounds=parse_bounds(None, ["A_h"]))
    with pytest.raises(OptimizeError, match="--objective 'fast'"):
        OptimizeConfig(vary=("A_h", "A_v"), bounds=parse_bounds(None, ["A_h", "A_v"]),
                       objective="fast")


def test_aiko_optimize_writes_its_outputs_and_goes_on_where_it_stopped(tmp_path):
    out = tmp_path / "run"
    base = ["optimize", "sidewinding", "--vary", "A_h,delta_h", "--duration", "1.5",
            "--popsize", "4", "--seed", "4", "--workers", "1", "--out", str(out)]
    r = aiko(*base, "--budget", "8")
    assert r.returncode == 0, r.stderr
    assert "best   A_h" in r.stdout and "speed" in r.stdout
    rows = list(csv.DictReader(open(out / "history.csv")))
    assert len(rows) == 8 and rows[0]["A_h"] and rows[0]["feasible"] in ("True", "False")
    best = load_gait_toml(out / "best.toml")
    assert best.soft_start and best.A_v == pytest.approx(SIDEWINDING.A_v)
    assert (out / "convergence.png").read_bytes()[:4] == b"\x89PNG"
    # the best gait is one `aiko simulate` takes as is
    s = aiko("simulate", str(out / "best.toml"), "--duration", "0.2")
    assert s.returncode == 0 and "cost of transport" in s.stdout, s.stderr
    # again with a larger budget: the first 8 are replayed, 4 more simulated
    r = aiko(*base, "--budget", "12")
    assert r.returncode == 0, r.stderr
    assert "continuing" in r.stdout and "(4 simulated now" in r.stdout
    again = list(csv.DictReader(open(out / "history.csv")))
    assert len(again) == 12 and again[:8] == rows
    # another search in the same folder: one line, nothing lost
    r = aiko(*base[:-2], "--seed", "5", "--out", str(out), "--budget", "12")
    assert r.returncode == 2 and "holds another search (differs in seed)" in r.stderr
    assert r.stderr.count("\n") == 1
    assert len(list(csv.DictReader(open(out / "history.csv")))) == 12


def test_ctrl_c_keeps_the_history_and_the_same_command_goes_on(tmp_path):
    import signal
    import time

    out = tmp_path / "run"
    base = [*AIKO_COMMAND, "optimize", "sidewinding", "--vary",
            "A_h,delta_h", "--duration", "1.0", "--popsize", "4", "--seed", "2", "--workers",
            "1", "--out", str(out)]
    proc = subprocess.Popen([*base, "--budget", "40"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    history = out / "history.csv"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if history.exists() and len(history.read_text().splitlines()) >= 5:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "the same command goes on from there" in err, err
    kept = list(csv.DictReader(open(history)))
    assert 4 <= len(kept) < 40
    r = aiko(*base[3:], "--budget", str(len(kept) + 4))
    assert r.returncode == 0 and "continuing" in r.stdout, r.stderr
    again = list(csv.DictReader(open(history)))
    # whole generations: at least 4 more, fewer than a generation beyond that
    assert again[:len(kept)] == kept and len(kept) + 4 <= len(again) < len(kept) + 8


def test_aiko_optimize_both_writes_the_pareto_front(tmp_path):
    out = tmp_path / "pareto"
    r = aiko("optimize", "sidewinding", "--vary", "A_h,omega_h", "--objective", "both",
             "--duration", "1.5", "--budget", "8", "--popsize", "4", "--workers", "2",
             "--out", str(out))
    assert r.returncode == 0, r.stderr
    front = list(csv.DictReader(open(out / "pareto.csv")))
    assert front and (out / "pareto.png").exists()
    F = np.array([[-float(p["speed_m_s"]), float(p["cot"])] for p in front])
    assert len(pareto_front(F)) == len(F)
    tomls = sorted((out / "front").glob("*.toml"))
    assert len(tomls) == len(front)
    g = load_gait_toml(tomls[0])
    assert math.degrees(g.A_h) == pytest.approx(float(front[0]["A_h"]), abs=1e-6)
    doc = json.loads((out / "optimize.json").read_text())
    assert doc["search"]["objective"] == "both" and "speed_m_s" in doc["start"]


def test_run_folder_continues_only_its_own_search(tmp_path):
    config = OptimizeConfig(vary=("A_h", "delta_h"), bounds=parse_bounds(None, ["A_h", "delta_h"]),
                            budget=8, popsize=4, duration=0.5)
    folder = RunFolder.open(tmp_path, SIDEWINDING, config)
    folder.run(evaluate=known(lambda p: -abs(p["A_h"] - 25)))
    again = RunFolder.open(tmp_path, SIDEWINDING, OptimizeConfig(**{**config.__dict__,
                                                                    "budget": 12}))
    assert len(again.previous) == 8 and again.previous[0]["feasible"] is True
    with pytest.raises(OptimizeError, match="differs in objective"):
        RunFolder.open(tmp_path, SIDEWINDING, OptimizeConfig(**{**config.__dict__,
                                                                "objective": "cot"}))


def test_candidates_among_pegs():
    """In the pegs-grid field lateral undulation's own gait goes forward; a
    smaller amplitude would start inside a peg: infeasible, with the reason,
    not simulated. A run folder keeps the scene in its search and refuses to
    continue under another one."""
    from aiko.experiments.files.scene_file import scene_json
    from aiko.model.scene import SCENE_PRESETS

    grid = SCENE_PRESETS["pegs-grid"]
    gait = PRESETS["lateral-undulation"]
    row = evaluate_candidate(gait, {"A_h": 40.0}, 3.0, scene=grid)
    assert row["feasible"], row
    assert row["distance_m"] > 0.2 and row["speed_m_s"] > 0.05
    bad = evaluate_candidate(gait, {"A_h": 20.0}, 3.0, scene=grid)
    assert not bad["feasible"] and "overlaps the peg" in bad["reason"]
    assert bad["wall_s"] < 1.0
    # deeper inside, further from feasible: the strategies walk back out
    worse = evaluate_candidate(gait, {"A_h": 10.0}, 3.0, scene=grid)
    assert worse["violation"] > bad["violation"] > 1.0
    mapping = json.loads(scene_json(grid))
    config = OptimizeConfig(vary=("A_h", "delta_h"), bounds=parse_bounds(None, ["A_h", "delta_h"]),
                            budget=4, popsize=4, duration=0.5, scene=mapping)
    row = evaluate_point(gait, {"A_h": 20.0, "delta_h": -50.0}, config)
    assert "overlaps the peg" in row["reason"]


def test_a_run_folder_keeps_its_scene(tmp_path):
    from aiko.experiments.files.scene_file import scene_json
    from aiko.model.scene import Peg, Scene

    far = json.loads(scene_json(Scene((Peg(9.0, 9.0, 0.05),))))
    config = OptimizeConfig(vary=("A_h", "delta_h"), bounds=parse_bounds(None, ["A_h", "delta_h"]),
                            budget=4, popsize=4, duration=0.5, scene=far)
    folder = RunFolder.open(tmp_path, SIDEWINDING, config)
    folder.run(evaluate=known(lambda p: -abs(p["A_h"] - 25)))
    settings_doc = json.loads((tmp_path / "optimize.json").read_text())
    assert settings_doc["search"]["scene"]["peg"] == [{"x": 9.0, "y": 9.0, "radius": 0.05}]
    with pytest.raises(OptimizeError, match="differs in scene"):
        RunFolder.open(tmp_path, SIDEWINDING, OptimizeConfig(**{**config.__dict__,
                                                                "scene": None}))
