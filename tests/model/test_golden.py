"""Short runs against stored trajectories (tests/model/golden, made by its
regenerate.py): a change of the model's numbers shows up here first."""

import sys
from pathlib import Path

import numpy as np
import pytest

from aiko.experiments.cli import main

GOLDEN = Path(__file__).parent / "golden"
sys.path.insert(0, str(GOLDEN))
from regenerate import CASES  # noqa: E402


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_golden(name, tmp_path):
    out = tmp_path / name
    assert main([*CASES[name], "--out", str(out)]) == 0
    got = np.genfromtxt(out, delimiter=",", names=True)
    want = np.genfromtxt(GOLDEN / name, delimiter=",", names=True)
    assert got.dtype.names == want.dtype.names
    for col in want.dtype.names:
        np.testing.assert_allclose(got[col], want[col], rtol=0, atol=1e-8, err_msg=col)
