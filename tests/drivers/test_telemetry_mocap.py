"""MQTT telemetry against a real broker (mosquitto) and with the broker gone;
the Vicon UDP Object Stream and the motion-capture logger (the DataStream:
tests/drivers/test_datastream.py)."""

import asyncio
import json

import aiomqtt
import pytest

from aiko.drivers.clock import VirtualClock
from aiko.drivers.mocap import (
    MocapLogger,
    MocapSample,
    ObjectStreamError,
    decode_object_stream,
    encode_object_stream,
)
from aiko.drivers.telemetry import MqttConfig, MqttTelemetry, TelemetryConfigError
from tests.conftest import free_port, trial_with_emulator


def test_mqtt_url_parsing():
    c = MqttConfig.from_url("mqtts://lab:s%40cret@broker.local:8884/snake")
    assert (c.host, c.port, c.username, c.password, c.tls, c.prefix) == (
        "broker.local", 8884, "lab", "s@cret", True, "snake")
    assert MqttConfig.from_url("mqtt://127.0.0.1").port == 1883
    with pytest.raises(TelemetryConfigError, match="scheme"):
        MqttConfig.from_url("http://x")


def test_trial_telemetry_reaches_a_real_broker(broker, tmp_path):
    async def main():
        got = []
        async with aiomqtt.Client("127.0.0.1", broker) as sub:
            await sub.subscribe("aiko/#")
            tel = MqttTelemetry(MqttConfig("127.0.0.1", broker), "t1")

            async def listen():
                async for m in sub.messages:
                    got.append((str(m.topic), json.loads(m.payload)))

            listener = asyncio.create_task(listen())
            result, *_ = await trial_with_emulator(tmp_path / "t.mcap", 2.5, nodes=2, mocap=True,
                                                   telemetry=tel)
            await asyncio.sleep(0.3)
            listener.cancel()
        return result, got, tel

    result, got, tel = asyncio.run(main())
    topics = {t for t, _ in got}
    assert {"aiko/t1/link6", "aiko/t1/status", "aiko/t1/event"} <= topics
    status = [p for t, p in got if t == "aiko/t1/status"]
    # online first, the snapshots, offline last (published before leaving)
    assert status[0] == {"state": "online", "trial": "t1"}
    assert status[-1] == {"state": "offline", "trial": "t1", "reason": "trial ended"}
    running = [p for p in status if p["state"] == "running"]
    assert running[-1]["nodes_ok"] == 2 and running[-1]["periods"] > 10
    link6 = [p for t, p in got if t == "aiko/t1/link6" and not p["occluded"]]
    assert link6 and all(abs(p["y"] - 0.01 * p["frame"]) < 1e-9 for p in link6)
    events = [p["kind"] for t, p in got if t == "aiko/t1/event"]
    assert events == ["trial_start"]  # trial_end is the session's, after the comparison
    assert tel.published == len(got) and tel.dropped == 0
    assert result.reason == "completed" and result.stream.missed == 0


def test_trial_is_unaffected_when_the_broker_is_down(tmp_path):
    tel = MqttTelemetry(MqttConfig("127.0.0.1", free_port()), "t2", reconnect_delay=0.2)
    result, data, *_ = asyncio.run(trial_with_emulator(tmp_path / "t.mcap", 2.0, nodes=2,
                                                       mocap=True, telemetry=tel))
    assert result.reason == "completed"
    # every period sent and answered; none skipped (lateness of a few ms on a
    # loaded test machine is not the broker's doing and is not asserted here)
    assert len(data.references("gait")[0]) == 21 and result.stream.missed == 0
    assert result.stream.states_matched == 2 * result.stream.periods  # the ramp's too
    assert tel.published == 0 and tel.dropped > 0 and tel.connects == 0


def test_object_stream_codec_and_malformed_datagrams():
    d = encode_object_stream(77, {"link6": (1.0, -2.0, 3.5, 0.1, 0.2, 0.3)})
    assert len(d) == 5 + 75
    assert decode_object_stream(d) == (77, {"link6": (1.0, -2.0, 3.5, 0.1, 0.2, 0.3)})
    for bad in (b"", d[:-1], d + b"\0", d[:5] + b"\0\x10\0" + d[8:],
                encode_object_stream(1, {"x": (float("nan"), 0, 0, 0, 0, 0)})):
        with pytest.raises(ObjectStreamError):
            decode_object_stream(bad)


def test_mocap_logger_marks_stale_frames_and_keeps_occlusions():
    class Src:
        def __init__(self):
            self.items = [None, MocapSample(0.0, 1, (0.0, 0.0, 0.0)),
                          MocapSample(0.05, 1, (0.0, 0.0, 0.0)), MocapSample(0.1, 2, None)]

        def latest(self):
            return self.items.pop(0) if len(self.items) > 1 else self.items[0]

    out = []
    clock = VirtualClock()
    logger = MocapLogger(Src(), clock, lambda t, s: out.append((t, s)), rate=20)

    async def main():
        task = asyncio.create_task(logger.run())
        for _ in range(20):
            await asyncio.sleep(0)
        task.cancel()

    asyncio.run(main())
    kinds = [None if s is None else (s.frame, s.stale, s.occluded) for _, s in out[:5]]
    assert kinds[:4] == [None, (1, False, False), (1, True, False), (2, False, True)]
    assert [round(t, 9) for t, _ in out[:4]] == [0.0, 0.05, 0.1, 0.15]
    assert logger.empty == 1 and logger.stale >= 1 and logger.occluded >= 1
