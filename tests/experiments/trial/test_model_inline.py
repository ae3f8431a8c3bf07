"""The parallel model inline, for virtual time: each period's samples are
simulated on the model's thread and handed on with the next period's
references, and a failure stops the model, never its caller."""

import asyncio

import numpy as np
import pytest

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


def test_each_periods_samples_are_handed_on_with_the_next_period():
    handed, events, inline = drive()
    assert events == ["model_started", "model_done"]
    # the start's sample with the first references; the samples up to each
    # period's send time with the next period's; the last ones at the end
    expected = [(0.1, 0.0)]
    for k in range(1, 6):
        expected += [((k + 1) * PERIOD, (k - 0.5) * PERIOD), ((k + 1) * PERIOD, k * PERIOD)]
    expected += [(0.7, 0.55), (0.7, 0.6), (0.7, 0.65), (0.7, 0.7)]
    assert np.allclose(handed, expected, rtol=0, atol=1e-9)
    assert inline.done is not None and inline.done["steps"] == 700
    assert inline._worker is None   # ended with the model


def test_a_trial_cancelled_before_the_end_ends_the_models_thread_and_can_still_finish():
    clock = VirtualClock()
    model = SnakeModel(SnakeParams(n=4))
    handed: list = []
    inline = InlineModel(model, clock, 20.0, on_sample=lambda t, p, lag: handed.append(t))

    async def trial():
        task = asyncio.create_task(inline.run())
        inline.start(0.0, model.initial_state().q, "test")
        inline.send_refs(0.1, references(PRESETS["sidewinding"], 0.0, 3))
        await asyncio.sleep(0)
        task.cancel()   # the trial's tasks end with a simulation in flight
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(trial())
    assert inline._worker is None and inline.done is None
    # the wind-down lets the model finish: the simulation in flight is kept
    inline.end(0.2)
    assert inline.done is not None and inline.done["steps"] == 200
    assert np.allclose(handed, [0.0, 0.05, 0.1, 0.15, 0.2], rtol=0, atol=1e-9)
    assert inline._worker is None


def test_a_failing_step_stops_the_model_not_the_caller():
    handed, events, inline = drive(bad_at=2)
    assert events == ["model_started", "model_error", "model_stopped"]
    assert not inline.alive and "finite" in inline.stopped and inline.done is None
    # the samples of the periods before the bad one, and none after
    assert max(t for _, t in handed) <= 2 * PERIOD + 1e-9
