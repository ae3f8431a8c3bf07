"""The fault table (aiko.control.faults) is what the supervisor does: every
EMCY code of the protocol has a row, and the supervisor stops exactly on the
rows that say so, with the row's kind and message; every trial fault kind is
raised by the supervisor with its message; --tolerate takes the table's
names and they switch off exactly those faults."""

import asyncio

import pytest

from aiko.control import PRESETS
from aiko.control.faults import (
    EMCY_ROWS,
    FAULT,
    START_FAULTS,
    TOLERABLE,
    TRIAL_FAULTS,
    fault_message,
)
from aiko.control.supervisor import NodesMissingError, Supervisor
from aiko.drivers.clock import VirtualClock
from aiko.experiments.trial.options import OPTION
from aiko.experiments.trial.settings import build_settings
from aiko.experiments.trial.wiring import trial_config
from aiko.firmware_interface.codec import Emcy, Heartbeat
from aiko.firmware_interface.protocol import EmcyCode, NodeState
from tests.control.test_streamer_supervisor import FakeCan, rx, started


def test_every_emcy_code_has_one_row_in_code_order():
    assert [row.code for row in EMCY_ROWS] == sorted(int(c) for c in EmcyCode)
    assert {row.stops for row in EMCY_ROWS if row.stops} <= set(FAULT)


@pytest.mark.parametrize("row", EMCY_ROWS, ids=lambda r: f"0x{r.code:04X}")
def test_the_supervisor_does_what_each_emcy_row_says(row):
    clock, can, sup, events = started()
    sup.on_frame(clock.now(), Emcy(2, row.code, 1, 0))
    fault = sup.check()
    assert events.count("emcy") == 1
    if row.stops is None:
        assert fault is None
    else:
        assert fault.kind == row.stops and fault.node == 2
        assert fault.reason == fault_message(row.stops, node=2, motor="H")


def test_a_lost_node_and_a_restarted_node_have_their_rows_messages():
    clock, can, sup, _ = started()
    clock.advance(0.31)
    sup.on_frame(clock.now(), Heartbeat(1, NodeState.OPERATIONAL))
    fault = sup.check()
    assert fault.kind == "lost_node" and fault.reason == fault_message(
        "lost_node", node=2, age=0.31)
    clock, can, sup, _ = started()
    sup.on_frame(clock.now(), Heartbeat(1, NodeState.BOOT_UP))
    fault = sup.check()
    assert fault.kind == "node_reset" and fault.reason == fault_message("node_reset", node=1)


def test_missing_nodes_at_the_start_have_their_rows_message_and_exit():
    clock = VirtualClock()
    can = FakeCan(clock)
    can.inbox = [rx(clock, Heartbeat(1, NodeState.PRE_OPERATIONAL))]
    with pytest.raises(NodesMissingError) as err:
        asyncio.run(Supervisor(can, [1, 2, 3], clock).bring_up(timeout=1.5))
    assert str(err.value) == fault_message("nodes_missing", nodes="nodes 2, 3", timeout=1.5)
    assert [row.kind for row in START_FAULTS] == ["nodes_missing"]
    assert FAULT["nodes_missing"].exit == 2


def test_every_trial_fault_kind_is_one_the_supervisor_raises():
    """The rows and the supervisor's faults are the same set: a kind the
    supervisor's code raises without a row, or a row it never raises, fails
    here (the kinds read from its source, where each is a literal)."""
    import inspect
    import re

    from aiko.control import supervisor

    raised = set(re.findall(r'_raise_fault\(\s*"(\w+)"', inspect.getsource(supervisor)))
    assert raised == {row.kind for row in TRIAL_FAULTS}
    assert raised >= {row.stops for row in EMCY_ROWS if row.stops}


@pytest.mark.parametrize("name", TOLERABLE)
def test_tolerate_takes_the_tables_names_and_lets_exactly_that_fault_pass(name):
    assert OPTION["tolerate"].choices == TOLERABLE
    policy = trial_config(build_settings({"tolerate": [name]}, look_for_rig_file=False),
                          PRESETS["sidewinding"]).policy
    tolerated = {row.kind for row in TRIAL_FAULTS if row.tolerate == name}
    for row in EMCY_ROWS:
        if row.stops is None:
            continue
        clock, can, sup, _ = started(policy=policy)
        sup.on_frame(clock.now(), Emcy(1, row.code, 1, 0))
        stopped = sup.check() is not None
        assert stopped == (row.stops not in tolerated), (name, row)
