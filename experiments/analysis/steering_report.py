"""A steered trial looked back at: the /steering records as arrays, how well
the loop held its heading or its path, and a figure.

Metrics (angles in degrees, lengths in metres, times in seconds from the
gait's start):

* heading hold: ``settling_time_s``, the first time after which the heading
  estimate stays within ``band_deg`` of the target to the end (None if it
  never does); ``steady_error_deg`` (mean) and ``steady_rms_deg`` of
  wrap(heading - target) after settling;
* path following: ``settling_time_s`` likewise with the cross-track error
  within ``band_m``; ``cross_track_rms_m`` and ``cross_track_max_m`` after
  settling; ``segment``: the waypoint segment reached at the end;
* both: ``closed_share`` of the periods, ``hold_periods``, ``open_periods``,
  ``offset_max_deg``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aiko.control.steering import wrap_angle

__all__ = ["SteeringSeries", "steering_series", "steering_metrics", "steering_figure",
           "save_steering_figure"]


@dataclass(frozen=True)
class SteeringSeries:
    """Per gait period (k,): t_gait s, mode, offset rad, heading and target rad
    (NaN where none), tracked position x, y m (NaN), cross-track m (NaN)."""

    t: np.ndarray
    mode: np.ndarray
    offset: np.ndarray
    heading: np.ndarray
    target: np.ndarray
    x: np.ndarray
    y: np.ndarray
    cross_track: np.ndarray
    kind: str                       # "heading" or "path"
    waypoints: np.ndarray | None    # (k, 2) for paths

    def error(self) -> np.ndarray:
        """wrap(heading - target), rad (NaN where either is missing)."""
        return wrap_angle(self.heading - self.target)


def _nan(v) -> float:
    return np.nan if v is None else float(v)


def steering_series(data) -> SteeringSeries | None:
    """The steering of a loaded trial (:class:`TrialData`), None if it was not
    steered."""
    rec = [d for _, d in data.records.get("/steering", [])]
    if not rec:
        return None
    cfg = (data.metadata.get("config") if isinstance(data.metadata.get("config"), dict)
           else None)
    if cfg is None:
        import json
        try:
            cfg = json.loads(data.metadata.get("config", "{}"))
        except ValueError:
            cfg = {}
    steering = (cfg or {}).get("steering") or {}
    wps = steering.get("waypoints")
    return SteeringSeries(
        t=np.array([d["t_gait"] for d in rec]), mode=np.array([d["mode"] for d in rec]),
        offset=np.array([d["offset"] for d in rec]),
        heading=np.array([_nan(d["heading"]) for d in rec]),
        target=np.array([_nan(d["target"]) for d in rec]),
        x=np.array([_nan(d["x"]) for d in rec]), y=np.array([_nan(d["y"]) for d in rec]),
        cross_track=np.array([_nan(d["cross_track"]) for d in rec]),
        kind="path" if wps else "heading",
        waypoints=None if not wps else np.asarray(wps, dtype=float))


def _settled(t: np.ndarray, err: np.ndarray, band: float) -> int | None:
    """Index from which |err| <= band to the end (NaN counts as outside)."""
    inside = np.abs(np.nan_to_num(err, nan=np.inf)) <= band
    if not inside.size or not inside[-1]:
        return None
    out = np.flatnonzero(~inside)
    return 0 if out.size == 0 else int(out[-1]) + 1


def steering_metrics(s: SteeringSeries, band_deg: float = 5.0, band_m: float = 0.05) -> dict:
    m = {"kind": s.kind, "periods": int(s.t.size),
         "closed_share": float(np.mean(s.mode == "closed")) if s.t.size else 0.0,
         "hold_periods": int(np.sum(s.mode == "hold")),
         "open_periods": int(np.sum(s.mode == "open")),
         "offset_max_deg": float(np.degrees(np.max(np.abs(s.offset), initial=0.0)))}
    if s.kind == "heading":
        err = np.degrees(s.error())
        i = _settled(s.t, err, band_deg)
        m["band_deg"] = band_deg
        m["settling_time_s"] = None if i is None else float(s.t[i])
        after = err[i:] if i is not None else err[-0:0]
        m["steady_error_deg"] = float(np.mean(after)) if after.size else None
        m["steady_rms_deg"] = float(np.sqrt(np.mean(after ** 2))) if after.size else None
        final = err[np.isfinite(err)]
        m["final_error_deg"] = float(final[-1]) if final.size else None
    else:
        e = s.cross_track
        i = _settled(s.t, e, band_m)
        m["band_m"] = band_m
        m["settling_time_s"] = None if i is None else float(s.t[i])
        after = e[i:] if i is not None else e[-0:0]
        m["cross_track_rms_m"] = float(np.sqrt(np.mean(after ** 2))) if after.size else None
        m["cross_track_max_m"] = float(np.max(np.abs(after))) if after.size else None
        final = e[np.isfinite(e)]
        m["final_cross_track_m"] = float(final[-1]) if final.size else None
    return m


def steering_figure(s: SteeringSeries, title: str, metrics: dict | None = None,
                    link6: tuple[np.ndarray, np.ndarray] | None = None,
                    open_loop: tuple[np.ndarray, np.ndarray] | None = None):
    """The tracked point's path (and the path to follow, or the target
    heading as a ray), the heading estimate against its target, and the
    offset sent. ``link6``: (x, y) of link 6 from motion capture, drawn thin;
    ``open_loop``: link 6's (x, y) in an open-loop run, to draw beside."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(12, 6.2), layout="constrained")
    gs = fig.add_gridspec(2, 2, width_ratios=(1.1, 1))
    ax_p = fig.add_subplot(gs[:, 0])
    ax_h = fig.add_subplot(gs[0, 1])
    ax_o = fig.add_subplot(gs[1, 1], sharex=ax_h)
    if open_loop is not None:
        ax_p.plot(open_loop[0], open_loop[1], color="0.55", lw=1.0, ls="--",
                  label="link 6, open loop (same gait and floor)")
    if link6 is not None:
        ax_p.plot(link6[0], link6[1], color="#1f4e9c", lw=0.7, alpha=0.6,
                  label="link 6, steered")
    ax_p.plot(s.x, s.y, color="#1f4e9c", lw=2.2, label="tracked point, steered")
    if s.kind == "path" and s.waypoints is not None:
        ax_p.plot(s.waypoints[:, 0], s.waypoints[:, 1], color="#c8102e", lw=1.2, ls=":",
                  marker="o", ms=4, label="path")
    else:
        i0 = int(np.flatnonzero(np.isfinite(s.x))[0]) if np.isfinite(s.x).any() else None
        if i0 is not None and np.isfinite(s.target).any():
            th = float(s.target[np.isfinite(s.target)][0])
            r = 1.2 * max(np.nanmax(np.hypot(s.x - s.x[i0], s.y - s.y[i0])), 0.2)
            ax_p.plot([s.x[i0], s.x[i0] + r * math.cos(th)],
                      [s.y[i0], s.y[i0] + r * math.sin(th)], color="#c8102e", lw=1.2,
                      ls=":", label="target heading")
    finite = np.isfinite(s.x)
    if finite.any():
        ax_p.plot(s.x[finite][0], s.y[finite][0], "o", color="#1f4e9c", mfc="white")
        ax_p.plot(s.x[finite][-1], s.y[finite][-1], "s", color="#1f4e9c")
    ax_p.set_aspect("equal", adjustable="datalim")
    ax_p.set_xlabel("x [m]")
    ax_p.set_ylabel("y [m]")
    ax_p.set_title("from motion capture (tracked point: mean over one gait period)",
                   fontsize=10)
    ax_p.grid(alpha=0.3)
    ax_p.legend(loc="best", fontsize=8)
    ax_h.plot(s.t, np.degrees(s.heading), color="#1f4e9c", label="heading estimate")
    ax_h.plot(s.t, np.degrees(s.target), color="#c8102e", ls=":", label="target")
    ax_h.set_ylabel("heading [deg]")
    ax_h.grid(alpha=0.3)
    ax_h.legend(loc="best", fontsize=8)
    ax_o.plot(s.t, np.degrees(s.offset), color="#2a7f3f", label="offset sent")
    for mode, color in (("hold", "#e0a000"), ("open", "#999999"), ("wait", "#dddddd")):
        sel = s.mode == mode
        if sel.any():
            ax_o.plot(s.t[sel], np.degrees(s.offset[sel]), "|", color=color, ms=10,
                      label=f"{mode} periods")
    ax_o.set_ylabel("offset phi_0 [deg]")
    ax_o.set_xlabel("gait time [s]")
    ax_o.grid(alpha=0.3)
    if s.kind == "path":
        ax_c = ax_o.twinx()
        ax_c.plot(s.t, 100 * s.cross_track, color="#7a3fa0", lw=1.0, label="cross-track")
        ax_c.set_ylabel("cross-track error [cm]", color="#7a3fa0")
    ax_o.legend(loc="best", fontsize=8)
    sub = ""
    if metrics:
        st = metrics.get("settling_time_s")
        st_txt = "never settled" if st is None else f"settled after {st:.1f} s"
        if metrics["kind"] == "heading":
            if metrics.get("steady_error_deg") is not None:
                st_txt += (f", then error {metrics['steady_error_deg']:+.1f} deg mean, "
                           f"{metrics['steady_rms_deg']:.1f} deg RMS")
        elif metrics.get("cross_track_rms_m") is not None:
            st_txt += (f", then cross-track {100 * metrics['cross_track_rms_m']:.1f} cm RMS, "
                       f"{100 * metrics['cross_track_max_m']:.1f} cm max")
        sub = f"\n{st_txt}; closed loop {100 * metrics['closed_share']:.0f} % of the periods"
    fig.suptitle(title + sub, fontsize=11)
    return fig


def save_steering_figure(trial_path: Path, s: SteeringSeries, title: str, metrics: dict,
                         link6: tuple[np.ndarray, np.ndarray] | None = None) -> Path:
    """Write the figure beside the trial as STEM-steering.png."""
    import matplotlib.pyplot as plt

    out = Path(trial_path).with_name(Path(trial_path).stem + "-steering.png")
    fig = steering_figure(s, title, metrics, link6)
    try:
        fig.savefig(out, dpi=110)
    finally:
        plt.close(fig)
    return out
