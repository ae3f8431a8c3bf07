"""Live telemetry over MQTT (aiomqtt), never able to stall or fail a trial.

Topics, under ``PREFIX/TRIAL`` (default prefix ``aiko``), JSON payloads; the
QoS of each is :data:`TOPIC_QOS`:

* ``.../status``: retained ``{"state": "online", "trial"}`` when connected and
  ``{"state": "offline", "reason"}`` when the trial's telemetry ends, or, as
  the connection's last will, when the runner dies without a goodbye (QoS 1);
  in between, not retained, the trial's status once a second
  ``{"state": "running", "t", "phase", "periods", "late", "missed",
  "nodes_ok", "nodes"}`` (QoS 0)
* ``.../link6``: ``{"t": s, "frame": n, "x": m, "y": m, "z": m}`` or ``"occluded": true``
* ``.../model``: the parallel model's link 6 ``{"t", "x", "y", "z", "lag"}``, when asked
* ``.../steering``: one record per gait period of a steered trial
* ``.../fault``: ``{"t", "kind", "node", "reason"}`` when the supervisor stops a trial
* ``.../emcy``: ``{"t", "node", "error_code", "error_register", "motor"}`` as they come
* ``.../event``: ``trial_start``; ``trial_end`` with the ``reason``, the ``fault``
  and the comparison's ``metrics``

``publish`` only queues (bounded; when full the message is dropped and counted).
A task it owns (:meth:`MqttTelemetry.start`) connects, publishes what is
queued, and on any broker error waits and reconnects; what is queued while the
broker is away is dropped and counted too, so a slow or absent broker costs
the trial nothing. :meth:`MqttTelemetry.stop` publishes what is still queued
(within ``drain_timeout``), then the retained offline state, and leaves.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

import aiomqtt

from aiko.model.errors import AikoError

from .messages import Message

__all__ = ["MqttConfig", "MqttTelemetry", "TelemetryConfigError", "TOPIC_QOS"]

TOPIC_QOS = {"status": 0, "link6": 0, "model": 0, "steering": 0, "fault": 1, "emcy": 1,
             "event": 1}
"""Each topic's QoS: at most once for the streams (a lost sample is stale at
once), at least once for what happens only once; the online/offline state on
``status`` is QoS 1 and retained."""

log = logging.getLogger(__name__)


class TelemetryConfigError(AikoError):
    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"MQTT URL {url!r}: {reason}")


@dataclass(frozen=True)
class MqttConfig:
    host: str
    port: int = 1883
    username: str | None = None
    password: str | None = None
    tls: bool = False
    ca_file: str | None = None
    prefix: str = "aiko"

    @classmethod
    def from_url(cls, url: str, ca_file: str | None = None) -> MqttConfig:
        """``mqtt://[user[:password]@]host[:port][/prefix]`` or ``mqtts://...`` (TLS)."""
        u = urlparse(url)
        if u.scheme not in ("mqtt", "mqtts"):
            raise TelemetryConfigError(url, "scheme must be mqtt:// or mqtts://")
        if not u.hostname:
            raise TelemetryConfigError(url, "no host")
        try:
            port = u.port or (8883 if u.scheme == "mqtts" else 1883)
        except ValueError:
            raise TelemetryConfigError(url, "bad port") from None
        prefix = u.path.strip("/") or "aiko"
        return cls(u.hostname, port, unquote(u.username) if u.username else None,
                   unquote(u.password) if u.password else None, u.scheme == "mqtts", ca_file,
                   prefix)


