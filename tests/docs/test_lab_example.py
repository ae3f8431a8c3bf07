"""The lab's example test file of docs/testing.md runs as a lab runs it: by
pytest, in a folder of its own, the `aiko_trial` fixture coming from the
installed package's plugin.

In a pytest process of its own (pytester's subprocess run), not in this one:
an in-process run takes back every module first imported during it, and
numba imports some of its own modules only at its first compile; had that
compile happened inside the example's run, numba's next compile in this
worker would import them again and fail on its registries ("duplicate
registration"), which a clean checkout's first run showed."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_labs_example_tests_pass_as_copied(pytester):
    example = ROOT / "docs" / "examples" / "test_lab_trials.py"
    pytester.makepyfile(test_lab_trials=example.read_text())
    run = pytester.runpytest_subprocess("-q", "-n", "0", "-p", "no:cacheprovider", timeout=600)
    run.assert_outcomes(passed=3)
