"""Reading the stack's hand-written TOML files (gaits, paths, curves): one
place that turns a missing, unreadable or malformed file into the caller's
one-line error."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

__all__ = ["read_toml"]


def read_toml(path: str | Path, error: Callable[[str, str], Exception]) -> dict:
    """The file's tables; ``error(source, reason)`` is raised (from the cause)
    when it does not exist, cannot be read or is not TOML."""
    src = str(path)
    try:
        with Path(path).open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError as exc:
        raise error(src, "no such file") from exc
    except OSError as exc:
        raise error(src, f"cannot read ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise error(src, f"not valid TOML ({exc})") from exc
