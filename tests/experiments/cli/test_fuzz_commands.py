"""Bad input by the thousand, through the commands: mutated gait, rig, path,
start-curve and scene files, and truncated, bit-flipped and spliced trial
logs, handed to the `aiko` commands that read them, in-process through
:func:`aiko.experiments.cli.main` (what the console script calls). Each
call does what the command documents (exit 0; `aiko run --check` exits 1
when the preflight refuses the gait) or exits 2 with one line on stderr
that names the command; never a traceback, never a hang past ``ALARM``
seconds, never an output file left behind by a command that failed.

Seeded (hypothesis derandomised) and bounded: ``2 * EXAMPLES`` inputs per
command (half mutated documents, half mutated bytes, as drawn), ``REPLAYS``
for `aiko replay` (each runs the model); the suite runs 30 and 15 (about 40 s
of one worker), ``AIKO_FUZZ_EXAMPLES=N`` and ``AIKO_FUZZ_REPLAYS=N`` run
more by hand (``--hypothesis-show-statistics -rP`` counts the exit codes). The readers alone get more in
tests/experiments/files/test_fuzz_files.py.
"""

from __future__ import annotations

import _thread
import os
import threading
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from aiko.drivers.virtual_time import run_virtual
from aiko.experiments.cli import main
from tests.conftest import trial_with_emulator
from tests.fuzzing import (
    ARC,
    CURVE,
    GAIT,
    PATH,
    RIG,
    SCENE,
    fuzz_settings,
    mutated_bytes,
    mutated_doc,
    rig_doc,
    toml_text,
)
from tests.fuzzing import write_file as _write

EXAMPLES = int(os.environ.get("AIKO_FUZZ_EXAMPLES", "30"))
REPLAYS = int(os.environ.get("AIKO_FUZZ_REPLAYS", "15"))
ALARM = 30.0          # s a command may take on one input


def command(capsys, argv: list[str], outputs: list[Path], codes=(0, 2)) -> int:
    """``aiko ARGV``: its exit code, checked as the module docstring says;
    ``outputs``: files or folders it must not leave behind when it fails."""
    capsys.readouterr()
    timer = threading.Timer(ALARM, _thread.interrupt_main)
    timer.start()
    try:
        rc = main(argv)
    finally:
        timer.cancel()
    out, err = capsys.readouterr()
    assert rc != 130, f"aiko {argv[0]} still busy after {ALARM:g} s"
    if currently_in_test_context():       # --hypothesis-show-statistics counts them
        event(f"aiko {argv[0]}: exit {rc}")
    assert rc in codes, (rc, err[-2000:])
    assert "Traceback" not in err + out, err[-2000:]
    if rc == 2:
        said = [line for line in err.splitlines() if line.startswith("aiko")]
        assert len(said) == 1 and said[0].startswith(f"aiko {argv[0]}:"), err
        for p in outputs:
            left = [p] if p.is_file() else list(p.rglob("*")) if p.is_dir() else []
            assert not left, f"aiko {argv[0]} failed and left {left}"
    return rc


def _inputs(doc: dict, text: bytes | None = None):
    """A mutated document's TOML or the valid one's bytes mutated."""
    base = text if text is not None else toml_text(doc).encode()
    return st.one_of(mutated_doc(doc).map(lambda d: toml_text(d).encode()), mutated_bytes(base))


def _run_check_gait(capsys, folder: Path, data: bytes) -> int:
    gait = _write(folder, "gait.toml", data)
    return command(capsys, ["run", str(gait), "--check"], [], codes=(0, 1, 2))


# ---------------------------------------------------------------- the files
@fuzz_settings(2 * EXAMPLES)
@given(data=_inputs(GAIT))
def test_aiko_run_check_takes_mutated_gait_files(tmp_path, capsys, data):
    _run_check_gait(capsys, tmp_path, data)


@fuzz_settings(2 * EXAMPLES)
@given(data=_inputs(rig_doc(), RIG))
def test_aiko_run_check_takes_mutated_rig_files(tmp_path, capsys, data):
    rig = _write(tmp_path, "aiko.toml", data)
    command(capsys, ["run", "sidewinding", "--check", "--rig-file", str(rig)], [],
            codes=(0, 1, 2))


