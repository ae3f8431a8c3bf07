"""The lab's example test file of docs/testing.md runs as a lab runs it: by
pytest, in a folder of its own, the `aiko_trial` fixture coming from the
installed package's plugin (pytest's own ``pytester``, in this process: the
kernels are loaded already)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_labs_example_tests_pass_as_copied(pytester):
    example = ROOT / "docs" / "examples" / "test_lab_trials.py"
    pytester.makepyfile(test_lab_trials=example.read_text())
    run = pytester.runpytest_inprocess("-q", "-n", "0", "-p", "no:cacheprovider")
    run.assert_outcomes(passed=3)
