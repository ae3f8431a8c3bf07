"""The parallel model inline, for virtual time: each period's samples are
handed on at once, and a failure stops the model, never its caller."""

import numpy as np

from aiko.control.gait import PRESETS, references
from aiko.drivers.clock import VirtualClock
from aiko.experiments.trial.model_inline import InlineModel
from aiko.model import SnakeModel, SnakeParams

PERIOD = 0.1


def drive(periods: int = 6, bad_at: int | None = None):
    """A four-link model started at 0 and sent ``periods`` periods of
    sidewinding's references PERIOD apart (NaN at period ``bad_at``), then
    ended: the samples (time handed on, sample time), the events and the
    model."""
    clock = VirtualClock()
    handed: list = []
    events: list = []
    model = SnakeModel(SnakeParams(n=4))
    inline = InlineModel(model, clock, 20.0,
                         on_sample=lambda t, p, lag: handed.append((clock.now(), t)),
                         on_event=lambda kind, data: events.append(kind))
    inline.start(0.0, model.initial_state().q, "test")
    for k in range(periods):
        clock.advance(PERIOD)
        refs = references(PRESETS["sidewinding"], k * PERIOD, 3)
        inline.send_refs(clock.now(), np.full_like(refs, np.nan) if k == bad_at else refs)
    clock.advance(PERIOD)
    inline.end(clock.now())
    return handed, events, inline


def test_each_periods_samples_are_handed_on_at_once():
    handed, events, inline = drive()
    assert len(handed) == 15 and events == ["model_started", "model_done"]
    # a sample is made when the references after it arrive, at most a period later
    assert all(-1e-9 <= now - t <= PERIOD + 1e-9 for now, t in handed)
    assert inline.done is not None and inline.done["steps"] == 700


def test_a_failing_step_stops_the_model_not_the_caller():
    handed, events, inline = drive(bad_at=2)
    assert events == ["model_started", "model_error", "model_stopped"]
    assert not inline.alive and "finite" in inline.stopped and inline.done is None
    # the samples of the periods before the bad one, and none after
    assert max(t for _, t in handed) <= 2 * PERIOD + 1e-9
