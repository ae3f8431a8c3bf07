"""The series of a campaign against the model: per entry of the plan, its
completed repetitions' metrics as mean and standard deviation, and a figure
of link 6's paths of every repetition with the model's, one panel per entry
(Transeth et al. report each gait as a series of runs, VIII).

Reads the campaign's index (:mod:`aiko.experiments.files.campaign_index`;
the latest row of each repetition counts) and, for the figure, the logs'
motion capture and parallel model. Writes ``summary.csv`` and
``summary.png`` beside the index.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aiko.experiments.files.campaign_index import index_of
from aiko.experiments.files.triallog import TrialLogError, read_trial

from .compare import paths_from_trial

__all__ = ["EntrySummary", "summarize", "write_summary", "summary_figure", "SUMMARY_FIELDS",
           "completed_logs"]

SUMMARY_FIELDS = ("entry", "repetitions", "net_displacement_experiment_m_mean",
                  "net_displacement_experiment_m_sd", "net_displacement_model_m_mean",
                  "ratio_mean", "ratio_sd", "path_length_experiment_m_mean",
                  "path_length_model_m_mean", "heading_difference_deg_mean",
                  "heading_difference_deg_sd", "rms_error_m_mean", "rms_error_m_sd",
                  "faults", "skipped")


@dataclass(frozen=True)
class EntrySummary:
    entry: str
    repetitions: int          # completed
    faults: int
    skipped: int
    stats: dict               # SUMMARY_FIELDS' numbers (NaN where no repetition completed)
    files: tuple[str, ...]    # the completed logs, repetition order


def _number(text) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def _mean_sd(values: list[float]) -> tuple[float, float]:
    v = np.array([x for x in values if math.isfinite(x)])
    if v.size == 0:
        return math.nan, math.nan
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def _entry_order(folder: Path, rows: list[dict]) -> list[str]:
    try:
        plan = json.loads((folder / "campaign.json").read_text())["plan"]
        names = [e["name"] for e in plan["entries"]]
    except (OSError, ValueError, KeyError, TypeError):
        names = []
    return names + sorted({r["entry"] for r in rows} - set(names))


def summarize(folder: str | Path) -> list[EntrySummary]:
    """One summary per entry of the campaign in ``folder``."""
    folder = Path(folder)
    rows = index_of(folder)
    out = []
    for name in _entry_order(folder, rows):
        mine = sorted((r for r in rows if r["entry"] == name),
                      key=lambda r: int(r["repetition"]))
        done = [r for r in mine if r["outcome"] == "completed"]
        col = {k: [_number(r[k]) for r in done] for k in (
            "distance_experiment_m", "distance_model_m", "distance_ratio", "path_experiment_m",
            "path_model_m", "heading_difference_deg", "rms_error_m")}
        stats = {}
        for key, src in (("net_displacement_experiment_m", "distance_experiment_m"),
                         ("ratio", "distance_ratio"),
                         ("heading_difference_deg", "heading_difference_deg"),
                         ("rms_error_m", "rms_error_m")):
            stats[f"{key}_mean"], stats[f"{key}_sd"] = _mean_sd(col[src])
        stats["net_displacement_model_m_mean"] = _mean_sd(col["distance_model_m"])[0]
        stats["path_length_experiment_m_mean"] = _mean_sd(col["path_experiment_m"])[0]
        stats["path_length_model_m_mean"] = _mean_sd(col["path_model_m"])[0]
        out.append(EntrySummary(name, len(done), sum(r["outcome"] == "fault" for r in mine),
                                sum(r["outcome"] == "skipped" for r in mine), stats,
                                tuple(r["file"] for r in done)))
    return out


def completed_logs(folder: str | Path) -> list[Path]:
    """The logs of a campaign's completed trials (plan order, then repetition)."""
    folder = Path(folder)
    return [folder / f for s in summarize(folder) for f in s.files]


def write_summary(folder: str | Path, summaries: list[EntrySummary]) -> Path:
    path = Path(folder) / "summary.csv"
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SUMMARY_FIELDS)
        w.writeheader()
        for s in summaries:
            w.writerow({"entry": s.entry, "repetitions": s.repetitions, "faults": s.faults,
                        "skipped": s.skipped, **s.stats})
    tmp.replace(path)
    return path


def _paths(log: Path):
    """Link 6 of the experiment and of the model from the model's start,
    both relative to the model's start point (they start together)."""
    data = read_trial(log, topics=("/mocap", "/model"))
    p = paths_from_trial(data)
    if p.t_model.size == 0:
        keep = np.all(np.isfinite(p.p_experiment), axis=1)
        exp = p.p_experiment[keep]
        origin = exp[0] if exp.size else np.zeros(3)
        return exp - origin, None
    origin = p.p_model[0]
    keep = (p.t_experiment >= p.t_model[0]) & np.all(np.isfinite(p.p_experiment), axis=1)
    return p.p_experiment[keep] - origin, p.p_model - origin


def summary_figure(folder: str | Path, summaries: list[EntrySummary]) -> Path:
    """``summary.png``: link 6 of every completed repetition (solid) and its
    model (dashed), one panel per entry, each run from its start."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    n = max(1, len(summaries))
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 4.2 * rows), squeeze=False)
    for ax, s in zip(axes.flat, summaries, strict=False):
        for k, name in enumerate(s.files):
            color = f"C{k % 10}"
            try:
                exp, model = _paths(folder / name)
            except (TrialLogError, ValueError, IndexError):
                continue
            ax.plot(exp[:, 0], exp[:, 1], color=color, lw=1.4, label=f"rep {k + 1}")
            if model is not None:
                ax.plot(model[:, 0], model[:, 1], color=color, lw=1.0, ls="--")
        ax.plot([0], [0], "ko", ms=4)
        ratio = s.stats["ratio_mean"]
        ax.set_title(f"{s.entry}: {s.repetitions} run(s)"
                     + (f", ratio {ratio:.2f} ± {s.stats['ratio_sd']:.2f}"
                        if math.isfinite(ratio) else ""), fontsize=10)
        ax.set_xlabel("x from start (m)")
        ax.set_ylabel("y from start (m)")
        ax.set_aspect("equal", adjustable="datalim")
        ax.grid(alpha=0.3)
        if s.files:
            ax.legend(fontsize=8, loc="best", title="solid: experiment\ndashed: model",
                      title_fontsize=7)
    for ax in list(axes.flat)[len(summaries):]:
        ax.set_visible(False)
    fig.suptitle(f"campaign {folder.name}: link 6, experiment against the model", fontsize=11)
    fig.tight_layout()
    path = folder / "summary.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
