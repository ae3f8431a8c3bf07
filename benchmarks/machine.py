"""What machine a benchmark ran on, for its report."""

from __future__ import annotations

import os
import platform
import re
import time


def describe() -> str:
    """Architecture, core count, CPU model and Python version."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            cpu = m.group(1) if m else cpu
    except OSError:
        pass
    return (f"{platform.machine()}, {os.cpu_count()} cores, {cpu}, Python "
            f"{platform.python_version()}")


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) clock ticks of all processors since boot, from
    /proc/stat: the time the hypervisor ran something else while this guest
    had work (None where there is no /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    ticks = [int(x) for x in fields[1:9]]   # user nice system idle iowait irq softirq steal
    return ticks[7], sum(ticks)


def steal_percent(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of the processors' time stolen by the hypervisor between two
    :func:`cpu_times` readings, %."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return 100.0 * (after[0] - before[0]) / (after[1] - before[1])


def wait_for_quiet(limit_pct: float, sample_s: float = 10.0,
                   give_up_s: float = 3600.0) -> tuple[float | None, float]:
    """Wait until the hypervisor stole less than ``limit_pct`` % of the
    processors' time over one ``sample_s`` stretch, for at most ``give_up_s``.

    Returns (the last sample's steal %, seconds waited). This chooses when a run
    *starts*, never which runs are kept: the run's own steal is reported beside
    its figures whatever it turns out to be. Where /proc/stat is missing it
    returns (None, 0.0) at once.
    """
    t0 = time.monotonic()
    while True:
        before = cpu_times()
        if before is None:
            return None, 0.0
        time.sleep(sample_s)
        steal = steal_percent(before, cpu_times())
        waited = time.monotonic() - t0
        if steal is None or steal < limit_pct or waited >= give_up_s:
            return steal, waited
