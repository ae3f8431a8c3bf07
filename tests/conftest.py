"""Shared test set-up: hypothesis without deadlines (the first call of a numba
kernel may compile or load its cache), the helpers that run the `aiko` command,
start `aiko emulate` or run a whole trial in-process, and the simulated-rig
and emulated-module trials that test modules read (each made once per test run
or per module). Test folders mirror the packages (tests/model for aiko.model,
tests/experiments/trial for aiko.experiments.trial, ...); what several of them
need lives here, imported as ``from tests.conftest import ...``.

The tests stop the processes they start with Ctrl-C (SIGINT), as a user does.
A test run started in the background by a shell without job control inherits
SIGINT ignored, and so would every process it starts; Python's own handler is
put back here, so the children start with SIGINT's default again."""

import asyncio
import contextlib
import fcntl
import gc
import io
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

import can
import pytest
from hypothesis import settings

from aiko.control import PRESETS
from aiko.control.supervisor import NodesMissingError
from aiko.drivers.can_bus import CanDriver
from aiko.drivers.clock import TrialClock
from aiko.drivers.mocap import ViconUdpSource, encode_object_stream
from aiko.drivers.priority import request_normal, request_realtime
from aiko.drivers.virtual_time import LoopClock
from aiko.experiments.files.triallog import TrialLog, read_trial
from aiko.experiments.trial.config import TrialConfig
from aiko.experiments.trial.fanout import Fanout
from aiko.experiments.trial.listeners import PublishListener, TelemetryListener, TrialLogListener
from aiko.experiments.trial.runner import dbc_attachment, run_trial, trial_metadata
from aiko.firmware_interface.emulator import FaultConfig, JointModule
from aiko.firmware_interface.loop_bus import LoopBus
from aiko.firmware_interface.service import EmulatedJoints
from aiko.model.scene import SCENE_PRESETS

pytest_plugins = ["pytester"]   # tests/docs runs the lab's example file as pytest does

signal.signal(signal.SIGINT, signal.default_int_handler)

# The suite's examples are the same on every run (a test fails on the change
# that broke it, not on the day an unlucky draw comes); HYPOTHESIS_PROFILE=explore
# draws new ones, for a search by hand.
settings.register_profile("aiko", deadline=None, max_examples=200, derandomize=True)
settings.register_profile("explore", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "aiko"))

LONGEST_FIRST = (
    "tests/experiments/trial/test_simulated_rig.py",
    "tests/drivers/test_live_view.py",
    "tests/experiments/trial/test_campaign_dask.py",
    "tests/benchmarks/test_soak.py",
    "tests/experiments/cli/test_doctor_command.py",
    "tests/experiments/trial/test_campaign.py",
    "tests/experiments/trial/test_datastream_rig.py",
    "tests/experiments/trial/test_trial.py",
    "tests/experiments/analysis/test_fit.py",
    "tests/experiments/cli/test_fuzz_commands.py",
    "tests/experiments/analysis/test_optimize.py",
    "tests/experiments/trial/test_mqtt_session.py",
    "tests/drivers/test_datastream.py",
    "tests/experiments/trial/test_fuzz_running.py",
    "tests/experiments/rig/test_physics_process.py",
    "tests/experiments/trial/test_startup.py",
    "tests/firmware_interface/test_emulator_bus.py",
    "tests/model/test_twin.py",
    "tests/experiments/analysis/test_replay.py",
    "tests/docs/test_lab_example.py",
)
"""The test files that keep a worker longest (10-35 s each on the 2-core CI
machine, 2026-11-29), handed out first: the workers take a file at a time in
the collection's order (``--no-loadscope-reorder``), and a long file handed
out last keeps one worker busy while the others have nothing left to do. A
file not listed keeps its place after these; the order changes no test's
outcome."""


