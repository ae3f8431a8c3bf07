"""A lab's own tests of its gaits, in virtual time (docs/testing.md).

Copy this file into your tests folder and run `python -m pytest`: the
`aiko_trial` fixture comes with the aiko-hil package. Each trial runs on the
simulated rig in virtual time: deterministic, a few seconds of computation
for ten seconds of trial, the same records on any machine."""

import math


def test_our_wide_gait_crawls_and_the_model_agrees(aiko_trial, tmp_path):
    gait = tmp_path / "wide.toml"
    gait.write_text("[gait]\nA_h = 35.0\nomega_h = 100.0\ndelta_h = -45.0\npsi_h = 0.0\n"
                    "A_v = 0.0\nomega_v = 0.0\ndelta_v = 0.0\ndelta_0 = 0.0\npsi_v = 0.0\n"
                    "[friction]\nmu_x = 0.15\nmu_y = 0.4\n")
    trial = aiko_trial(gait, duration=6.0, plant="ideal")
    assert trial.reason == "completed" and trial.late_periods == 0
    m = trial.metrics
    assert m["distance_experiment_m"] > 0.05             # it went somewhere
    assert m["rms_error_m"] < 0.05                        # and the model went there too


def test_heading_hold_turns_toward_its_target(aiko_trial):
    trial = aiko_trial("lateral-undulation", duration=12.0, plant="ideal",
                       heading_deg=45.0, plant_mu_x=0.15, plant_mu_y=0.4)
    assert trial.reason == "completed"
    steering = trial.report.steering            # what `aiko run` prints of it
    assert steering["closed_share"] > 0.9       # motion capture fresh all along
    assert abs(steering["final_error_deg"]) < 20.0   # from 90 deg off at the start


def test_a_silent_module_stops_the_trial_where_we_expect(aiko_trial):
    trial = aiko_trial("sidewinding", duration=5.0, plant="ideal", no_model=True,
                       plant_fault=("3:silent@2.0",))
    assert trial.reason == "fault"
    ((t, fault),) = trial.faults
    assert fault["node"] == 3 and fault["fault"] == "lost_node"
    assert 2.0 < t < 2.5 and math.isfinite(t)
