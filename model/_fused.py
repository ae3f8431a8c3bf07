"""A fused multiply-add for the compiled kernels."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import cast

from llvmlite import ir
from numba import types
from numba.core import cgutils, config
from numba.extending import intrinsic


def _fma_typer(typingctx, a, b, c):
    """numba's typing and code of :data:`fma`: float64 arguments only."""
    if not all(isinstance(x, types.Float) for x in (a, b, c)):
        return None
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        d = ir.DoubleType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(d, [d, d, d]),
                                            "llvm.fma.f64")
        return builder.call(fn, args)

    return sig, codegen


def _fma_exact(a: float, b: float, c: float) -> float:
    """a * b + c rounded once, in Python: the kernels' bodies run as Python
    (NUMBA_DISABLE_JIT=1) round as the compiled ones do."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c
    try:
        return float(Fraction(a) * Fraction(b) + Fraction(c))
    except OverflowError:  # beyond the largest float: the infinity of its sign
        return a * b + c


fma = (_fma_exact if getattr(config, "DISABLE_JIT", False)
       else cast(Callable[[float, float, float], float], intrinsic(_fma_typer)))
"""fma(a, b, c) = a * b + c rounded once. In compiled kernels LLVM's
``llvm.fma.f64``, one instruction where the processor has a fused multiply-add.
Written where it is wanted, unlike numba's ``fastmath={"contract"}``, which
leaves the compiler to fuse where it likes, and differently in different
callers: a kernel written with these gives the same bits wherever it is
compiled in (the simulated Aiko's compiled loop and the model called from
Python alike). A multiply-add chain with them is also half as long (one
rounding and one instruction's latency instead of two)."""
