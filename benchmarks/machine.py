"""What machine a benchmark ran on, for its report."""

from __future__ import annotations

import os
import platform
import re


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
