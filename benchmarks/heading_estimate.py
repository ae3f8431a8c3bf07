"""How noisy and how late the steering's heading estimate is, on the model.

    python benchmarks/heading_estimate.py

40 s of orthotropic lateral undulation on the model, sampled at 20 Hz like
motion capture, with and without 0.5 mm of noise per coordinate; the estimate
of `aiko.control.steering.heading_from_track` over one gait period, every
0.05 s after the first 10 s, from the mean of the links and from link 6
alone. The run is straight, so the spread of the estimate is its noise (the
body wave's residue plus the capture noise). Then the lag: the same model
turning under a constant offset, the estimate against the heading of travel
over a short centred window. Not part of the test suite.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from aiko.control.gait import PRESETS
from aiko.control.steering import heading_from_track
from aiko.experiments.analysis.simulate import simulate_gait
from aiko.model import SnakeModel, SnakeParams


def estimates(t, p, window, t_from=10.0):
    out = [heading_from_track(t[:k + 1], p[:k + 1], window) for k in range(len(t))
           if t[k] >= t_from]
    return np.degrees(np.unwrap(np.array(out)))


def main() -> None:
    g = PRESETS["lateral-undulation-orthotropic"]
    model = SnakeModel(SnakeParams(mu_x=g.mu_x, mu_y=g.mu_y))
    window = 2 * math.pi / g.omega_h
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = simulate_gait(model, g, 40.0)
        turning = simulate_gait(model, g.with_(offset=math.radians(-10.0)), 40.0)
    print(f"window {window:.2f} s (one gait period)")
    for name, p in (("mean of links", res.com()), ("link 6", res.link(6))):
        for noise in (0.0, 0.0005):
            h = estimates(res.t, p + rng.normal(0.0, noise, p.shape), window)
            print(f"{name:14s} noise {1e3 * noise:.1f} mm: std {h.std():.2f} deg, "
                  f"largest deviation {np.max(np.abs(h - h.mean())):.2f} deg")
    # lag while turning: the estimate against the direction of travel of the
    # mean of the links over a window of 0.5 s centred on each time
    c = turning.com()
    h = estimates(turning.t, c, window)
    t = turning.t[turning.t >= 10.0]
    true = []
    for tk in t:
        a, b = np.interp(tk - 0.25, turning.t, c[:, 0]), np.interp(tk + 0.25, turning.t, c[:, 0])
        ya, yb = (np.interp(tk - 0.25, turning.t, c[:, 1]),
                  np.interp(tk + 0.25, turning.t, c[:, 1]))
        true.append(math.atan2(yb - ya, b - a))
    true = np.degrees(np.unwrap(np.array(true)))
    rate = np.polyfit(t, true, 1)[0]
    lag = np.mean(true - h) / rate
    print(f"turning at {rate:+.2f} deg/s under a -10 deg offset: the estimate lags "
          f"{lag:.2f} s")


if __name__ == "__main__":
    main()
