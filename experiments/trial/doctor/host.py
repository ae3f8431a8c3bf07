"""This PC: room for a trial log where trials go, and the model's kernels.

The trial log grows by about :data:`LOG_BYTES_PER_S`: a 600 s trial
(sidewinding, realistic plant, the model in parallel, 10 modules, motion capture
at 100 Hz) wrote 37.6 MB, 63 kB/s. The folder is not made here (``aiko run``
makes it): the nearest folder that exists must take a file.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .report import Check, Status

__all__ = ["check_disk", "check_kernels", "LOG_BYTES_PER_S"]

LOG_BYTES_PER_S = 64_000
"""A trial log's growth, bytes per second of trial (measured, rounded up)."""


def _size(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def check_disk(folder: Path, duration: float) -> Check:
    """One row: the trials folder takes files and has room for a log of a
    ``duration`` s trial."""
    need = duration * LOG_BYTES_PER_S
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return Check("disk", Status.FAIL, f"{folder}: cannot be made ({existing} is a file)",
                     "the rig file's [trials] folder")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return Check("disk", Status.FAIL, f"{existing}: not writable ({exc.strerror})",
                     "the folder's permissions, or a disk mounted read-only")
    free = shutil.disk_usage(existing).free
    made = "" if existing == folder else f" (to be made in {existing})"
    seen = (f"{folder}{made}: writable, {_size(free)} free; a {duration / 60:g} min trial "
            f"writes about {_size(need)}")
    if free < need:
        return Check("disk", Status.FAIL, seen, "free some space or point [trials] folder "
                                                "at another disk")
    return Check("disk", Status.OK, seen)


def check_kernels(say: Callable[[str], None]) -> Check:
    """One row: the model's kernels are in numba's cache (compiled now if not,
    which ``say`` announces: about 25-45 s on a 2-core machine)."""
    from aiko.model import kernels_cached, warm_up

    cached = kernels_cached()
    if not cached:
        say("compiling the model (first run only) ...")
    t0 = time.perf_counter()
    try:
        warm_up()
    except Exception as exc:  # noqa: BLE001 - numba's errors are many; the row says which
        return Check("model kernels", Status.FAIL, f"{type(exc).__name__}: {exc}",
                     "the numba and numpy versions (pip install -e . again)")
    took = time.perf_counter() - t0
    if cached:
        return Check("model kernels", Status.OK, f"compiled (cache loaded in {took:.1f} s)")
    return Check("model kernels", Status.OK, f"compiled now in {took:.0f} s (cached for the "
                                             "next runs)")
