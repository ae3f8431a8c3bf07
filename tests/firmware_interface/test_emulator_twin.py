"""The emulated module's fast tick (the servo written out for both motors,
its conditions checked only where they can act) against its readable twin
(substep by substep through the axes' own methods): the same frames at the
same times and the same motor and link angles, to the last bit, over random
sequences of REFs (inside and beyond the joint limit), SYNCs (on time, late
enough to time out), NMT commands and ticks of any length, on servos strong
and weak enough to saturate into the current limit."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.firmware_interface.codec import Nmt, Ref, Sync, encode
from aiko.firmware_interface.emulator import JointModelParams, JointModule
from aiko.firmware_interface.protocol import NmtCommand

angle = st.floats(-1.2, 1.2, allow_nan=False)
rate = st.floats(-3.0, 3.0, allow_nan=False)
event = st.one_of(
    st.tuples(st.just("ref"), angle, angle, rate, rate),
    st.tuples(st.just("sync")),
    st.tuples(st.just("nmt"), st.sampled_from([NmtCommand.START, NmtCommand.STOP,
                                               NmtCommand.ENTER_PRE_OPERATIONAL,
                                               NmtCommand.RESET_NODE])),
    st.tuples(st.just("tick")),
)
params = st.builds(JointModelParams, omega_max=st.floats(0.2, 6.0), k_p=st.floats(1.0, 60.0),
                   backlash=st.floats(0.0, 0.1))


def _frame(ev: tuple, t: float):
    if ev[0] == "ref":
        return Ref(3, *ev[1:])
    if ev[0] == "sync":
        return Sync(int(t * 10) % 256)
    return Nmt(ev[1], 0)


def _state(m: JointModule) -> tuple:
    return (m.state, tuple((a.theta, a.link, a.duty, a.speed, a.reported) for a in m.axes),
            tuple(m._target), tuple(m._omega), m._holding, tuple(m._sat_since),
            tuple(m._current_limit), m._next_heartbeat)


@settings(max_examples=150)
@given(params, st.lists(st.tuples(st.floats(0.0001, 0.35), event), min_size=1, max_size=60))
def test_the_fast_tick_is_its_twin_to_the_bit(p, events):
    fast, twin = JointModule(3, params=p), JointModule(3, params=p)
    twin.tick = twin._tick_each                 # receive() ticks through it too
    t = 0.0
    out_fast, out_twin = fast.power_up(t), twin.power_up(t)
    assert out_fast == out_twin
    for dt, ev in events:
        t += dt
        if ev[0] == "tick":
            a, b = fast.tick(t), twin.tick(t)
        else:
            ident, data = encode(_frame(ev, t))
            a, b = fast.receive(t, ident, data), twin.receive(t, ident, data)
        assert a == b, (t, ev)
        assert _state(fast) == _state(twin), (t, ev)


def test_the_fast_tick_is_taken_and_saturates_as_the_twin():
    """A reference far beyond a weak servo: the motor saturates, and after
    the current limit's time the EMCY comes at the same substep either way."""
    p = JointModelParams(omega_max=0.3, k_p=20.0)
    fast, twin = JointModule(2, params=p), JointModule(2, params=p)
    twin.tick = twin._tick_each
    for m in (fast, twin):
        m.power_up(0.0)
        m.receive(0.0, *encode(Nmt(NmtCommand.START, 0)))
        m.receive(0.01, *encode(Ref(2, 0.7, -0.7, 0.0, 0.0)))
    got_fast, got_twin = [], []
    t = 0.01
    for k in range(400):
        t = 0.01 + 0.002 * (k + 1)
        if k % 50 == 0:
            for m, got in ((fast, got_fast), (twin, got_twin)):
                got += m.receive(t, *encode(Sync(k // 50)))
        got_fast += fast.tick(t)
        got_twin += twin.tick(t)
    assert got_fast == got_twin
    assert any(o.frame.__class__.__name__ == "Emcy" for o in got_fast)
    assert fast.axes[0].theta == twin.axes[0].theta and not math.isnan(fast.axes[0].theta)
