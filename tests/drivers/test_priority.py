"""The real-time class, asked for and left as a process keeps up or not."""

import gc
import os

import pytest

from aiko.drivers.priority import (
    Priority,
    RealtimeGovernor,
    freeze_heap,
    request_normal,
    request_realtime,
)


def test_the_governor_leaves_the_real_time_class_while_its_process_cannot_catch_up():
    """Virtual time: the class is asked for once, left after ``limit`` s of
    stepping without once catching up (counted), asked for again when caught
    up; a refused or unasked class is never changed."""
    calls = []
    rt = RealtimeGovernor(5, limit=1.0,
                          request=lambda p: calls.append(("fifo", p)) or Priority(True, p),
                          normal=lambda: calls.append(("normal",)))
    assert rt.request().realtime and rt.active and calls == [("fifo", 5)]
    for now in (10.0, 10.5, 11.0):          # a second of stepping: still in the class
        rt.stepped(now)
    assert rt.active and rt.demoted == 0
    rt.caught_up()
    for now in (20.0, 20.6, 21.2, 21.8):    # 1.2 s behind: left once
        rt.stepped(now)
    assert not rt.active and rt.demoted == 1 and calls == [("fifo", 5), ("normal",)]
    rt.caught_up()                          # back in the class, the count kept
    assert rt.active and rt.demoted == 1 and calls[-1] == ("fifo", 5)
    rt.caught_up()
    assert len(calls) == 3                  # caught up while in the class: no call

    refused = RealtimeGovernor(5, limit=0.0,
                               request=lambda p: Priority(False, reason="not permitted"),
                               normal=lambda: calls.append(("normal",)))
    unasked = RealtimeGovernor(None, limit=0.0, request=lambda p: calls.append(("fifo", p)),
                               normal=lambda: calls.append(("normal",)))
    for r in (refused, unasked):
        assert not r.request().realtime
        for now in (0.0, 5.0, 10.0):
            r.stepped(now)
        r.caught_up()
        assert not r.active and r.demoted == 0
    assert len(calls) == 3


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="no scheduling classes here")
def test_request_realtime_moves_the_calling_process_and_request_normal_brings_it_back():
    """Granted (root, CAP_SYS_NICE or an rtprio limit): the process is in
    SCHED_FIFO at the priority asked, with reset-on-fork; refused: the answer
    says why and the class is unchanged."""
    before = os.sched_getscheduler(0)
    try:
        got = request_realtime(3)
        policy = os.sched_getscheduler(0)
        if got.realtime:
            assert policy == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
            assert os.sched_getparam(0).sched_priority == 3
            assert str(got) == "real-time (SCHED_FIFO 3)"
        else:
            assert policy == before and got.reason
    finally:
        request_normal()
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def _collections_during(call) -> list[int]:
    """The generations the garbage collector passed over while ``call`` ran."""
    seen: list[int] = []

    def watch(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(watch)
    try:
        call()
    finally:
        gc.callbacks.remove(watch)
    return seen


def test_freeze_heap_collects_once_before_freezing_unless_told_not_to():
    made = [[] for _ in range(100)]     # tracked objects, not frozen yet
    before = gc.get_freeze_count()
    assert _collections_during(lambda: freeze_heap(collect=False)) == []
    assert gc.get_freeze_count() >= before + len(made)
    more = [[] for _ in range(100)]
    before = gc.get_freeze_count()
    assert _collections_during(freeze_heap) == [2]
    assert gc.get_freeze_count() >= before + len(more)
