"""The parallel model inline, for virtual time: stepping on its own thread
gives the samples stepping on the loop gives, bit for bit, handed on one
period later, and a failure stops the model, never its caller."""

import threading

import numpy as np

from aiko.control.gait import PRESETS, references
from aiko.drivers.clock import VirtualClock
from aiko.experiments.trial.model_inline import InlineModel
from aiko.model import SnakeModel, SnakeParams

PERIOD = 0.1


def drive(overlap: bool, periods: int = 6, bad_at: int | None = None):
    """A four-link model started at 0 and sent ``periods`` periods of
    sidewinding's references PERIOD apart (NaN at period ``bad_at``), then
    ended: the samples (time handed on, sample time, positions bytes), the
    events and the model."""
    clock = VirtualClock()
    handed: list = []
    events: list = []
    model = SnakeModel(SnakeParams(n=4))
    inline = InlineModel(model, clock, 20.0,
                         on_sample=lambda t, p, lag: handed.append((clock.now(), t, p.tobytes())),
                         on_event=lambda kind, data: events.append(kind), overlap=overlap)
    inline.start(0.0, model.initial_state().q, "test")
    for k in range(periods):
        clock.advance(PERIOD)
        refs = references(PRESETS["sidewinding"], k * PERIOD, 3)
        inline.send_refs(clock.now(), np.full_like(refs, np.nan) if k == bad_at else refs)
    clock.advance(PERIOD)
    inline.end(clock.now())
    return handed, events, inline


def test_the_models_thread_gives_the_same_samples_a_period_later():
    on, events_on, inline = drive(overlap=True)
    off, events_off, _ = drive(overlap=False)
    assert [s[1:] for s in on] == [s[1:] for s in off] and len(on) == 15
    calls = sorted({s[0] for s in off})          # the calls' times: 0 ... 0.7
    end = calls[-1]
    # a sample made at one call is handed on at the next (the end's at the end)
    later = [calls[calls.index(t) + 1] if t != end else end for t, _, _ in off]
    assert [s[0] for s in on] == later
    assert events_on == events_off == ["model_started", "model_done"]
    assert inline.done == drive(overlap=False)[2].done
    assert not [t for t in threading.enumerate() if t.name.startswith("aiko-inline-model")]


def test_a_failing_step_on_the_thread_stops_the_model_not_the_caller():
    handed, events, inline = drive(overlap=True, bad_at=2)
    assert events == ["model_started", "model_error", "model_stopped"]
    assert not inline.alive and "finite" in inline.stopped and inline.done is None
    # the samples of the periods before the bad one, and none after
    assert max(t for _, t, _ in handed) <= 2 * PERIOD + 1e-9
    assert not [t for t in threading.enumerate() if t.name.startswith("aiko-inline-model")]
