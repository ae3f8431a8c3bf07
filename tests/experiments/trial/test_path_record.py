"""The trial's path record gives back what was appended, across its blocks."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.experiments.trial.path_record import BLOCK_ROWS, PathRecord


@settings(max_examples=20, derandomize=True)
@given(st.integers(0, 3 * BLOCK_ROWS + 5))
def test_arrays_are_the_samples_in_order(n):
    rec = PathRecord()
    rng = np.random.default_rng(n)
    t, p = np.sort(rng.random(n)), rng.normal(size=(n, 3))
    for ti, pi in zip(t, p, strict=True):
        rec.append(ti, tuple(pi) if ti < 0.5 else pi)   # a tuple or an array
    te, pe = rec.arrays()
    assert len(rec) == n and te.shape == (n,) and pe.shape == (n, 3)
    np.testing.assert_array_equal(te, t)
    np.testing.assert_array_equal(pe, p)


def test_blocks_are_allocated_as_the_path_grows():
    rec = PathRecord()
    for k in range(BLOCK_ROWS + 1):
        rec.append(k * 0.05, (k, 0.0, 0.0))
    assert len(rec._blocks) == 2
    te, pe = rec.arrays()
    assert te[-1] == BLOCK_ROWS * 0.05 and pe[-1, 0] == BLOCK_ROWS
    pe[0, 0] = -1.0                         # the arrays are copies
    assert rec.arrays()[1][0, 0] == 0.0
