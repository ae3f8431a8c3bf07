"""Processors kept out of their idle halt while a process keeps time.

A processor with nothing to run halts until an interrupt. A task woken for
it (a module's answer to a SYNC; the physics, pushed to the idle processor when
the trial runner takes its own) runs only once the processor is running again.
On a PC the kernel's cpuidle driver decides how deeply a processor sleeps, and
a PM QoS request of 0 µs (``/dev/cpu_dma_latency`` held open with 0 written,
as ``cyclictest`` does) keeps it in the shallowest state; it needs root. In a
virtual machine without a cpuidle driver a halted virtual processor is handed
back to the hypervisor, which may take tens of milliseconds to run it again
(a trace of the simulated Aiko on a 2-core KVM guest: the physics waited
31 ms on a halted processor while the other one idled). There nothing but
work keeps a processor running: one process per processor spins at
``SCHED_IDLE``, below every other task, which takes the processor back at
once when it wakes. The spinners cost no other task its time, but they keep
the processors busy (power and heat on a laptop), so :class:`KeepAwake`
starts them only where asked (``"spin"``) or, by default (``"auto"``), where
the processors halt with no driver to tune.

:class:`KeepAwake` is a context manager owning both: the QoS file and the
spinners, which it ends when left; a spinner also ends when the process that
started it is gone (``PR_SET_PDEATHSIG`` and its parent checked while it
spins).
"""

from __future__ import annotations

import logging
import os
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

__all__ = ["KeepAwake", "Awake", "AwakeMode", "AWAKE_MODES", "cpuidle_driver"]

log = logging.getLogger(__name__)

AwakeMode = Literal["auto", "spin", "off"]
AWAKE_MODES: tuple[AwakeMode, ...] = ("auto", "spin", "off")
QOS_PATH = "/dev/cpu_dma_latency"
CPUIDLE_DRIVER = "/sys/devices/system/cpu/cpuidle/current_driver"

# the spinner: pinned to its processor, at SCHED_IDLE, ending with its parent
_SPIN = """\
import ctypes, os, signal, sys
parent = int(sys.argv[2])
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
os.sched_setaffinity(0, {int(sys.argv[1])})
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
while os.getppid() == parent:
    for _ in range(200000):
        pass
"""


def cpuidle_driver(path: str = CPUIDLE_DRIVER) -> str | None:
    """The kernel's cpuidle driver ("intel_idle", "acpi_idle", "haltpoll", ...),
    or None where there is none (``none``, or no such file)."""
    try:
        name = Path(path).read_text().strip()
    except OSError:
        return None
    return None if name in ("", "none") else name


@dataclass(frozen=True)
class Awake:
    """What :class:`KeepAwake` holds: ``latency_held`` (the 0 µs PM QoS
    request), ``spinners`` (processors kept running by a spinner) and, where
    neither, the reason."""

    latency_held: bool
    spinners: int
    reason: str = ""

    def __str__(self) -> str:
        held = []
        if self.latency_held:
            held.append("idle latency held at 0 µs")
        if self.spinners:
            held.append(f"{self.spinners} processor{'s' if self.spinners > 1 else ''} kept "
                        "running by an idle-class spinner")
        return "; ".join(held) if held else f"processors may halt ({self.reason})"


class KeepAwake:
    """Keep the processors from halting while inside ``with`` (see the module
    docstring). ``mode``: ``"auto"`` (the QoS request where permitted, the
    spinners where there is no cpuidle driver), ``"spin"`` (the spinners
    always), ``"off"`` (nothing). ``cpus``: the processors to keep running
    (default: those this process may run on). Never raises for want of
    permission; :attr:`awake` says what was got. Enter it on a thread that
    lives as long as the spinners are wanted (a spinner ends with the thread
    that started it: ``PR_SET_PDEATHSIG``)."""

    def __init__(self, mode: AwakeMode = "auto", cpus: set[int] | None = None,
                 qos_path: str = QOS_PATH, driver: str | None | Literal[False] = False) -> None:
        """``qos_path`` and ``driver`` (False: read from sysfs) stand in for
        the machine's in tests."""
        if mode not in AWAKE_MODES:
            raise ValueError(f"keep-awake mode {mode!r}: one of {', '.join(AWAKE_MODES)}")
        self.mode = mode
        self.cpus = cpus
        self.qos_path = qos_path
        self.driver = cpuidle_driver() if driver is False else driver
        self.awake = Awake(False, 0, "not entered")
        self._qos: IO[bytes] | None = None
        self._spinners: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Awake:
        if self.mode == "off":
            self.awake = Awake(False, 0, "keep-awake off")
            return self.awake
        try:
            held = self._hold_latency()
            if self.mode == "spin" or self.driver is None:
                self._start_spinners()
        except BaseException:
            self.close()
            raise
        why = "" if held or self._spinners else (
            f"cpuidle driver {self.driver}; {self.qos_path} not writable (needs root)")
        self.awake = Awake(held, len(self._spinners), why)
        log.info("processors: %s", self.awake)
        return self.awake

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _hold_latency(self) -> bool:
        try:   # the device's file, never one made here
            qos = os.fdopen(os.open(self.qos_path, os.O_WRONLY), "wb", buffering=0)
        except OSError:
            return False
        try:
            qos.write(struct.pack("i", 0))
        except OSError:
            qos.close()
            return False
        self._qos = qos
        return True

    def _start_spinners(self) -> None:
        cpus = self.cpus if self.cpus is not None else _allowed_cpus()
        for cpu in sorted(cpus):
            self._spinners.append(subprocess.Popen(
                [sys.executable, "-S", "-c", _SPIN, str(cpu), str(os.getpid())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, close_fds=True))

    def close(self) -> None:
        """End the spinners and drop the QoS request; safe to call twice."""
        spinners, self._spinners = self._spinners, []
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()
        if self._qos is not None:
            self._qos.close()
            self._qos = None

    @property
    def spinner_pids(self) -> list[int]:
        return [p.pid for p in self._spinners]


def _allowed_cpus() -> set[int]:
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))