@fuzz_settings(2 * EXAMPLES)
@given(data=_inputs(PATH))
def test_aiko_preview_takes_mutated_path_files(tmp_path_factory, capsys, data):
    folder = tmp_path_factory.mktemp("path")
    path = _write(folder, "path.toml", data)
    command(capsys, ["preview", str(path), "--out", str(folder / "preview.png")],
            [folder / "preview.png"])


def _simulate_with(capsys, folder: Path, flag: str, data: bytes) -> int:
    spec = _write(folder, "input.toml", data)
    out = folder / "samples.csv"
    return command(capsys, ["simulate", "sidewinding", flag, str(spec), "--duration", "0.01",
                            "--out", str(out)], [out, out.with_suffix(".scene.toml")])


@fuzz_settings(2 * EXAMPLES)
@given(data=st.one_of(_inputs(CURVE), _inputs(ARC)))
def test_aiko_simulate_takes_mutated_start_curves(tmp_path_factory, capsys, data):
    _simulate_with(capsys, tmp_path_factory.mktemp("curve"), "--start-curve", data)


@fuzz_settings(2 * EXAMPLES)
@given(data=_inputs(SCENE))
def test_aiko_simulate_takes_mutated_scenes(tmp_path_factory, capsys, data):
    _simulate_with(capsys, tmp_path_factory.mktemp("scene"), "--scene", data)


# ---------------------------------------------------------------- trial logs
@pytest.fixture(scope="module")
def small_trial(tmp_path_factory) -> tuple[bytes, bytes]:
    """Two real logs of trials (3 emulated modules, motion capture, in virtual
    time; 1.5 s and 1.0 s, as two equal ones would be the same bytes): the
    one to mutate and one to splice in."""
    logs = []
    for name, duration in (("base", 1.5), ("other", 1.0)):
        path = tmp_path_factory.mktemp("logs") / f"{name}.mcap"
        result, *_ = run_virtual(trial_with_emulator(path, duration, nodes=3, mocap=True,
                                                     virtual=True))
        assert result.reason == "completed"
        logs.append(path.read_bytes())
    return logs[0], logs[1]


def _logs(base: bytes, other: bytes):
    """Bit-flipped, cut, inserted ... (``mutated_bytes``) or two logs spliced."""
    spliced = st.tuples(st.integers(0, len(base)), st.integers(0, len(other))).map(
        lambda c: base[:c[0]] + other[c[1]:])
    return st.one_of(mutated_bytes(base), spliced)


def test_the_valid_log_is_read_exported_and_replayed(small_trial, tmp_path, capsys):
    """The starting point works with every command."""
    log = _write(tmp_path, "trial.mcap", small_trial[0])
    assert command(capsys, ["info", str(log)], []) == 0
    assert command(capsys, ["export", str(log), "--format", "blf", "--out",
                            str(tmp_path / "blf")], []) == 0
    assert any((tmp_path / "blf").iterdir())
    assert command(capsys, ["replay", str(log), "--out", str(tmp_path / "replay")], []) == 0


def test_aiko_info_and_export_take_mutated_logs(small_trial, tmp_path_factory, capsys):
    codes: dict[str, list[int]] = {"info": [], "export": []}

    @fuzz_settings(2 * EXAMPLES)
    @given(data=_logs(*small_trial))
    def run(data):
        folder = tmp_path_factory.mktemp("log")
        log = _write(folder, "trial.mcap", data)
        codes["info"].append(command(capsys, ["info", str(log)], []))
        out = folder / "blf"
        codes["export"].append(command(capsys, ["export", str(log), "--format", "blf",
                                                "--out", str(out)], [out]))
    run()
    for name, got in codes.items():     # both answers seen: the mutations reach both paths
        print(f"aiko {name}: {len(got)} logs, exit codes {dict(Counter(got))}")
        assert got.count(0) and got.count(2), (name, got)


def test_aiko_replay_takes_mutated_logs(small_trial, tmp_path_factory, capsys):
    codes: list[int] = []

    @fuzz_settings(REPLAYS)
    @given(data=_logs(*small_trial))
    def run(data):
        folder = tmp_path_factory.mktemp("log")
        log = _write(folder, "trial.mcap", data)
        out = folder / "replay"
        codes.append(command(capsys, ["replay", str(log), "--out", str(out)], [out]))
    run()
    print(f"aiko replay: {len(codes)} logs, exit codes {dict(Counter(codes))}")
    assert codes.count(0) and codes.count(2), codes
