"""The kernels' fused multiply-add: rounded once, compiled or not."""

from __future__ import annotations

import math

from hypothesis import example, given
from hypothesis import strategies as st
from numba import njit

from aiko.model._fused import _fma_exact, fma

FINITE = st.floats(min_value=-1e100, max_value=1e100, allow_nan=False, allow_infinity=False)


@njit
def _compiled_fma(a, b, c):
    return fma(a, b, c)


def test_one_rounding_where_two_lose_the_result():
    """(1 + 2^-30)(1 - 2^-30) - 1 = -2^-60 exactly; the product alone rounds
    to 1, so an unfused multiply and add gives 0."""
    a, b = 1.0 + 2.0**-30, 1.0 - 2.0**-30
    assert a * b - 1.0 == 0.0
    assert _compiled_fma(a, b, -1.0) == -(2.0**-60)
    assert _fma_exact(a, b, -1.0) == -(2.0**-60)


@given(FINITE, FINITE, FINITE)
@example(1e100, 1e100, -1e100)
@example(0.1, 0.2, -0.02)
def test_the_compiled_fma_is_the_exact_result_rounded(a, b, c):
    assert _compiled_fma(a, b, c) == _fma_exact(a, b, c)


def test_beyond_the_largest_float_and_at_infinity():
    assert _fma_exact(1e300, 1e300, 0.0) == math.inf
    assert _fma_exact(-1e300, 1e300, 1.0) == -math.inf
    assert _compiled_fma(1e300, 1e300, 0.0) == math.inf
    assert math.isnan(_fma_exact(math.inf, 0.0, 1.0))
    assert math.isnan(_compiled_fma(math.inf, 0.0, 1.0))
