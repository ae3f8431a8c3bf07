"""Keeping the processors from halting: the PM QoS request, the idle-class
spinners, and their end on every way out."""

import os
import signal
import subprocess
import sys
import time

import pytest

from aiko.drivers.awake import Awake, KeepAwake, cpuidle_driver

linux_only = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling")


def _gone(pid: int, within: float = 5.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True       # ended, not yet reaped by its parent
        except OSError:
            return True
        time.sleep(0.05)
    return False


def _policy(pid: int, within: float = 5.0) -> int:
    """The spinner's scheduling policy once it has set it."""
    end = time.monotonic() + within
    while True:
        policy = os.sched_getscheduler(pid)
        if policy == os.SCHED_IDLE or time.monotonic() > end:
            return policy
        time.sleep(0.02)


def test_the_cpuidle_driver_is_read_from_sysfs(tmp_path):
    f = tmp_path / "current_driver"
    f.write_text("intel_idle\n")
    assert cpuidle_driver(str(f)) == "intel_idle"
    f.write_text("none\n")
    assert cpuidle_driver(str(f)) is None
    assert cpuidle_driver(str(tmp_path / "missing")) is None


def test_off_holds_nothing_and_an_unknown_mode_is_refused(tmp_path):
    qos = tmp_path / "qos"
    qos.write_bytes(b"")
    with KeepAwake("off", qos_path=str(qos), driver=None) as awake:
        assert awake == Awake(False, 0, "keep-awake off")
        assert qos.read_bytes() == b""
    assert "processors may halt (keep-awake off)" == str(awake)
    with pytest.raises(ValueError, match="keep-awake mode 'always'"):
        KeepAwake("always")  # type: ignore[arg-type]


def test_with_a_cpuidle_driver_auto_holds_the_latency_request_only(tmp_path):
    qos = tmp_path / "cpu_dma_latency"
    qos.write_bytes(b"")
    keep = KeepAwake("auto", qos_path=str(qos), driver="intel_idle")
    with keep as awake:
        assert awake.latency_held and awake.spinners == 0
        assert qos.read_bytes() == b"\0\0\0\0"      # 0 µs, a native int
        assert keep.spinner_pids == []
        assert str(awake) == "idle latency held at 0 µs"
    assert keep._qos is None                        # the request ends with the file


def test_a_latency_request_not_permitted_says_why(tmp_path):
    with KeepAwake("auto", qos_path=str(tmp_path / "no" / "such"), driver="acpi_idle") as awake:
        assert not awake.latency_held and awake.spinners == 0
        assert "acpi_idle" in awake.reason and "needs root" in awake.reason


@linux_only
def test_without_a_cpuidle_driver_auto_spins_one_idle_process_per_processor(tmp_path):
    cpu = min(os.sched_getaffinity(0))
    keep = KeepAwake("auto", cpus={cpu}, qos_path=str(tmp_path / "none"), driver=None)
    with keep as awake:
        assert awake == Awake(False, 1) and "1 processor kept running" in str(awake)
        [pid] = keep.spinner_pids
        assert _policy(pid) == os.SCHED_IDLE          # pinned before that
        assert os.sched_getaffinity(pid) == {cpu}
    assert _gone(pid)


@linux_only
def test_spin_starts_spinners_even_with_a_driver_and_they_end_on_an_error(tmp_path):
    cpus = set(os.sched_getaffinity(0))
    keep = KeepAwake("spin", qos_path=str(tmp_path / "none"), driver="intel_idle")
    with pytest.raises(RuntimeError, match="the trial failed"), keep as awake:
        assert awake.spinners == len(cpus)
        pids = keep.spinner_pids
        assert all(_policy(p) == os.SCHED_IDLE for p in pids)   # pinned before that
        assert sorted(os.sched_getaffinity(p).pop() for p in pids) == sorted(cpus)
        raise RuntimeError("the trial failed")
    assert all(_gone(p) for p in pids)


_CHILD = """
import sys, time
from aiko.drivers.awake import KeepAwake
keep = KeepAwake("spin", cpus={int(sys.argv[1])}, qos_path="/nonexistent/qos")
keep.__enter__()
print(keep.spinner_pids[0], flush=True)
time.sleep(60)
"""


@linux_only
def test_a_spinner_ends_when_its_process_is_killed():
    cpu = min(os.sched_getaffinity(0))
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(cpu)], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None
        spinner = int(child.stdout.readline())
        assert _policy(spinner) == os.SCHED_IDLE
        child.send_signal(signal.SIGKILL)     # no __exit__, no close()
        child.wait(timeout=10)
        assert _gone(spinner)
    finally:
        child.kill()
        child.wait()
