"""A campaign's index, ``campaign.csv`` in its folder: one row per trial
run, skipped or aborted (entry, repetition, file, start time, outcome, a
note, the comparison's metrics), appended and fsynced, never rewritten."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

__all__ = ["CampaignIndex", "index_of", "OUTCOMES", "METRICS", "INDEX_FIELDS"]

OUTCOMES = ("completed", "fault", "skipped", "aborted")
METRICS = ("final_error_m", "rms_error_m", "distance_experiment_m", "distance_model_m",
           "distance_ratio", "heading_difference_deg", "path_experiment_m", "path_model_m")
INDEX_FIELDS = ("entry", "repetition", "file", "start_time", "outcome", "note", *METRICS)


class CampaignIndex:
    """``campaign.csv``: appended a row at a time and fsynced; read tolerant
    of a last line cut short by a killed process."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "campaign.csv"

    def rows(self) -> list[dict]:
        if not self.path.exists():
            return []
        text = self.path.read_text()
        rows = list(csv.DictReader(io.StringIO(text)))
        if rows and not text.endswith("\n"):
            rows.pop()   # the last row was being written when the process died
        return [r for r in rows if r.get("outcome") in OUTCOMES]

    def append(self, row: dict) -> None:
        new = not self.path.exists() or self.path.stat().st_size == 0
        with self.path.open("a", newline="") as f:
            if not new and not self._ends_with_newline():
                f.write("\n")
            w = csv.DictWriter(f, fieldnames=INDEX_FIELDS, extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow(row)
            f.flush()
            os.fsync(f.fileno())

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"


def index_of(folder: Path) -> list[dict]:
    """The latest row of each (entry, repetition) of a campaign folder's index."""
    latest: dict[tuple[str, str], dict] = {}
    for row in CampaignIndex(Path(folder)).rows():
        latest[(row["entry"], row["repetition"])] = row
    return list(latest.values())

