"""The campaign plan: a day of trials described in TOML.

::

    [campaign]
    name = "floor-a"
    folder = "campaigns/floor-a"   # relative to the plan file
    order = "as-written"           # or "shuffled" (seeded: the same order on every resume)
    seed = 1
    rig_file = "aiko.toml"         # optional; without it the simulated rig
    pause = 0.0                    # s between trials when nobody is asked (default 0)

    [[trial]]
    gait = "sidewinding"           # a preset or a gait file (relative to the plan file)
    duration = 15.0                # s
    repetitions = 3
    name = "sidewinding"           # optional: the entry's name in files and tables
    plant = "realistic"            # any `aiko run` setting by its flag's name
    heading = 45.0                 # (dashes or underscores: backlash_deg = 4)

Pure: :func:`load_plan` reads and checks the file's structure into a frozen
:class:`Plan` (the ``aiko run`` settings of each entry are checked against
``aiko run``'s own flags by the command line, before anything starts).
:func:`schedule` is the order the trials run in.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiko.model.errors import AikoError

from .tomlfile import number, read_toml

__all__ = ["Plan", "Entry", "PlanError", "load_plan", "schedule", "RESERVED", "PATH_SETTINGS"]

CAMPAIGN_KEYS = ("name", "folder", "order", "seed", "rig_file", "pause")
ENTRY_KEYS = ("gait", "duration", "repetitions", "name")
RESERVED = ("out", "check", "rig_file", "help")
"""``aiko run`` flags a plan entry may not set: the campaign names the logs
and gives the rig file."""
PATH_SETTINGS = ("path", "scene", "start_curve", "mqtt_ca")
"""Settings whose value is a file: relative to the plan file (a scene may
also be a preset's name)."""
ORDERS = ("as-written", "shuffled")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class PlanError(AikoError):
    """A plan that cannot be run: the file, the entry and key, and why."""

    def __init__(self, source: str, reason: str, where: str | None = None) -> None:
        self.source = source
        self.reason = reason
        self.where = where
        super().__init__(f"{source}: {where}: {reason}" if where else f"{source}: {reason}")


@dataclass(frozen=True)
class Entry:
    """One line of the plan: a gait, its duration and repetitions, and the
    ``aiko run`` settings it runs with (flag name with underscores -> value)."""

    name: str
    gait: str
    duration: float
    repetitions: int
    settings: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Plan:
    path: Path
    name: str
    folder: Path
    order: str
    seed: int
    rig_file: Path | None
    entries: tuple[Entry, ...]
    pause: float = 0.0

    def canonical(self) -> dict:
        """What the plan asks for, as plain JSON (paths as written resolved):
        the campaign folder keeps it, and a resume compares against it."""
        return {"name": self.name, "order": self.order, "seed": self.seed,
                "rig_file": None if self.rig_file is None else str(self.rig_file),
                "entries": [{"name": e.name, "gait": e.gait, "duration": e.duration,
                             "repetitions": e.repetitions,
                             "settings": {k: v for k, v in e.settings}} for e in self.entries]}


def _resolve(base: Path, value: str) -> str:
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else base / p)


def _campaign(src: str, table, base: Path) -> dict:
    if not isinstance(table, dict):
        raise PlanError(src, "missing table [campaign]")
    for key in table:
        if key not in CAMPAIGN_KEYS:
            raise PlanError(src, f"unknown key (known: {', '.join(CAMPAIGN_KEYS)})",
                            f"campaign.{key}")
    name = table.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise PlanError(src, f"must be a name of letters, digits, '.', '-', '_', got {name!r}",
                        "campaign.name")
    folder = table.get("folder", name)
    if not isinstance(folder, str) or not folder:
        raise PlanError(src, f"must be a folder's path, got {folder!r}", "campaign.folder")
    order = table.get("order", "as-written")
    if order not in ORDERS:
        raise PlanError(src, f"must be one of {', '.join(ORDERS)}, got {order!r}",
                        "campaign.order")
    seed = table.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise PlanError(src, f"must be an integer, got {seed!r}", "campaign.seed")
    rig_file = table.get("rig_file")
    if rig_file is not None and (not isinstance(rig_file, str) or not rig_file):
        raise PlanError(src, f"must be a file's path, got {rig_file!r}", "campaign.rig_file")
    pause = number(table.get("pause", 0.0), src, "campaign.pause", PlanError)
    if pause < 0:
        raise PlanError(src, "must be >= 0", "campaign.pause")
    return {"name": name, "folder": Path(_resolve(base, folder)), "order": order, "seed": seed,
            "rig_file": None if rig_file is None else Path(_resolve(base, rig_file)),
            "pause": pause}


def _entry(src: str, i: int, raw, base: Path) -> Entry:
    where = f"trial {i + 1}"
    if not isinstance(raw, dict):
        raise PlanError(src, "must be a table [[trial]]", where)
    gait = raw.get("gait")
    if not isinstance(gait, str) or not gait:
        raise PlanError(src, "missing gait (a preset or a gait file)", f"{where}.gait")
    if gait.endswith(".toml"):
        gait = _resolve(base, gait)
    name = raw.get("name", Path(gait).stem if gait.endswith(".toml") else gait)
    if not isinstance(name, str) or not _NAME.match(name):
        raise PlanError(src, f"must be a name of letters, digits, '.', '-', '_', got {name!r}",
                        f"{where}.name")
    where = f"trial {i + 1} ({name})"
    duration = number(raw.get("duration"), src, f"{where}.duration", PlanError)
    if duration <= 0:
        raise PlanError(src, f"must be > 0 s, got {duration}", f"{where}.duration")
    reps = raw.get("repetitions", 1)
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise PlanError(src, f"must be a whole number >= 1, got {reps!r}",
                        f"{where}.repetitions")
    settings = []
    for key, value in raw.items():
        if key in ENTRY_KEYS:
            continue
        flag = key.replace("-", "_")
        if flag in RESERVED:
            raise PlanError(src, "is the campaign's to set, not an entry's", f"{where}.{key}")
        if flag in PATH_SETTINGS and isinstance(value, str) and (
                flag != "scene" or value.endswith(".toml")):
            value = _resolve(base, value)
        settings.append((flag, value))
    return Entry(name, gait, duration, reps, tuple(sorted(settings)))


def load_plan(path: str | Path) -> Plan:
    """Read and check a plan file (PlanError names the entry and key)."""
    path = Path(path)
    src = str(path)
    doc = read_toml(path, lambda s, r: PlanError(s, r))
    for table in doc:
        if table not in ("campaign", "trial"):
            raise PlanError(src, "unknown table (known: [campaign], [[trial]])", table)
    base = path.parent
    head = _campaign(src, doc.get("campaign"), base)
    trials = doc.get("trial")
    if not isinstance(trials, list) or not trials:
        raise PlanError(src, "no [[trial]] entries")
    entries = tuple(_entry(src, i, raw, base) for i, raw in enumerate(trials))
    names = [e.name for e in entries]
    for n in names:
        if names.count(n) > 1:
            raise PlanError(src, f"two entries are named {n!r}: give one a name = \"...\"")
    return Plan(path, head["name"], head["folder"], head["order"], head["seed"],
                head["rig_file"], entries, head["pause"])


def schedule(plan: Plan) -> list[tuple[Entry, int]]:
    """Every (entry, repetition 1..n) in the order they run: as written, or
    shuffled with the plan's seed (the same order on every run of the plan)."""
    runs = [(e, rep) for e in plan.entries for rep in range(1, e.repetitions + 1)]
    if plan.order == "shuffled":
        random.Random(plan.seed).shuffle(runs)
    return runs
