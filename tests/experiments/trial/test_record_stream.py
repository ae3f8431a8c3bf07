"""One record stream for the whole session: a listener added to a trial on the
simulated rig receives every kind of record, and the trial log, written only
by its listener, holds what the records carried."""

import asyncio
import json
import math
from collections import Counter
from dataclasses import replace

import jsonschema
import pytest

from aiko.control.gait import PRESETS
from aiko.control.steering import SteeringConfig
from aiko.control.supervisor import FaultPolicy
from aiko.drivers.messages import MESSAGE_KINDS, FaultMessage, TrialEnd
from aiko.drivers.virtual_time import run_virtual
from aiko.experiments.files.triallog import CHANNELS, read_trial
from aiko.experiments.rig.plant_params import PlantParams
from aiko.experiments.trial.config import TrialConfig
from aiko.experiments.trial.fanout import (
    RECORD_KINDS,
    Compared,
    Event,
    Fanout,
    FrameSent,
    TrialOutcome,
)
from aiko.experiments.trial.listeners import PublishListener
from aiko.experiments.trial.session import SessionConfig, SessionReport, run_session
from aiko.firmware_interface.emulator import FaultConfig
from tests.conftest import trial_with_emulator


class Sink:
    """A viewer's or broker's side: keeps every message published to it."""

    def __init__(self) -> None:
        self.messages: list = []

    def publish(self, message) -> None:
        self.messages.append(message)


class Recorder:
    """A listener that keeps every record, and when it was started and stopped."""

    def __init__(self) -> None:
        self.records: list = []
        self.calls: list[str] = []

    async def start(self) -> None:
        self.calls.append("start")

    def on_record(self, record) -> None:
        assert self.calls == ["start"], "a record outside start .. stop"
        self.records.append(record)

    async def stop(self) -> None:
        self.calls.append("stop")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """4 s of steered lateral undulation on the ideal simulated Aiko in
    virtual time, the model in parallel, node 2's horizontal encoder failing
    at 2 s (tolerated: its EMCY is logged and the trial goes on). The
    processes and the priority of a real-time session are in its log's
    events too: test_simulated_rig.py reads them."""
    out = tmp_path_factory.mktemp("stream") / "trial.mcap"
    trial = TrialConfig(gait="lateral-undulation", nodes=10, duration=4.0, rig="simulated",
                        can_interface="slcan", mocap="vicon-udp",
                        policy=FaultPolicy(stop_on_encoder_fault=False),
                        steering=SteeringConfig(heading=math.radians(30.0)))
    plant = replace(PlantParams.ideal(), faults=("2:encoder=h@2",))
    config = SessionConfig(trial=trial, out=out, plant=plant, time="virtual")
    recorder, report = Recorder(), SessionReport()
    view, broker = Sink(), Sink()
    listeners = [recorder, PublishListener(view, full=True),
                 PublishListener(broker, full=False, model=True)]
    result = run_virtual(run_session(config, PRESETS["lateral-undulation"], report,
                                     listeners=listeners))
    recorder.view, recorder.broker = view.messages, broker.messages
    return recorder, result, report, read_trial(out)


def test_a_listener_receives_every_kind_of_record(recorded):
    recorder, result, report, _ = recorded
    kinds = Counter(type(r) for r in recorder.records)
    assert set(kinds) == set(RECORD_KINDS), set(RECORD_KINDS) - set(kinds)
    assert recorder.calls == ["start", "stop"]
    assert result.reason == "completed" and report.metrics is not None
    last = recorder.records[-1]
    assert isinstance(last, TrialOutcome) and last.metrics == report.metrics
    assert last.reason == "completed" and last.fault is None


def test_the_log_holds_what_the_records_carried(recorded):
    recorder, _, report, data = recorded
    sent = [r for r in recorder.records if isinstance(r, FrameSent)]
    logged = data.records["/can/tx"]
    assert [(r.arbitration_id, r.data.hex()) for r in sent] == [
        (m["id"], m["data"]) for _, m in logged]
    events = [r.kind for r in recorder.records if isinstance(r, Event)]
    assert Counter(m["kind"] for _, m in data.records["/events"]) == Counter(
        events + ["trial_start", "trial_end", "outcome"])
    for kind in ("preflight", "steering_report"):
        assert kind in events
    (compared,) = [r for r in recorder.records if isinstance(r, Compared)]
    ((_, logged_cmp),) = data.records["/comparison"]
    assert logged_cmp["metrics"] == pytest.approx(compared.metrics)
    assert logged_cmp["figure"] == report.figure.name


def test_every_logged_record_follows_its_channels_schema(recorded):
    *_, data = recorded
    assert set(data.records) == set(CHANNELS)
    for channel, records in data.records.items():
        validator = jsonschema.Draft202012Validator({"type": "object", **CHANNELS[channel]})
        for _, record in records:
            validator.validate(record)


def test_every_published_message_follows_its_schema(recorded):
    """The views get every kind of message; the broker the same less the
    views' own (every tracked link, the comparison), and its trial_end with
    the metrics."""
    recorder, _, report, _ = recorded
    view_kinds = {type(m) for m in recorder.view}
    assert view_kinds == set(MESSAGE_KINDS) - {FaultMessage}   # the fault was tolerated
    assert {type(m).__name__ for m in recorder.broker} == {
        k.__name__ for k in MESSAGE_KINDS} - {"MocapLinks", "Comparison", "FaultMessage"}
    for message in recorder.view + recorder.broker:
        jsonschema.validate(message.payload(), type(message).SCHEMA)
        json.dumps(message.payload(), allow_nan=False)
    (end,) = [m for m in recorder.broker if isinstance(m, TrialEnd)]
    assert end.metrics == report.metrics and end.reason == "completed"
    (view_end,) = [m for m in recorder.view if isinstance(m, TrialEnd)]
    assert view_end.metrics is None   # at once, before the comparison


def test_a_fault_reaches_the_viewers_as_its_message(tmp_path):
    sink = Sink()
    result, *_ = run_virtual(trial_with_emulator(
        tmp_path / "t.mcap", 3.0, nodes=2, faults={2: FaultConfig(silent_from=1.0)},
        viewers=[sink], virtual=True))
    assert result.reason == "fault"
    (fault,) = [m for m in sink.messages if isinstance(m, FaultMessage)]
    assert (fault.kind, fault.node) == ("lost_node", 2)
    (end,) = [m for m in sink.messages if isinstance(m, TrialEnd)]
    assert end.reason == "fault" and end.fault == {"kind": "lost_node", "node": 2,
                                                   "reason": fault.reason}
    for message in sink.messages:
        jsonschema.validate(message.payload(), type(message).SCHEMA)


def test_a_listener_is_added_before_the_stream_starts():
    async def main():
        fanout = Fanout()
        async with fanout:
            with pytest.raises(RuntimeError, match="before"):
                fanout.add(Recorder())
    asyncio.run(main())


def test_every_listener_is_stopped_when_one_stop_fails():
    class Failing(Recorder):
        async def stop(self) -> None:
            await super().stop()
            raise OSError("disk full")

    first, failing, last = Recorder(), Failing(), Recorder()

    async def main():
        async with Fanout([first, failing, last]):
            pass
    with pytest.raises(OSError, match="disk full"):
        asyncio.run(main())
    assert first.calls == failing.calls == last.calls == ["start", "stop"]