def pytest_collection_modifyitems(items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After each test its young garbage is collected and what survives is
    frozen (``gc.freeze``): the cycle collector's full passes then scan only
    what the next tests make, not the modules, kernels and figures every test
    before them left in the worker. A full pass over a worker's heap took
    0.1-0.4 s, 55 of them 11 CPU s of a test run; frozen, 2.4-2.8 s. Cyclic
    garbage that had already reached the oldest generation at a test's end
    stays in memory (the workers peaked at 0.5 GB)."""
    gc.collect(1)
    gc.freeze()


AIKO_COMMAND = (sys.executable, "-m", "aiko.experiments.cli")
"""The ``aiko`` command as a process of its own (argv's start)."""

TRUE_MU = 0.3
"""The floor friction of :func:`known_floor_trial` (the gait assumes 0.2)."""
TRUE_BACKLASH_DEG = 4.0
"""The free play of :func:`known_floor_trial`."""


def aiko_run(*args):
    """``aiko run ARGS`` in this process (:func:`aiko`): a trial in virtual time."""
    return aiko("run", *args)


def made_once(tmp_path_factory, name, *args):
    """``aiko run ARGS --out FILE`` made once for the whole test run and shared
    by the xdist workers (each worker asks; the first makes it under a lock,
    the others read its result): a trial in virtual time is the same on every
    run, so one copy serves them all. (the run as a CompletedProcess, FILE)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent                        # the workers' common folder
    folder = base / f"shared-{name}"
    with open(base / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out, result = folder / f"{name}.mcap", folder / "run.json"
        if not result.exists():
            folder.mkdir(exist_ok=True)
            run = aiko_run(*args, "--out", str(out))
            result.write_text(json.dumps({"args": run.args, "returncode": run.returncode,
                                          "stdout": run.stdout, "stderr": run.stderr}))
        done = json.loads(result.read_text())
    return subprocess.CompletedProcess(**done), out


@pytest.fixture(scope="session")
def realistic_trial(tmp_path_factory):
    """sidewinding, 5 s, the realistic simulated Aiko (4 deg free play, the
    modules' servo, 0.5 mm mocap noise), in virtual time: the trials the
    analysis tests read (replay, fit, export, info) need no wall clock."""
    return made_once(tmp_path_factory, "trial", "sidewinding", "--time", "virtual",
                     "--duration", "5")


@pytest.fixture(scope="module")
def realtime_trial(tmp_path_factory):
    """The same trial as :func:`realistic_trial` in real time: the simulated
    Aiko and the parallel model as child processes, slcan over TCP, Vicon
    datagrams over UDP (the tests of real-time behaviour read it)."""
    out = tmp_path_factory.mktemp("realtime") / "trial.mcap"
    run = aiko_process("run", "sidewinding", "--duration", "5", "--out", str(out))
    return run, out


@pytest.fixture(scope="session")
def ideal_trial(tmp_path_factory):
    """sidewinding, 5 s, the ideal simulated Aiko, in virtual time."""
    return made_once(tmp_path_factory, "ideal", "sidewinding", "--plant", "ideal", "--time",
                     "virtual", "--duration", "5")


async def udp_sender(port, subject, malformed_every=0, stop_after=None, deliver=None):
    """A Vicon Tracker stand-in: 100 Hz datagrams, link 6 moving along y at
    1 m/s (occluded for frames 40-49); ``deliver``: hand each datagram to a
    source in this process instead of UDP (virtual time)."""
    loop = asyncio.get_running_loop()
    if deliver is None:
        transport, _ = await loop.create_datagram_endpoint(asyncio.DatagramProtocol,
                                                           remote_addr=("127.0.0.1", port))
    else:
        transport = _Handover(deliver)
    try:
        frame = 0
        while stop_after is None or frame < stop_after:
            frame += 1
            if malformed_every and frame % malformed_every == 0:
                transport.sendto(b"\x01\x02\x03")
            occluded = 40 <= frame < 50
            objs = {} if occluded else {subject: (100.0, 10.0 * frame, 52.5, 0, 0, 0)}
            transport.sendto(encode_object_stream(frame, {"other": (0, 0, 0, 0, 0, 0), **objs}))
            await asyncio.sleep(0.01)
    finally:
        transport.close()


class _Handover:
    def __init__(self, deliver):
        self.sendto = deliver

    def close(self):
        pass


async def trial_with_emulator(path, duration, nodes=3, emulated=None, faults=None, mocap=False,
                              malformed_every=0, telemetry=None, startup_timeout=1.0,
                              steering=None, viewers=(), mocap_stop_after=None, listeners=(),
                              virtual=False):
    """A trial in this process against emulated modules: python-can's virtual
    bus on the wall clock, or (``virtual``, run it with ``run_virtual``) a loop
    bus in virtual time, the Tracker stand-in's datagrams handed over."""
    channel = f"trial-{uuid.uuid4()}"
    if virtual:
        node_bus, pc_bus = LoopBus(channel), LoopBus(channel)
        clock = LoopClock()
    else:
        node_bus = can.Bus(interface="virtual", channel=channel, ignore_config=True)
        pc_bus = can.Bus(interface="virtual", channel=channel, ignore_config=True)
        clock = TrialClock()
    faults = faults or {}
    modules = [JointModule(i, faults=faults.get(i, FaultConfig()))
               for i in range(1, (emulated or nodes) + 1)]
    joints = EmulatedJoints(node_bus, modules, clock=clock.now)
    config = TrialConfig(gait="sidewinding", nodes=nodes, duration=duration,
                         can_interface="virtual", can_channel=channel,
                         startup_timeout=startup_timeout, steering=steering)
    gait = PRESETS["sidewinding"]
    tlog = TrialLog(path, trial_metadata(config, gait), dbc_attachment())
    fanout = Fanout([TrialLogListener(tlog)])
    if telemetry is not None:
        fanout.add(TelemetryListener(telemetry))
    for view in viewers:
        fanout.add(PublishListener(view, full=True))
    for listener in listeners:
        fanout.add(listener)
    can_io = CanDriver(pc_bus, clock)
    result = source = None
    if not virtual:
        request_realtime()   # as `aiko run` runs its trial (the trial's thread only)
    try:
        async with asyncio.TaskGroup() as tg:
            emulator = tg.create_task(joints.run(), name="emulator")
            sender = None
            async with can_io, fanout:
                if mocap and virtual:
                    source = ViconUdpSource("link6", clock)        # fed, no socket
                    sender = tg.create_task(udp_sender(0, "link6", malformed_every,
                                                       mocap_stop_after, source.take_datagram),
                                            name="vicon")
                    result = await run_trial(config, gait, can_io, clock, fanout,
                                             mocap_source=source, mocap_links=bool(viewers))
                elif mocap:
                    async with ViconUdpSource("link6", clock, host="127.0.0.1", port=0) as source:
                        sender = tg.create_task(udp_sender(source.port, "link6", malformed_every,
                                                           mocap_stop_after), name="vicon")
                        result = await run_trial(config, gait, can_io, clock, fanout,
                                                 mocap_source=source, mocap_links=bool(viewers))
                else:
                    result = await run_trial(config, gait, can_io, clock, fanout)
            await asyncio.sleep(0.05)  # let the emulator take the last frames
            emulator.cancel()
            if sender is not None:
                sender.cancel()
    except* NodesMissingError as eg:  # unwrap the TaskGroup's group for the caller
        raise eg.exceptions[0] from None
    finally:
        if not virtual:
            request_normal()
        tlog.close()
        node_bus.shutdown()
        pc_bus.shutdown()
    return result, read_trial(path), modules, source


def spawn(*args):
    return subprocess.Popen([*AIKO_COMMAND, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def emulator_channel(proc):
    """The python-can channel a starting `aiko emulate` (stdout a text pipe)
    prints when it serves, or None if it does not within its first lines."""
    for _ in range(20):
        line = proc.stdout.readline()
        if line.startswith("channel: "):
            return line.split()[1]
    return None


def start_emulator(*extra):
    proc = spawn("emulate", "--nodes", "3", "--port", "0", *extra)
    channel = emulator_channel(proc)
    if channel is None:
        proc.kill()
        raise AssertionError("aiko emulate did not start")
    return proc, channel


def stop(proc):
    """Stop `aiko emulate`, after giving the frames already on their way over TCP
    (e.g. the safe-stop NMT sent just before the client exited) time to arrive."""
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    return proc.returncode, out, err


def wait_for_records(path, channel, count, timeout=60.0, proc=None):
    """Wait until the trial log being written at ``path`` holds ``count``
    records of ``channel`` (a trial under way), not a fixed time: on a loaded
    machine a start can take seconds longer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the trial ended before {count} {channel} records")
        if path.exists():
            try:
                if read_trial(path, topics=(channel,)).counts.get(channel, 0) >= count:
                    return
            except Exception:  # noqa: BLE001 - a file still being written
                pass
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} {channel} records in {path} after {timeout} s")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_scheduler(port, proc, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("the dask scheduler ended")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the dask scheduler did not listen")


@pytest.fixture
def dask_cluster():
    """A Dask cluster as a lab runs one: `dask scheduler` on a free loopback
    port and one `dask worker` process (no nanny: nothing here restarts it);
    its address."""
    dask = shutil.which("dask")
    if dask is None:
        pytest.fail("the dask command is not installed (dask[distributed])")
    port = free_port()
    scheduler = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                  "--no-dashboard"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
    worker = None
    try:
        _wait_for_scheduler(port, scheduler)
        worker = subprocess.Popen([dask, "worker", f"tcp://127.0.0.1:{port}", "--nworkers", "1",
                                   "--nthreads", "1", "--no-nanny", "--no-dashboard"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        yield f"tcp://127.0.0.1:{port}"
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()


def robot_args(channel, nodes):
    return ["--rig", "robot", "--can-interface", "slcan", "--can-channel", channel,
            "--nodes", str(nodes), "--no-model"]


@pytest.fixture(scope="module")
def undulation(tmp_path_factory):
    """lateral-undulation (40 degrees, curved start) on the realistic simulated
    Aiko's ten modules in virtual time, default fault policy, ending straight
    (the start-up against `aiko emulate` over slcan in real time:
    tests/experiments/trial/test_trial.py)."""
    out = tmp_path_factory.mktemp("undulation") / "trial.mcap"
    run = aiko_run("lateral-undulation", "--time", "virtual", "--no-model", "--duration", "3",
                   "--end", "straight", "--out", str(out))
    return run, read_trial(out)


@pytest.fixture(scope="module")
def known_floor_trial(tmp_path_factory):
    """3 s of sidewinding on the realistic simulated Aiko (4 deg free play, the
    modules' servo) on a floor of mu 0.3, the gait assuming 0.2. Without the
    parallel model: a fit needs only the experiment, and on two cores the
    model's process takes CPU from the simulated Aiko, whose physics then
    falls behind in the free play's start transient (its first 0.5 s cost
    1.1-1.5 s of one core at 0.5 ms steps, 52 sweeps a step) and its motion
    capture reports positions up to 0.5 s old as fresh. Measured, the rig-trial
    fit (budget 30) with the model beside it: 1.45- to 2.23-fold in six
    trials; without: 2.6- to 4.8-fold in three."""
    out = tmp_path_factory.mktemp("fit") / "floor.mcap"
    run = aiko_run("sidewinding", "--plant-mu", str(TRUE_MU), "--backlash-deg",
                   str(TRUE_BACKLASH_DEG), "--duration", "3", "--no-model", "--time", "virtual",
                   "--out", str(out))
    assert run.returncode == 0, run.stderr
    return out


@pytest.fixture(scope="module")
def pegs_trial(tmp_path_factory):
    """lateral undulation, 4 s, the ideal simulated Aiko in the pegs-grid
    field, started along the gait's curve (where the field leaves room)."""
    d = tmp_path_factory.mktemp("pegs")
    curve = d / "curve.toml"
    curve.write_text("[curve]\ngait = true\n")
    out = d / "trial.mcap"
    run = aiko_run("lateral-undulation", "--plant", "ideal", "--duration", "4", "--scene",
                   "pegs-grid", "--start-curve", str(curve), "--time", "virtual",
                   "--out", str(out))
    return run, out, SCENE_PRESETS["pegs-grid"]


@pytest.fixture(scope="module")
def late_mocap_trial(tmp_path_factory):
    """The ideal simulated Aiko with 150 ms of motion-capture latency injected,
    in virtual time (the physics never lags: every sample is exactly as old
    as the injected latency): (log, the physics' lag, 0 s)."""
    out = tmp_path_factory.mktemp("late") / "late.mcap"
    run = aiko_run("sidewinding", "--plant", "ideal", "--mocap-latency-ms", "150",
                   "--duration", "6", "--no-model", "--time", "virtual", "--out", str(out))
    assert run.returncode == 0, run.stderr
    assert "physics lag max 0.0 ms, 0 late updates" in run.stdout, run.stdout
    return out, 0.0


def aiko(*args, cwd=None):
    """``aiko ARGS``, the command line's ``main`` called in this process (the
    kernels and imports already loaded), its stdout, stderr and log lines
    captured: a ``CompletedProcess`` as :func:`aiko_process` gives. For
    everything that needs no process of its own: a trial in virtual time,
    replay, fit, sweep, export, doctor, ``--check``; a real-time trial (it asks
    for real-time priority and owns child processes) or a test of signals runs
    :func:`aiko_process`."""
    from aiko.experiments.cli import LOG_FORMAT, main

    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)      # what main's basicConfig shows a user
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)
    here = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:         # --help, --version
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        os.chdir(here)
        root.removeHandler(handler)
    return subprocess.CompletedProcess(["aiko", *args], code, out.getvalue(), err.getvalue())


def aiko_process(*args, cwd=None, timeout=600):
    """``aiko ARGS`` as a process of its own, as a user types it (stdout,
    stderr, returncode)."""
    return subprocess.run([*AIKO_COMMAND, *args],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


@pytest.fixture
def broker(tmp_path):
    """A mosquitto broker on a free loopback port (the port), anonymous, for one test."""
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not os.path.exists(exe):
        if os.environ.get("CI"):
            pytest.fail("mosquitto is not installed (.ci/run installs it)")
        pytest.skip("mosquitto not installed")
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    proc = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("mosquitto did not start")
    yield port
    proc.terminate()
    proc.wait(timeout=10)
