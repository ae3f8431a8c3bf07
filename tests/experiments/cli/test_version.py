"""`aiko --version` says which aiko-hil this is, as every trial log does."""

import sys
from importlib import metadata

import pytest

from aiko.experiments.cli import main
from aiko.experiments.testing import run_virtual_trial


def test_version_names_the_installed_package_and_python(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == (f"aiko-hil {metadata.version('aiko-hil')} "
                   f"(Python {sys.version.split()[0]})")


def test_a_trial_log_keeps_the_same_version(tmp_path):
    trial = run_virtual_trial("still", tmp_path / "t.mcap", duration=0.3, plant="ideal",
                              no_model=True)
    assert trial.reason == "completed"
    assert trial.log.metadata["software_version"] == metadata.version("aiko-hil")
