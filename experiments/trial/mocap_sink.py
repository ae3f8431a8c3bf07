"""Motion capture in a trial, and the steering that closes the loop through it.

* :class:`MocapSink`: the sink of the trial's
  :class:`~aiko.drivers.mocap.MocapLogger` (task ``mocap``): every sample out
  as a record, the fresh positions kept for the comparison, each fresh frame's
  tracked point to the steering.
* :class:`Steering`: each fresh motion-capture frame's tracked point (the mean
  of the links where the source reports three or more, else the tracked link)
  goes to a :class:`~aiko.control.steering.SteeringLoop`; the streamer asks
  :meth:`Steering.offset` for the offset at each gait period's send time;
  every period's record goes out as a
  :class:`~aiko.experiments.trial.fanout.SteeringPeriod` and each change of
  mode as a ``steering`` event.
"""

from __future__ import annotations

import logging
from collections import deque

import numpy as np

from aiko.control.steering import SteeringLoop
from aiko.drivers.mocap import MocapSample

from .fanout import Event, Fanout, MocapRecord, SteeringPeriod
from .path_record import PathRecord

RECENT_FRAMES = 1024
"""Frame numbers remembered to take each frame once (about 10 s at 100 Hz)."""

__all__ = ["MocapSink", "Steering"]

log = logging.getLogger(__name__)


class Steering:
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


class MocapSink:
    """Every motion-capture sample the logger takes (``sink(t, sample)``): out
    as a :class:`~aiko.experiments.trial.fanout.MocapRecord`; each fresh
    frame's position kept (``frames``: the experiment's path) and, with
    steering, observed. ``want_links``: look up the source's ``linkN`` objects
    for each fresh frame (steering, live views)."""

    def __init__(self, source, fanout: Fanout, steering: Steering | None = None,
                 want_links: bool = False) -> None:
        self.source = source
        self.fanout = fanout
        self.steering = steering
        self.want_links = want_links or steering is not None
        self.frames = PathRecord()                # every fresh frame's position
        self._frames: set[int] = set()            # the recent frames seen
        self._recent: deque[int] = deque()
        self.last_position: tuple | None = None

    def __call__(self, t: float, s: MocapSample | None) -> None:
        if s is None:
            self.fanout.emit(MocapRecord(t, None))
            return
        links = self.link_objects(s.frame) if self.want_links and not s.stale else {}
        if s.position is not None:
            self.last_position = s.position
            if not s.stale and s.frame not in self._frames:
                self._remember(s.frame)
                self.frames.append(s.t_receive, s.position)
                if self.steering is not None:
                    self.steering.observe(s, links)
        self.fanout.emit(MocapRecord(t, s, links))

    def link_objects(self, frame: int | None = None) -> dict[int, tuple]:
        """{N: (x, y, z)} of the ``linkN`` objects in the source's newest
        datagram (of this frame, if given); empty where it has none."""
        objs = getattr(self.source, "latest_objects", lambda: None)()
        if objs is None or (frame is not None and objs[1] != frame):
            return {}
        return {int(name[4:]): pos for name, pos in objs[2].items()
                if name.startswith("link") and name[4:].isdigit()}

    def start_markers(self, link: int) -> dict[int, tuple]:
        """Where motion capture sees the links now, for the start alignment:
        the ``linkN`` objects, else the tracked link (as link ``link``)."""
        markers = self.link_objects()
        if not markers and self.last_position is not None:
            markers[link] = self.last_position
        return markers

    def _remember(self, frame: int) -> None:
        """Keep the last RECENT_FRAMES frame numbers: a late datagram of a frame
        seen is not taken twice, and memory stays bounded."""
        self._frames.add(frame)
        self._recent.append(frame)
        if len(self._recent) > RECENT_FRAMES:
            self._frames.discard(self._recent.popleft())

    def path(self, since: float | None) -> tuple[np.ndarray, np.ndarray]:
        """The fresh frames' receive times (n,) and positions (n, 3) from
        ``since`` on (the gait's start; None: all)."""
        te, pe = self.frames.arrays()
        keep = te >= (since if since is not None else -np.inf)
        return te[keep], pe[keep]
