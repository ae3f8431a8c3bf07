"""An emulated serial-line CAN adapter (Lawicel/slcan ASCII) on a TCP port.

Another process reaches it with python-can's own ``slcan`` interface and the
pyserial URL ``socket://127.0.0.1:PORT``, exactly as it would reach a USB-CAN
adapter in the lab. The adapter bridges that client to a python-can bus (in the
emulator: the virtual bus its joint modules sit on).

Commands understood (each ends with CR; the answer is CR for ok, BEL for an
error): ``S0``-``S8`` bit rate, ``sxxyy`` bit timing, ``O`` open, ``L`` open
listen-only, ``C`` close, ``V``/``v`` versions, ``N`` serial number, ``F`` status
flags, ``Z0``/``Z1`` time stamps, ``tIIIL<data>`` and ``TIIIIIIIIL<data>`` send a
frame (answered ``z``/``Z``), ``rIIIL`` and ``RIIIIIIIIL`` send a remote frame.
Received frames go to the client as ``tIIIL<data>`` (``T``/``r``/``R`` as fits).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import can

from .bus_reader import BusReader

__all__ = ["SlcanCommand", "parse_command", "format_frame", "SlcanAdapter", "SlcanError"]

log = logging.getLogger(__name__)

OK = b"\r"
ERROR = b"\a"
BITRATES = {0: 10_000, 1: 20_000, 2: 50_000, 3: 100_000, 4: 125_000, 5: 250_000,
            6: 500_000, 7: 800_000, 8: 1_000_000}
MAX_LINE = 64


class SlcanError(ValueError):
    """A command line the adapter cannot take."""


@dataclass(frozen=True)
class SlcanCommand:
    """A parsed command: ``op`` is its letter; ``frame`` is set for transmissions,
    ``arg`` for the rest."""

    op: str
    arg: str = ""
    frame: can.Message | None = None


def _frame(op: str, body: str) -> can.Message:
    extended = op in "TR"
    remote = op in "rR"
    nid = 8 if extended else 3
    if len(body) < nid + 1:
        raise SlcanError("frame too short")
    try:
        ident = int(body[:nid], 16)
        dlc = int(body[nid], 16)
    except ValueError as exc:
        raise SlcanError("bad identifier or length") from exc
    if dlc > 8 or ident > (0x1FFFFFFF if extended else 0x7FF):
        raise SlcanError("identifier or length out of range")
    hexdata = body[nid + 1:]
    if remote:
        if hexdata:
            raise SlcanError("remote frame with data")
        data = b""
    else:
        if len(hexdata) != 2 * dlc:
            raise SlcanError("data length does not match DLC")
        try:
            data = bytes.fromhex(hexdata)
        except ValueError as exc:
            raise SlcanError("bad data") from exc
    return can.Message(arbitration_id=ident, is_extended_id=extended, is_remote_frame=remote,
                       dlc=dlc, data=data)


def parse_command(line: bytes) -> SlcanCommand:
    """Parse one command line (without its CR)."""
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError as exc:
        raise SlcanError("not ASCII") from exc
    if not text:
        return SlcanCommand("")
    op, rest = text[0], text[1:]
    if op in "tTrR":
        return SlcanCommand(op, frame=_frame(op, rest))
    if op == "S":
        if len(rest) != 1 or not rest.isdigit() or int(rest) not in BITRATES:
            raise SlcanError("bad bit rate")
        return SlcanCommand(op, rest)
    if op == "s":
        if len(rest) != 4:
            raise SlcanError("bad bit timing")
        return SlcanCommand(op, rest)
    if op in "OLCVvNF" and not rest:
        return SlcanCommand(op)
    if op == "Z" and rest in ("0", "1"):
        return SlcanCommand(op, rest)
    raise SlcanError(f"unknown command {text[:10]!r}")


def format_frame(msg: can.Message) -> bytes:
    """A received frame as the adapter sends it to the host (with CR)."""
    if msg.is_extended_id:
        head = f"{'R' if msg.is_remote_frame else 'T'}{msg.arbitration_id:08X}{msg.dlc:d}"
    else:
        head = f"{'r' if msg.is_remote_frame else 't'}{msg.arbitration_id:03X}{msg.dlc:d}"
    body = "" if msg.is_remote_frame else bytes(msg.data[:msg.dlc]).hex().upper()
    return (head + body).encode("ascii") + OK


class SlcanAdapter:
    """The adapter: a TCP server (one client at a time, like a serial port)
    bridged to ``bus``. Use ``async with SlcanAdapter(bus, port=0) as a:`` and read
    ``a.port``; counters ``frames_in``, ``frames_out``, ``errors`` (commands
    answered with BEL)."""

    def __init__(self, bus: can.BusABC, host: str = "127.0.0.1", port: int = 0) -> None:
        self.bus = bus
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.frames_in = 0
        self.frames_out = 0
        self.errors = 0
        self._server: asyncio.base_events.Server | None = None
        self._client: asyncio.StreamWriter | None = None
        self._open = False
        self._listen_only = False
        self._reader = can.AsyncBufferedReader()
        self._notifier: BusReader | None = None
        self._pump: asyncio.Task | None = None

    async def __aenter__(self) -> SlcanAdapter:
        loop = asyncio.get_running_loop()
        self._notifier = BusReader(self.bus, [self._reader], loop)
        self._server = await asyncio.start_server(self._serve, self.host, self.requested_port)
        self.port = self._server.sockets[0].getsockname()[1]
        self._pump = asyncio.create_task(self._bus_to_client(), name="slcan-bus-to-client")
        log.info("slcan adapter on %s:%d", self.host, self.port)
        return self

    async def __aexit__(self, *exc) -> None:
        if self._pump is not None:
            self._pump.cancel()
            try:
                await self._pump
            except asyncio.CancelledError:
                pass
        if self._server is not None:
            self._server.close()
            if self._client is not None:
                self._client.close()
            await self._server.wait_closed()
        if self._notifier is not None:
            self._notifier.stop()

    @property
    def channel(self) -> str:
        return f"socket://{self.host}:{self.port}"

    async def _bus_to_client(self) -> None:
        while True:
            msgs = [await self._reader.get_message()]
            while not self._reader.buffer.empty():     # all that came at once: one write
                msgs.append(self._reader.buffer.get_nowait())
            w = self._client
            if w is not None and self._open and not w.is_closing():
                w.write(b"".join(format_frame(m) for m in msgs))
                self.frames_out += len(msgs)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._client is not None:  # the port is taken
            writer.close()
            return
        self._client = writer
        self._open = False
        buf = b""
        try:
            while True:
                chunk = await reader.read(4096)
                if not chunk:
                    break
                buf += chunk
                while b"\r" in buf:
                    line, buf = buf.split(b"\r", 1)
                    reply = self._execute(line)
                    if reply == ERROR:
                        self.errors += 1
                    writer.write(reply)
                if len(buf) > MAX_LINE:  # garbage without CR: drop it
                    buf = b""
                    self.errors += 1
                    writer.write(ERROR)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._client = None
            self._open = False
            writer.close()

    def _execute(self, line: bytes) -> bytes:
        try:
            cmd = parse_command(line.strip(b"\n"))
        except SlcanError as exc:
            log.debug("slcan: %s", exc)
            return ERROR
        op = cmd.op
        if op == "":
            return OK
        if op in "Ss":
            return ERROR if self._open else OK
        if op in "OL":
            if self._open:
                return ERROR
            self._open, self._listen_only = True, op == "L"
            return OK
        if op == "C":
            self._open = False
            return OK
        if op == "V":
            return b"V1013" + OK
        if op == "v":
            return b"v0101" + OK
        if op == "N":
            return b"NAIKO" + OK
        if op == "F":
            return b"F00" + OK
        if op == "Z":
            return OK
        # transmissions
        if not self._open or self._listen_only or cmd.frame is None:
            return ERROR
        try:
            self.bus.send(cmd.frame, timeout=0.1)
        except can.CanError as exc:
            log.warning("slcan: could not forward a frame: %s", exc)
            return ERROR
        self.frames_in += 1
        return (b"Z" if cmd.frame.is_extended_id else b"z") + OK
