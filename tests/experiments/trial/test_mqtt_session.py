"""MQTT telemetry of whole `aiko run` sessions against a real broker: the end
of the trial with its outcome and the comparison's metrics, and the last will
of a runner killed mid-trial."""

import asyncio
import json
import os
import signal
import sys

import aiomqtt


async def _collect(port: int, topic: str, until, proc_args: list[str], kill_when=None,
                   timeout: float = 300.0):
    """Subscribe to ``topic``, start ``aiko`` with ``proc_args``, collect
    (topic, payload) until ``until(messages)``; ``kill_when(messages)``: send
    the runner SIGKILL once it holds. Returns (messages, the runner's exit code)."""
    got: list[tuple[str, dict]] = []
    async with aiomqtt.Client("127.0.0.1", port) as sub:
        await sub.subscribe(topic, qos=1)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aiko.experiments.cli", *proc_args,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        killed = False
        try:
            async with asyncio.timeout(timeout):
                async for m in sub.messages:
                    got.append((str(m.topic), json.loads(m.payload)))
                    if kill_when is not None and not killed and kill_when(got):
                        os.kill(proc.pid, signal.SIGKILL)
                        killed = True
                    if until(got):
                        break
            code = await asyncio.wait_for(proc.wait(), 60)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    return got, code


def _states(got):
    return [p.get("state") for t, p in got if t.endswith("/status")]


def test_the_broker_gets_the_trials_end_with_its_metrics(broker, tmp_path):
    out = tmp_path / "mq.mcap"
    got, code = asyncio.run(_collect(
        broker, "aiko/mq/#", lambda g: "offline" in _states(g),
        ["run", "sidewinding", "--plant", "ideal", "--duration", "3", "--out", str(out),
         "--mqtt", f"mqtt://127.0.0.1:{broker}", "--mqtt-model"]))
    assert code == 0
    states = _states(got)
    assert states[0] == "online" and states[-1] == "offline" and "running" in states
    (end,) = [p for t, p in got if t == "aiko/mq/event" and p["kind"] == "trial_end"]
    assert end["reason"] == "completed" and end["fault"] is None
    on_disk = json.loads(out.with_suffix(".json").read_text())
    assert end["metrics"] == on_disk   # the comparison written beside the log
    model = [p for t, p in got if t == "aiko/mq/model"]
    assert model and set(model[0]) == {"t", "x", "y", "z", "lag"}
    # the end, with the comparison, comes after the trial's every sample
    topics = [t for t, _ in got]
    end_at = next(i for i, (t, p) in enumerate(got) if p.get("kind") == "trial_end")
    assert max(i for i, t in enumerate(topics) if t == "aiko/mq/link6") < end_at


def test_subscribers_get_the_last_will_of_a_killed_runner(broker, tmp_path):
    out = tmp_path / "killed.mcap"

    def running(g):
        return _states(g).count("running") >= 2

    got, code = asyncio.run(_collect(
        broker, "aiko/killed/status", lambda g: _states(g)[-1:] == ["offline"],
        ["run", "sidewinding", "--plant", "ideal", "--duration", "60", "--no-model",
         "--out", str(out), "--mqtt", f"mqtt://127.0.0.1:{broker}"], kill_when=running))
    assert code == -signal.SIGKILL
    assert got[-1] == ("aiko/killed/status", {"state": "offline", "trial": "killed",
                                              "reason": "connection lost"})
