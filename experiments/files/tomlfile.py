"""The one reader of the stack's hand-written TOML files (gaits, paths, start
curves, scenes): it turns a missing, unreadable or malformed file into the
caller's one-line error, and checks tables, keys and numbers the same way for
every file kind."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable
from pathlib import Path

__all__ = ["read_toml", "read_table", "number", "pair"]


def read_toml(path: str | Path, error: Callable[[str, str], Exception], *,
              missing: str = "no such file") -> dict:
    """The file's tables; ``error(source, reason)`` is raised (from the cause)
    when it does not exist (``missing`` is the reason), cannot be read or is
    not TOML (nor UTF-8)."""
    src = str(path)
    try:
        with Path(path).open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError as exc:
        raise error(src, missing) from exc
    except OSError as exc:
        raise error(src, f"cannot read ({exc.strerror})") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise error(src, f"not valid TOML ({exc})") from exc


def read_table(path: str | Path, name: str, keys: tuple[str, ...],
               error: Callable[..., Exception]) -> dict:
    """The one table ``[name]`` of a file that may hold nothing else, with no
    key outside ``keys``; ``error(source, reason, key)`` names what is wrong."""
    src = str(path)
    doc = read_toml(path, error)
    for table in doc:
        if table != name:
            raise error(src, "unknown table", table)
    table = doc.get(name)
    if not isinstance(table, dict):
        raise error(src, f"missing table [{name}]", name)
    for key in table:
        if key not in keys:
            raise error(src, "unknown key", f"{name}.{key}")
    return table


def number(value, source: str, key: str, error: Callable[..., Exception]) -> float:
    """``value`` as a float if it is a finite number (not a boolean), else
    ``error(source, reason, key)``."""
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value)):
        raise error(source, f"must be a finite number, got {value!r}", key)
    return float(value)


def pair(value, source: str, key: str, error: Callable[..., Exception]) -> tuple[float, float]:
    """``value`` as (x, y) if it is a list of two finite numbers."""
    if not isinstance(value, list) or len(value) != 2:
        raise error(source, f"must be an [x, y] pair in m, got {value!r}", key)
    return number(value[0], source, key, error), number(value[1], source, key, error)
