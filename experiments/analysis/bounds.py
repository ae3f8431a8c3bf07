"""``--bounds NAME=LO:HI,...`` over default bounds: the parser `aiko fit` and
`aiko optimize` share."""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["parse_bounds_spec"]


def parse_bounds_spec(spec: str | None, defaults: dict[str, tuple[float, float]],
                      error: Callable[[str], Exception], what: str
                      ) -> dict[str, tuple[float, float]]:
    """``defaults`` with the items of ``spec`` ("mu=0.05:0.6,backlash=0:8")
    applied; a bad item raises ``error(message)`` naming it (``what``: where
    the allowed names come from, e.g. "--params mu,backlash")."""
    out = dict(defaults)
    for item in (s.strip() for s in (spec or "").split(",") if s.strip()):
        name, sep, rng = item.partition("=")
        lo, sep2, hi = rng.partition(":")
        name = name.strip()
        if not sep or not sep2 or ":" in hi:
            raise error(f"--bounds {item!r}: expected NAME=LO:HI")
        if name not in out:
            raise error(f"--bounds {item!r}: {name} is not one of {what}")
        try:
            a, b = float(lo), float(hi)
        except ValueError:
            raise error(f"--bounds {item!r}: LO and HI must be numbers") from None
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise error(f"--bounds {item!r}: need finite LO < HI")
        out[name] = (a, b)
    return out
