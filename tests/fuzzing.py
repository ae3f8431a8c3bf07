"""What the fuzz tests share: valid starting documents, a TOML writer that can
write what tomllib would refuse to produce (NaN, infinities, odd keys), and
hypothesis strategies that mutate a document's values or a file's bytes.
Used by the readers' tests (tests/experiments/files/test_fuzz_files.py) and
the commands' (tests/experiments/cli/test_fuzz_commands.py)."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

RIG = (Path(__file__).resolve().parents[1] / "docs" / "examples" / "aiko.toml").read_bytes()
"""The example rig file, the rig files' starting point."""


def rig_doc() -> dict:
    return tomllib.loads(RIG.decode())


def fuzz_settings(n: int):
    """Seeded (derandomised), ``n`` examples, no deadline."""
    return settings(max_examples=n, derandomize=True, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def write_file(folder: Path, name: str, data: bytes | str) -> Path:
    """``data`` into ``folder / name``; the path."""
    p = folder / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


GAIT = {"gait": {"A_h": 30.0, "omega_h": 80.0, "delta_h": -50.0, "psi_h": 0.0, "A_v": 10.0,
                 "omega_v": 80.0, "delta_v": -50.0, "delta_0": 90.0, "psi_v": 0.0,
                 "soft_start": True, "start": "straight"},
        "friction": {"mu_x": 0.2, "mu_y": 0.2}}
PATH = {"path": {"waypoints": [[0.0, 0.3], [3.0, 0.3]], "lookahead": 0.8, "accept": 0.15}}
CURVE = {"curve": {"polyline": [[0.0, 0.0], [-1.0, 0.0], [-1.6, 0.6]]}}
ARC = {"curve": {"arc": {"center": [0.0, 0.6], "radius": 0.6, "start_deg": -90.0,
                         "direction": "ccw"}}}
SCENE = {"peg": [{"x": 0.5, "y": 0.1, "radius": 0.05, "mu": 0.2}],
         "step": [{"x0": 1.0, "height": 0.04}]}


# ----------------------------------------------------------------- a TOML writer
def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) \
            else repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f'"{k}" = {_value(x)}' for k, x in v.items()) + "}"
    raise TypeError(type(v))


def toml_text(doc: dict) -> str:
    """``doc`` as TOML: a dict value is a table, a list of dicts an array of tables."""
    out = []
    for name, table in doc.items():
        if isinstance(table, list) and table and all(isinstance(t, dict) for t in table):
            for t in table:
                out.append(f'[["{name}"]]')
                out += [f'"{k}" = {_value(v)}' for k, v in t.items()]
        elif isinstance(table, dict):
            out.append(f'["{name}"]')
            out += [f'"{k}" = {_value(v)}' for k, v in table.items()]
        else:
            out.insert(0, f'"{name}" = {_value(table)}')
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ mutations
SCALARS = st.one_of(
    st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1e300, -1e-300, 0.0, -0.0, 1e-12]),
    st.text(max_size=12), st.booleans())
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)


@st.composite
def mutated_doc(draw, base: dict) -> dict:
    """``base`` with a few keys replaced, dropped or added (tables too)."""
    doc = {k: ([dict(t) for t in v] if isinstance(v, list) else dict(v) if isinstance(v, dict)
               else v) for k, v in base.items()}
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(doc) + ["extra"]))
        op = draw(st.sampled_from(["replace", "drop", "add", "table"]))
        if op == "table" or name not in doc:
            doc[name] = draw(st.one_of(VALUES, st.dictionaries(st.text(max_size=6), VALUES,
                                                                max_size=3)))
            continue
        tables = doc[name] if isinstance(doc[name], list) else [doc[name]]
        table = draw(st.sampled_from(tables)) if tables else None
        if not isinstance(table, dict):
            doc[name] = draw(VALUES)
            continue
        keys = sorted(table)
        if op == "replace" and keys:
            table[draw(st.sampled_from(keys))] = draw(VALUES)
        elif op == "drop" and keys:
            del table[draw(st.sampled_from(keys))]
        else:
            table[draw(st.text(min_size=1, max_size=8))] = draw(VALUES)
    return doc


@st.composite
def mutated_bytes(draw, base: bytes) -> bytes:
    """``base`` with a few bytes flipped, cut, inserted, deleted or repeated."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "delete", "repeat"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del data[i:]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[i:i + draw(st.integers(1, 32))]
        elif op == "repeat":
            data[i:i] = data[i:i + draw(st.integers(1, 64))]
    return bytes(data)
