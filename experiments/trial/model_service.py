"""The parallel model in a trial: the references it is fed, its start, its samples.

:class:`ModelService` sits between the trial and its
:class:`~aiko.experiments.trial.model_link.ModelLink`: the gait's periods go to
the model as they are sent; every sample comes back as a
:class:`~aiko.experiments.trial.fanout.ModelSampled` record and is kept for
the comparison; its events (``model_started``, ``model_error``, ...) go out
as events.

Start alignment (:meth:`ModelService.start`, task ``model-start``): the model
starts at the gait's first period's send time (the ramp's seconds are not the
model's), from the joint angles of that period's STATE replies (every node's,
or the gait's start angles for the nodes that did not answer within
``START_STATE_WAIT``), placed where motion capture sees the links (``link1``
... ``linkN`` objects where the source reports them), see
:mod:`aiko.experiments.rig.alignment`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from aiko.control.gait import Gait, references
from aiko.control.streamer import PeriodRecord
from aiko.experiments.rig.alignment import start_posture
from aiko.model import SnakeParams

from .fanout import Event, Fanout, ModelSampled
from .path_record import PathRecord
from .services import GaitPeriods

__all__ = ["ModelService", "START_STATE_WAIT"]

START_STATE_WAIT = 0.3
"""How long the start alignment waits for every node's first STATE reply, s."""


class ModelService:
    """See the module docstring. ``model``: the link to the model's process
    (kept as ``process``); ``link``: the compared link (1-based, kept as
    ``compared_link``); ``markers()``: where motion capture sees the links at
    the start."""

    def __init__(self, model, params: SnakeParams, gait: Gait, periods: GaitPeriods,
                 fanout: Fanout, clock, link: int,
                 markers: Callable[[], dict[int, tuple]] = dict) -> None:
        self.process = model
        self.params = params
        self.gait = gait
        self.periods = periods
        self.fanout = fanout
        self.clock = clock
        self.compared_link = link
        self.markers = markers
        self.samples = PathRecord()  # the compared link's path, every sample
        model.on_sample = self.on_sample
        model.on_event = lambda kind, data: fanout.emit(Event(clock.now(), kind, data))

    @property
    def started(self) -> bool:
        """The model was started (the trial's gait began)."""
        return bool(self.process.started)

    async def run(self) -> None:
        """Take the model's samples until cancelled (task ``model``)."""
        await self.process.run()

    async def finish(self, t_end: float) -> None:
        """Let the model simulate up to ``t_end`` (the gait's end) and stop."""
        await self.process.finish(t_end)

    def summary(self) -> dict:
        """The model's counters for the trial's result."""
        return self.process.summary()

    def on_period(self, rec: PeriodRecord) -> None:
        """A period sent: the gait's references go to the model."""
        if rec.phase == "gait":
            self.process.send_refs(rec.sent, rec.refs)

    def on_sample(self, t: float, positions: np.ndarray, lag: float) -> None:
        p = positions[min(self.compared_link, positions.shape[0]) - 1]
        self.samples.append(t, p)
        self.fanout.emit(ModelSampled(t, positions, p, lag))

    async def start(self) -> None:
        """Start alignment (module docstring), then start the model."""
        rec = await self.periods.started()
        first_states = await self.periods.first_states_within(START_STATE_WAIT)
        n_joints = self.params.n - 1
        gait0 = references(self.gait, 0.0, n_joints)
        ah, av = gait0[:, 0].copy(), gait0[:, 1].copy()
        if self.gait.start != "curved":
            ah[:] = 0.0
            av[:] = 0.0
        for node, st in first_states.items():
            if node <= n_joints:
                ah[node - 1], av[node - 1] = st.alpha_h, st.alpha_v
        markers = self.markers()
        q0 = start_posture(self.params, ah, av, markers)
        source = (f"joint angles from STATE of {len(first_states)}/{self.periods.n_nodes} "
                  f"nodes, placed on {len(markers)} mocap link(s)")
        self.process.start(rec.sent, q0, source)

    def end_gait(self) -> None:
        """The gait's last period is sent: the model need not wait for more."""
        if self.periods.t_gait_end is not None:
            self.process.end(self.periods.t_gait_end)

    @property
    def lag(self) -> float | None:
        """The model's lag now, s (None once it stopped)."""
        return self.process.lag if self.process.alive else None

    def path(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Its samples' times (m,) and the compared link's positions (m, 3);
        None before the first."""
        if not self.samples:
            return None
        return self.samples.arrays()
