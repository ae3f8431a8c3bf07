"""Shared test set-up: hypothesis without deadlines (the first call of a numba
kernel may compile or load its cache), and the simulated-rig trials that
several test modules read (made once per test run).

The tests stop the processes they start with Ctrl-C (SIGINT), as a user does.
A test run started in the background by a shell without job control inherits
SIGINT ignored, and so would every process it starts; Python's own handler is
put back here, so the children start with SIGINT's default again."""

import signal
import subprocess
import sys

import pytest
from hypothesis import settings

signal.signal(signal.SIGINT, signal.default_int_handler)

settings.register_profile("aiko", deadline=None, max_examples=200)
settings.load_profile("aiko")


def aiko_run(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "aiko.experiments.cli", "run", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def realistic_trial(tmp_path_factory):
    """sidewinding, 5 s, the realistic simulated Aiko (4 deg free play, the
    modules' servo, 0.5 mm mocap noise)."""
    out = tmp_path_factory.mktemp("rig") / "trial.mcap"
    run = aiko_run("sidewinding", "--duration", "5", "--out", str(out))
    return run, out


@pytest.fixture(scope="session")
def ideal_trial(tmp_path_factory):
    """sidewinding, 5 s, the ideal simulated Aiko."""
    out = tmp_path_factory.mktemp("rig") / "ideal.mcap"
    run = aiko_run("sidewinding", "--plant", "ideal", "--duration", "5", "--out", str(out))
    return run, out
