"""A QTM RT server: the frames a simulated motion capture publishes, served as
Qualisys Track Manager serves its 6DOF bodies in real time, to any number of
clients (Qualisys' own `qtm-rt` among them).

``async with QtmServer(host, port, frequency) as server:`` listens (port 0:
any free one, then :attr:`port`); :meth:`publish` hands it each new frame
(number, time s, body name -> ((x, y, z) mm, 3x3 rotation row-major) or None).
The commands served: ``Version``, ``QTMVersion``, ``ByteOrder``,
``GetParameters`` (General and 6D), ``StreamFrames AllFrames|Frequency:N|
FrequencyDivisor:N 6D``, ``StreamFrames Stop``, ``GetCurrentFrame 6D``; any
other gets QTM's error packet. Slow clients skip frames
(:mod:`aiko.drivers.frame_server`). The wire format: :mod:`aiko.drivers.qtm`.
"""

from __future__ import annotations

from collections.abc import Iterable

from .frame_server import Client, Frame, FrameServer
from .qtm import (
    COMMAND,
    ERROR,
    NO_MORE_DATA,
    QTM_PORT,
    XML,
    data_packet,
    packet,
    parameters_xml,
    split,
    text_packet,
)

__all__ = ["QtmServer"]

_SERVED_COMPONENTS = {"6d"}


class QtmServer(FrameServer):
    """See the module docstring; ``frequency``: the capture rate (Hz) the
    settings report; ``bodies``: the 6D bodies' names, in the order of the
    data (as QTM's project defines them; others are added as they appear)."""

    name = "qtm"

    def __init__(self, host: str = "127.0.0.1", port: int = QTM_PORT,
                 frequency: float = 100.0, bodies: Iterable[str] = ()) -> None:
        super().__init__(host, port, bodies)
        self.frequency = frequency

    def greet(self, client: Client) -> None:
        client.reply(text_packet(COMMAND, "QTM RT Interface connected"))

    def split(self, buffer: bytearray) -> list[tuple[int, bytes]]:
        return split(buffer)              # a QtmError is a ValueError

    def request(self, client: Client, req: tuple[int, bytes]) -> None:
        kind, payload = req
        if kind != COMMAND:
            client.reply(text_packet(ERROR, "Command expected"))
            return
        words = payload.rstrip(b"\0").decode("utf-8", errors="replace").split()
        if not words:
            client.reply(text_packet(ERROR, "Parse error"))
            return
        handler = {"version": self._version, "qtmversion": self._qtm_version,
                   "byteorder": self._byte_order, "getparameters": self._parameters,
                   "streamframes": self._stream, "getcurrentframe": self._current}.get(
            words[0].lower())
        if handler is None:
            client.reply(text_packet(ERROR, f"Parse error: {words[0]} is not served"))
            return
        handler(client, [w.lower() for w in words[1:]])

    def _version(self, client: Client, args: list[str]) -> None:
        version = args[0] if args else "1.25"
        client.options["version"] = version
        client.reply(text_packet(COMMAND, f"Version set to {version}"))

    def _qtm_version(self, client: Client, args: list[str]) -> None:
        client.reply(text_packet(COMMAND, "QTM Version is the simulated Aiko's"))

    def _byte_order(self, client: Client, args: list[str]) -> None:
        client.reply(text_packet(COMMAND, "Byte order is little endian"))

    def _parameters(self, client: Client, args: list[str]) -> None:
        version = client.options.get("version", "1.25")
        client.reply(text_packet(XML, parameters_xml(self._names, self.frequency, version)))

    def _components(self, client: Client, args: list[str]) -> bool:
        """Whether the components asked for are served (else an error sent)."""
        unserved = sorted(set(args) - _SERVED_COMPONENTS)
        if not args or unserved:
            client.reply(text_packet(ERROR, f"Component {' '.join(unserved) or '(none)'} "
                                            "is not served: 6D only"))
            return False
        return True

    def _stream(self, client: Client, args: list[str]) -> None:
        if args[:1] == ["stop"]:
            client.wants_frames = False
            return
        if not args:
            client.reply(text_packet(ERROR, "Parse error: StreamFrames what?"))
            return
        rate, comps = args[0], args[1:]
        every = 1
        try:
            if rate.startswith("frequencydivisor:"):
                every = max(1, int(rate.split(":", 1)[1]))
            elif rate.startswith("frequency:"):
                every = max(1, round(self.frequency / float(rate.split(":", 1)[1])))
            elif rate != "allframes":
                raise ValueError(rate)
        except ValueError:
            client.reply(text_packet(ERROR, f"Parse error: frame rate {rate}"))
            return
        if self._components(client, comps):
            client.options["every"] = every
            client.wants_frames = True

    def _current(self, client: Client, args: list[str]) -> None:
        if not self._components(client, args):
            return
        if self.latest is None:
            client.reply(packet(NO_MORE_DATA, b""))
            return
        client.owed += 1
        self.send_latest(client)

    def due(self, client: Client, frame: Frame) -> bool:
        return client.owed > 0 or frame[0] % client.options.get("every", 1) == 0

    def encode(self, client: Client, frame: Frame) -> bytes:
        number, t, bodies = frame
        return data_packet(number, round(t * 1e6), bodies.values())
