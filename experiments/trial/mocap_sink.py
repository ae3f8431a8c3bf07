"""Motion capture in a trial: :class:`MocapSink`, the sink of the trial's
:class:`~aiko.drivers.mocap.MocapLogger` (task ``mocap``): every sample out as
a record, the fresh positions kept for the comparison, each fresh frame's
tracked point to the steering (:mod:`.steering`)."""

from __future__ import annotations

from collections import deque

import numpy as np

from aiko.drivers.mocap import MocapSample, MocapSource

from .fanout import Fanout, MocapRecord
from .path_record import PathRecord
from .steering import TrialSteering

RECENT_FRAMES = 1024
"""Frame numbers remembered to take each frame once (about 10 s at 100 Hz)."""

__all__ = ["MocapSink"]


class MocapSink:
    """Every motion-capture sample the logger takes (``sink(t, sample)``): out
    as a :class:`~aiko.experiments.trial.fanout.MocapRecord`; each fresh
    frame's position kept (``frames``: the experiment's path) and, with
    steering, observed. ``want_links``: look up the source's ``linkN`` objects
    for each fresh frame (steering, live views)."""

    def __init__(self, source: MocapSource, fanout: Fanout,
                 steering: TrialSteering | None = None, want_links: bool = False) -> None:
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
        objs = self.source.latest_objects()
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