def _raise_if_cancelled(exc: Exception | None = None) -> None:
    """Raise the cancellation of this task if one is pending: aiomqtt reports a
    cancellation during connect or publish as an MqttError, and its waits
    (Python 3.11's wait_for) can drop one that arrives as they finish."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError() from exc


async def _leave(client, timeout: float) -> None:
    """Disconnect, waiting at most ``timeout`` for the broker."""
    try:
        async with asyncio.timeout(timeout):
            await client.__aexit__(None, None, None)
    except (TimeoutError, aiomqtt.MqttError):
        pass


class MqttTelemetry:
    """Queue-and-forget publisher; run ``await telemetry.run()`` as a task."""

    def __init__(self, config: MqttConfig, trial: str, queue_size: int = 1000,
                 reconnect_delay: float = 1.0, drain_timeout: float = 2.0) -> None:
        self.config = config
        self.trial = trial
        self.topic = f"{config.prefix}/{trial}"
        self.queue: asyncio.Queue[tuple[str, bytes, int, bool]] = asyncio.Queue(
            maxsize=queue_size)
        self.reconnect_delay = reconnect_delay
        self.disconnect_timeout = 1.0
        self.drain_timeout = drain_timeout
        self.published = 0
        self.dropped = 0
        self.connects = 0
        self.connected = False
        self._task: asyncio.Task | None = None

    def publish(self, message: Message) -> None:
        """Queue ``message`` (:mod:`.messages`) for ``PREFIX/TRIAL/topic``;
        never blocks. A status is marked ``"state": "running"``."""
        payload = message.payload()
        if message.topic == "status":
            payload = {"state": "running", **payload}
        self._put(message.topic, payload, TOPIC_QOS.get(message.topic, 0), retain=False)

    def _put(self, subtopic: str, payload: dict, qos: int, retain: bool) -> None:
        try:
            self.queue.put_nowait((f"{self.topic}/{subtopic}",
                                   json.dumps(payload).encode(), qos, retain))
        except asyncio.QueueFull:
            self.dropped += 1

    def _state(self, state: str, **data) -> bytes:
        return json.dumps({"state": state, "trial": self.trial, **data}).encode()

    async def start(self) -> None:
        """Connect and publish in the background, in a task this object owns,
        until :meth:`stop`."""
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name="telemetry")

    async def stop(self) -> None:
        """Publish what is queued (at most ``drain_timeout`` s, only while
        connected), then the retained offline state; end the task."""
        task, self._task = self._task, None
        if task is None:
            return
        if self.connected:
            if not self.queue.full():
                self.queue.put_nowait((f"{self.topic}/status", self._state(
                    "offline", reason="trial ended"), 1, True))
            try:
                async with asyncio.timeout(self.drain_timeout):
                    await self.queue.join()
            except TimeoutError:
                log.warning("MQTT: %d message(s) not published within %.1f s",
                            self.queue.qsize(), self.drain_timeout)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # noqa: BLE001 - telemetry never fails a trial
            log.warning("MQTT telemetry had stopped: %s: %s", type(exc).__name__, exc)
        self.dropped += self.queue.qsize()

    def _tls(self):
        if not self.config.tls:
            return None
        return ssl.create_default_context(cafile=self.config.ca_file)

    async def run(self) -> None:
        """Connect, publish, reconnect; forever (cancel to stop). aiomqtt turns
        a cancellation that arrives while it connects or publishes into an
        MqttError; that one is a cancellation still, never a reconnect.

        Leaving a connection (error or cancellation) waits at most
        ``disconnect_timeout`` for the broker's goodbye: aiomqtt would otherwise
        wait for it without limit, and a trial must never hang on its telemetry.
        """
        c = self.config
        will = aiomqtt.Will(f"{self.topic}/status",
                            self._state("offline", reason="connection lost"), qos=1, retain=True)
        while True:
            client = aiomqtt.Client(c.host, c.port, username=c.username, password=c.password,
                                    tls_context=self._tls(), timeout=2.0, will=will)
            try:
                await client.__aenter__()
            except aiomqtt.MqttError as exc:
                _raise_if_cancelled(exc)
                log.warning("MQTT %s:%d unavailable: %s", c.host, c.port, exc)
            else:
                task = asyncio.current_task()
                if task is not None and task.cancelling():  # connected as the trial ended
                    await _leave(client, self.disconnect_timeout)
                    _raise_if_cancelled()
                self.connected = True
                self.connects += 1
                log.info("MQTT connected to %s:%d", c.host, c.port)
                try:
                    await client.publish(f"{self.topic}/status", self._state("online"), qos=1,
                                         retain=True)
                    self.published += 1
                    while True:
                        topic, payload, qos, retain = await self.queue.get()
                        try:
                            await client.publish(topic, payload, qos=qos, retain=retain)
                        finally:
                            self.queue.task_done()
                        self.published += 1
                        _raise_if_cancelled()
                except aiomqtt.MqttError as exc:
                    _raise_if_cancelled(exc)
                    log.warning("MQTT %s:%d lost: %s", c.host, c.port, exc)
                finally:
                    self.connected = False
                    await _leave(client, self.disconnect_timeout)
            # what waits in the queue while we are away is dropped, not hoarded
            while not self.queue.empty():
                self.queue.get_nowait()
                self.queue.task_done()
                self.dropped += 1
            await asyncio.sleep(self.reconnect_delay)
