"""Motion capture and the MQTT broker, as a trial would open them.

Motion capture is listened to for :attr:`DoctorConfig.mocap_window` s: the
frames that arrived give the stream's rate (every UDP datagram; every frame
the DataStream SDK's client received), which must reach the rate
the trial logs at (a faster stream is fine, the logger samples it), and the
subject must be in view in most of them (judged on the newest frame, polled
every millisecond). The broker must accept a connection
(with TLS and the password when configured) within
:attr:`DoctorConfig.mqtt_timeout` s; nothing is published.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import aiomqtt

from aiko.drivers.mocap import VICON_UDP_PORT, MocapUnavailableError, ViconUdpSource
from aiko.drivers.mocap_sources import SERVED_KINDS, open_served_source

from .report import Check, DoctorConfig, Status

__all__ = ["check_mocap", "check_mqtt", "VISIBLE_FRACTION"]

VISIBLE_FRACTION = 0.9
"""The subject must be in view in this fraction of the frames at least."""
_POLL = 0.001


def _source(cfg: DoctorConfig, clock) -> tuple[Any, str]:
    if cfg.mocap_source in SERVED_KINDS:
        assert cfg.mocap_host is not None  # the rig settings require it
        source = open_served_source(cfg.mocap_source, cfg.mocap_host, cfg.mocap_subject, clock)
        return source, getattr(source, "name", cfg.mocap_source)
    port = VICON_UDP_PORT if cfg.mocap_port is None else cfg.mocap_port
    host = cfg.mocap_host or "0.0.0.0"
    return ViconUdpSource(cfg.mocap_subject, clock, host, port), f"vicon-udp {host}:{port}"


async def check_mocap(cfg: DoctorConfig, clock) -> Check:
    """One row: frames arrive at the expected rate and the subject is in view."""
    if cfg.mocap_source in (None, "none"):
        return Check("motion capture", Status.OFF, "none configured")
    source, where = _source(cfg, clock)
    frames: dict[int, bool] = {}             # frame number -> subject in view
    names: set[str] = set()
    try:
        async with source:
            f0 = _frames(source)
            end = clock.now() + cfg.mocap_window
            while clock.now() < end:
                sample = source.latest()
                if sample is not None:
                    frames[sample.frame] = not sample.occluded
                newest = source.latest_objects()
                if newest is not None:
                    names.update(newest[2])
                await asyncio.sleep(_POLL)
            # every frame counted (polling misses those that come in bursts)
            count = _frames(source) - f0
    except MocapUnavailableError as exc:
        return Check("motion capture", Status.FAIL, str(exc),
                     "the Vicon PC, its address and the network to it")
    return _mocap_row(cfg, where, count / cfg.mocap_window, frames, names)


def _frames(source: Any) -> int:
    """Every frame the source received (a UDP source's datagrams)."""
    return source.datagrams if isinstance(source, ViconUdpSource) else source.frames


def _mocap_row(cfg: DoctorConfig, where: str, rate: float, frames: dict[int, bool],
               names: set[str]) -> Check:
    """``rate``: frames a second that arrived; ``frames``: the frames polled,
    each with whether the subject was in view."""
    if not frames:
        return Check("motion capture", Status.FAIL,
                     f"{where}: no frame in {cfg.mocap_window:g} s",
                     "is the stream on (Tracker's UDP Object Stream, or the DataStream "
                     "server) and sent to this PC?")
    seen = f"{where}: {rate:.0f} frames/s"
    in_view = sum(frames.values()) / len(frames)
    subject = cfg.mocap_subject
    if in_view == 0:
        others = f" (objects: {', '.join(sorted(names))})" if names else ""
        return Check("motion capture", Status.FAIL, f"{seen}; {subject!r} never in view{others}",
                     "the subject's name (mocap.subject) and its markers")
    seen += f"; {subject} in view in {100 * in_view:.0f} % of them"
    if rate < 0.8 * cfg.mocap_rate:
        return Check("motion capture", Status.FAIL, f"{seen}; the trial logs "
                     f"{cfg.mocap_rate:g} Hz", "the stream's rate in Tracker, or mocap.rate")
    if in_view < VISIBLE_FRACTION:
        return Check("motion capture", Status.WARN, seen,
                     "the subject's markers and the cameras' view of the start mark")
    return Check("motion capture", Status.OK, seen)


async def check_mqtt(cfg: DoctorConfig) -> Check:
    """One row: the broker accepts a connection."""
    if cfg.mqtt_problem is not None:
        return Check("MQTT broker", Status.FAIL, cfg.mqtt_problem,
                     "the environment the trials run in")
    c = cfg.mqtt
    if c is None:
        return Check("MQTT broker", Status.OFF, "none configured")
    where = f"{'mqtts' if c.tls else 'mqtt'}://{c.host}:{c.port}"
    try:
        tls = ssl.create_default_context(cafile=c.ca_file) if c.tls else None
    except (OSError, ssl.SSLError) as exc:
        return Check("MQTT broker", Status.FAIL, f"{where}: CA file {c.ca_file}: {exc}",
                     "mqtt.ca_file")
    try:
        async with asyncio.timeout(cfg.mqtt_timeout):
            async with aiomqtt.Client(c.host, c.port, username=c.username, password=c.password,
                                      tls_context=tls, timeout=cfg.mqtt_timeout):
                pass
    except TimeoutError:
        return Check("MQTT broker", Status.FAIL,
                     f"{where}: no answer in {cfg.mqtt_timeout:g} s",
                     "the broker's address and the network to it")
    except aiomqtt.MqttError as exc:
        return Check("MQTT broker", Status.FAIL, f"{where}: {exc}",
                     "is the broker running, and do the user and password match?")
    return Check("MQTT broker", Status.OK, f"{where}: connection accepted"
                 + (f" as {c.username}" if c.username else ""))
