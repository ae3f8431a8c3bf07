"""Bad input by the thousand: every reader of a file a user hands the stack
(gait, path, start curve, scene, rig file, trial log) gets mutated copies of a
valid file (bytes flipped, cut, inserted, deleted; values swapped for other
types, NaN, infinities, huge or negative numbers; keys dropped or added) and
must answer each with a value or with the stack's own error (AikoError), whose
message is one line: what the command prints before it exits 2. Anything else
(a traceback) fails the test with the file that caused it.

Seeded (hypothesis derandomised) and bounded: ``EXAMPLES`` files per reader and
kind of mutation; the counts tried are in the closing notes of the work that
added it. What each found is fixed at its cause, with a regression test here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from aiko.control.preflight import preflight
from aiko.experiments.files.gait_file import load_gait_toml
from aiko.experiments.files.path_file import load_path_toml
from aiko.experiments.files.rig_file import load_rig_file
from aiko.experiments.files.scene_file import load_scene
from aiko.experiments.files.start_curve import load_start_curve, start_q
from aiko.experiments.files.triallog import TrialLog, read_trial
from aiko.model import SnakeModel, SnakeParams
from aiko.model.errors import AikoError
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

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = 150
FUZZ = fuzz_settings(EXAMPLES)


def answered(load, path: Path):
    """``load(path)``'s value, or None for the stack's one-line error."""
    try:
        return load(path)
    except AikoError as exc:
        text = str(exc)
        assert text and "\n" not in text, repr(text)
        return None


# -------------------------------------------------------------------- readers
def _gait(path):
    gait = load_gait_toml(path)
    preflight(gait, 10, 15.0)      # what aiko run does next with it
    return gait


def _curve(path):
    curve = load_start_curve(path)
    return start_q(curve, SnakeParams(), source=str(path))


def _scene(path):
    scene = load_scene(path)
    SnakeModel(SnakeParams(), scene=scene)
    return scene


READERS = {"gait": (_gait, GAIT), "path": (load_path_toml, PATH), "curve": (_curve, CURVE),
           "arc": (_curve, ARC), "scene": (_scene, SCENE)}


def test_the_valid_files_are_read(tmp_path):
    """The starting points are valid: mutations start from files that work."""
    for name, (load, doc) in READERS.items():
        assert load(_write(tmp_path, f"{name}.toml", toml_text(doc))) is not None, name
    assert load_rig_file(ROOT / "docs" / "examples" / "aiko.toml") is not None


def _fuzz_values(name):
    load, doc = READERS[name]

    @FUZZ
    @given(mutated=mutated_doc(doc))
    def run(tmp_path_factory, mutated):
        folder = tmp_path_factory.mktemp(name)
        answered(load, _write(folder, f"{name}.toml", toml_text(mutated)))
    return run


def _fuzz_bytes(name):
    load, doc = READERS[name]
    base = toml_text(doc).encode()

    @FUZZ
    @given(data=mutated_bytes(base))
    def run(tmp_path_factory, data):
        folder = tmp_path_factory.mktemp(name)
        answered(load, _write(folder, f"{name}.toml", data))
    return run


test_gait_values = _fuzz_values("gait")
test_gait_bytes = _fuzz_bytes("gait")
test_path_values = _fuzz_values("path")
test_path_bytes = _fuzz_bytes("path")
test_curve_values = _fuzz_values("curve")
test_arc_values = _fuzz_values("arc")
test_curve_bytes = _fuzz_bytes("curve")
test_scene_values = _fuzz_values("scene")
test_scene_bytes = _fuzz_bytes("scene")


@FUZZ
@given(data=mutated_bytes(RIG))
def test_rig_file_bytes(tmp_path_factory, data):
    answered(load_rig_file, _write(tmp_path_factory.mktemp("rig"), "aiko.toml", data))


@FUZZ
@given(mutated=mutated_doc(rig_doc()))
def test_rig_file_values(tmp_path_factory, mutated):
    answered(load_rig_file, _write(tmp_path_factory.mktemp("rig"), "aiko.toml",
                                   toml_text(mutated)))


# ------------------------------------------------------------------ trial logs
def _small_log(path: Path) -> bytes:
    with TrialLog(path, {"gait": "sidewinding", "nodes": 3}) as log:
        for k in range(30):
            t = 0.1 * k
            log.write("/can/tx", t, {"id": 0x80, "data": f"{k:02x}"})
            log.write("/mocap", t, {"frame": k, "position": [0.01 * k, 0.0, 0.06]})
            log.write("/events", t, {"kind": "phase", "data": {"k": k}})
    return path.read_bytes()


def test_trial_log_mutations(tmp_path):
    """Truncated, bit-flipped and spliced logs: read_trial reads what it can
    (a truncated log says so) or gives the one-line error; run as one
    hypothesis test over the log's bytes."""
    base = _small_log(tmp_path / "base.mcap")
    other = _small_log(tmp_path / "other.mcap")
    whole = read_trial(tmp_path / "base.mcap")
    assert whole.complete and len(whole.records["/mocap"]) == 30
    tried = []

    @FUZZ
    @given(data=st.one_of(mutated_bytes(base),
                          st.tuples(st.integers(0, len(base)), st.integers(0, len(other)))
                          .map(lambda c: base[:c[0]] + other[c[1]:])))
    def run(data):
        p = tmp_path / "mutated.mcap"
        p.write_bytes(data)
        got = answered(read_trial, p)
        tried.append(got is not None)
        if got is not None:
            assert isinstance(got.records, dict)
            for topic, recs in got.records.items():
                assert all(np.isfinite(t) for t, _ in recs), topic
    run()
    assert len(tried) >= EXAMPLES // 2
