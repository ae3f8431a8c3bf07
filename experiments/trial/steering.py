"""Steering in a trial, the trial's side of a
:class:`~aiko.control.steering.SteeringLoop` (the laws are in
:mod:`aiko.control.steering`): each fresh motion-capture frame's tracked point
(the mean of the links where the source reports three or more, else the
tracked link) goes to the loop; the streamer asks
:meth:`TrialSteering.offset` for the offset at each gait period's send time;
every period's record goes out as a
:class:`~aiko.experiments.trial.fanout.SteeringPeriod` and each change of mode
as a ``steering`` event."""

from __future__ import annotations

import logging

import numpy as np

from aiko.control.steering import SteeringLoop
from aiko.drivers.mocap import MocapSample

from .fanout import Event, Fanout, SteeringPeriod

__all__ = ["TrialSteering"]

log = logging.getLogger(__name__)


class TrialSteering:
    """The trial's side of a steering loop (module docstring); ``subject`` is
    the tracked link's name, reported when it is what the loop tracks."""

    def __init__(self, loop: SteeringLoop, fanout: Fanout, subject: str) -> None:
        self.loop = loop
        self.fanout = fanout
        self.subject = subject
        self.mode: str | None = None
        self.tracked: str | None = None

    def observe(self, sample: MocapSample, links: dict[int, tuple]) -> None:
        """A fresh frame: its tracked point to the loop."""
        if len(links) >= 3:
            self.tracked = f"mean of {len(links)} links"
            point = tuple(np.mean(np.asarray(list(links.values())), axis=0))
        else:
            self.tracked = self.subject
            assert sample.position is not None  # observed only when it has one
            point = sample.position
        self.loop.observe(sample.t_receive, point)

    def offset(self, t: float, t_gait: float) -> float:
        """The steering offset for the period sent at ``t`` (the streamer's ``steer``)."""
        rec = self.loop.command(t)
        if rec.mode != self.mode:
            self.fanout.emit(Event(t, "steering", {"mode": rec.mode, "was": self.mode,
                                                   "age": rec.age}))
            if rec.mode in ("hold", "open"):
                log.warning("steering: motion capture stale (%s s): %s",
                            "none" if rec.age is None else f"{rec.age:.2f}",
                            "holding the last offset" if rec.mode == "hold" else "open loop")
            self.mode = rec.mode
        data = rec.to_dict()
        data["t_gait"] = t_gait
        data["tracked"] = self.tracked
        self.fanout.emit(SteeringPeriod(t, data))
        return rec.offset
