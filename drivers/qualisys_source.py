"""Qualisys Track Manager's 6DOF bodies through Qualisys' own Python SDK
(`qtm-rt`, from PyPI), in this process's event loop.

:class:`QualisysSource` connects (a one-line error if QTM does not answer
within its timeout), reads the bodies' names from the 6D settings and streams
every frame's 6D component: frame numbers are QTM's, a body QTM does not track
in a frame (NaN) is occluded, latency is not reported. A frame that does not
read is counted in ``malformed``; a connection that drops is counted in
``errors`` and its samples go stale, as with any source.
"""

from __future__ import annotations

import asyncio
import logging
import math
import xml.etree.ElementTree as ET

from .mocap import MocapUnavailableError, NewestFrame
from .qtm import QTM_PORT
from .vendor_mocap import split_address

__all__ = ["QualisysSource", "body_names"]

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5.0


def body_names(xml_text: str) -> list[str]:
    """The 6D bodies' names, in the order of the data (QtmError-free: a
    settings text without bodies gives none); ValueError if not XML."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ValueError(f"the 6D settings are not XML ({exc})") from exc
    six = root.find("The_6D")
    if six is None:
        return []
    return [(body.findtext("Name") or "").strip() for body in six.findall("Body")]


class QualisysSource(NewestFrame):
    """QTM at ``address`` (HOST[:PORT], port 22223), tracking body
    ``subject``; a :class:`~aiko.drivers.mocap.MocapSource`."""

    def __init__(self, address: str, subject: str, clock) -> None:
        self.host, self.port = split_address(address, QTM_PORT)
        super().__init__(subject)
        self.clock = clock
        self.frames = 0
        self.malformed = 0
        self.errors = 0
        self.names: list[str] = []
        self._conn = None

    @property
    def name(self) -> str:
        return f"qualisys {self.host}:{self.port}"

    async def __aenter__(self) -> QualisysSource:
        import qtm_rt

        sdk_log = logging.getLogger("qtm_rt")
        level = sdk_log.level
        sdk_log.setLevel(logging.CRITICAL)   # its refusal is ours to say, in one line
        try:
            conn = await asyncio.wait_for(qtm_rt.connect(
                self.host, self.port, version="1.25", on_disconnect=self._lost,
                timeout=CONNECT_TIMEOUT), CONNECT_TIMEOUT)
        except TimeoutError:
            conn = None
        finally:
            sdk_log.setLevel(level)
        if conn is None:     # the SDK gives None for a refusal
            raise MocapUnavailableError(self.name, "cannot connect (is QTM running, its "
                                                   "real-time server on?)")
        self._conn = conn
        try:
            self.names = body_names((await conn.get_parameters(["6d"])).decode(
                "utf-8", errors="replace"))
            await conn.stream_frames(components=["6d"], on_packet=self._packet)
        except (qtm_rt.QRTCommandException, TimeoutError, ValueError) as exc:
            conn.disconnect()
            raise MocapUnavailableError(self.name, f"cannot stream 6D bodies ({exc})") from exc
        return self

    async def __aexit__(self, *exc: object) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and conn.has_transport():
            conn.disconnect()

    def _lost(self, exc: Exception | None) -> None:
        if self._conn is not None:        # not our own disconnect
            self.errors += 1
            log.warning("motion capture %s: the connection dropped (%s)", self.name, exc)

    def _packet(self, packet) -> None:
        t = self.clock.now()
        try:
            got = packet.get_6d()
            if got is None:
                raise ValueError("no 6D component")
            _, bodies = got
            objects = {}
            for name, (pos, _) in zip(self.names, bodies, strict=False):
                if not math.isnan(pos.x):
                    objects[name] = (pos.x / 1000.0, pos.y / 1000.0, pos.z / 1000.0)
            frame = int(packet.framenumber)
        except (ValueError, IndexError, TypeError) as exc:
            self.malformed += 1
            log.debug("motion capture %s: a frame does not read: %s", self.name, exc)
            return
        self.frames += 1
        self.take(t, frame, objects)

