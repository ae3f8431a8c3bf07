"""The live view of a running trial: one page served on 127.0.0.1, updated
over a WebSocket.

:class:`LiveView` is an async context manager that serves ``/`` (the page),
``/live.js`` (its script, shipped with the package: no CDN, labs run offline)
and ``/ws`` (the stream) with ``websockets``. The trial calls
:meth:`LiveView.publish` (never blocks, never raises), which turns each
message into a compact record on an append-only list; every client's
connection handler sends what is new on that list every ``interval`` s, as
JSON arrays, starting from the beginning (a page opened mid-trial draws the
whole trial so far). A slow client only falls behind on its own connection
(nothing is sent to it while its send buffer holds more than BUFFER_LIMIT);
one that goes away ends its handler and nothing else.

Records (JSON objects with ``k``, the kind): ``start`` (gait, steering,
waypoints, target heading), ``exp`` / ``model`` (t, x, y of link 6, m),
``steer`` (t, heading, target, offset rad, mode, cross-track m), ``status``
(periods, late, missed, nodes ok, phase), ``fault``, ``end`` (reason,
fault), ``comparison`` (the metrics) and ``closed`` (the server is about to
stop).
"""

from __future__ import annotations

import asyncio
import json
import logging
from functools import singledispatchmethod
from http import HTTPStatus
from importlib import resources
from typing import Any

from aiko.model.errors import AikoError

from .messages import (
    Comparison,
    FaultMessage,
    Link6,
    Message,
    ModelLink6,
    StatusUpdate,
    SteeringUpdate,
    TrialEnd,
    TrialStart,
    finite,
)

__all__ = ["LiveView", "LiveViewError"]

log = logging.getLogger(__name__)

BATCH = 500
"""At most this many records per WebSocket message (a page opened late gets
the trial so far in several)."""

BUFFER_LIMIT = 2 ** 20
"""A page's connection is sent nothing while this much (bytes) waits in its
send buffer, and its write limit is four times that: a send never waits for
a page that does not read, so closing the server never waits on one either."""

_TYPES = {"index.html": "text/html; charset=utf-8",
          "live.js": "text/javascript; charset=utf-8"}


class LiveViewError(AikoError):
    def __init__(self, where: str, reason: str) -> None:
        self.where, self.reason = where, reason
        super().__init__(f"live view on {where}: {reason}")


def _r(v, digits=4):
    return None if v is None else round(float(v), digits)


class LiveView:
    """Serves the live page on ``host:port`` (port 0: any free port; see
    :attr:`port` once entered). ``linger``: at exit, how long to wait for
    connected pages to receive the last records."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8765, *, title: str = "",
                 interval: float = 0.05, linger: float = 1.0, pegs=(), steps=()) -> None:
        self.host = host
        self.port = port
        self.title = title
        # the scene's obstacles, drawn in the path's panel: (x, y, radius) and
        # (x0, level above) m
        self.pegs = [[_r(v) for v in p] for p in pegs]
        self.steps = [[_r(v) for v in s] for s in steps]
        self.interval = interval
        self.linger = linger
        self.records: list[str] = []
        self.connections = 0
        self.disconnects = 0
        self._server: Any = None
        self._cursors: dict[int, int] = {}
        self._changed = asyncio.Event()
        self._closing = False

    # ----------------------------------------------------------- publishing
    def publish(self, message: Message) -> None:
        """Take one of the trial's messages (:mod:`.messages`); never blocks,
        never raises."""
        try:
            rec = self._record(message)
        except (KeyError, TypeError, ValueError) as exc:  # a malformed message: drop it
            log.debug("live view: %s dropped: %s", type(message).__name__, exc)
            return
        if rec is not None:
            self._add(rec)

    def _add(self, rec: dict) -> None:
        self.records.append(json.dumps(rec, separators=(",", ":"), allow_nan=False))
        self._changed.set()

    @singledispatchmethod
    def _record(self, message: Message) -> dict | None:
        """Messages the page does not draw (EMCYs, every tracked link)."""
        return None

    @_record.register
    def _(self, m: Link6) -> dict | None:
        if m.x is None:
            return None
        return {"k": "exp", "t": _r(m.t), "x": _r(m.x), "y": _r(m.y)}

    @_record.register
    def _(self, m: ModelLink6) -> dict:
        return {"k": "model", "t": _r(m.t), "x": _r(m.x), "y": _r(m.y)}

    @_record.register
    def _(self, m: SteeringUpdate) -> dict:
        return {"k": "steer", "t": _r(m.t), "mode": m.mode, "heading": _r(finite(m.heading)),
                "target": _r(finite(m.target)), "offset": _r(m.offset),
                "e": _r(finite(m.cross_track))}

    @_record.register
    def _(self, m: StatusUpdate) -> dict:
        return {"k": "status", "t": m.t, "phase": m.phase, "periods": m.periods, "late": m.late,
                "missed": m.missed, "nodes_ok": m.nodes_ok, "nodes": m.nodes,
                "model_lag": m.model_lag}

    @_record.register
    def _(self, m: FaultMessage) -> dict:
        return {"k": "fault", "t": _r(m.t), "kind": m.kind, "node": m.node, "reason": m.reason}

    @_record.register
    def _(self, m: TrialStart) -> dict:
        return {"k": "start", "title": self.title, "gait": m.gait, "steering": m.steering,
                "target": finite(m.heading_target),
                "waypoints": None if m.waypoints is None else [list(w) for w in m.waypoints],
                "pegs": self.pegs, "steps": self.steps}

    @_record.register
    def _(self, m: TrialEnd) -> dict:
        return {"k": "end", "t": _r(m.t), "reason": m.reason,
                "fault": None if m.fault is None else m.fault.get("reason")}

    @_record.register
    def _(self, m: Comparison) -> dict:
        return {"k": "comparison", **{key: finite(v) for key, v in m.metrics.items()
                                      if isinstance(v, (int, float, str)) or v is None}}

    @property
    def clients(self) -> int:
        """Pages connected now."""
        return len(self._cursors)

    def backlog(self) -> list[int]:
        """Per connected page, how many records it has yet to be sent."""
        return [len(self.records) - c for c in self._cursors.values()]

    # -------------------------------------------------------------- serving
    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def __aenter__(self) -> LiveView:
        from websockets.asyncio.server import serve

        try:
            self._server = await serve(self._handler, self.host, self.port,
                                       process_request=self._http, max_size=2 ** 16,
                                       ping_interval=5, ping_timeout=10, close_timeout=1.0,
                                       write_limit=4 * BUFFER_LIMIT)
        except OSError as exc:
            raise LiveViewError(f"{self.host}:{self.port}",
                                f"cannot listen ({exc.strerror})") from exc
        sock = next(iter(self._server.sockets))
        self.port = sock.getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self._add({"k": "closed"})
        self._closing = True
        loop = asyncio.get_running_loop()
        t_end = loop.time() + self.linger
        while self._cursors and loop.time() < t_end and any(
                c < len(self.records) for c in self._cursors.values()):
            await asyncio.sleep(self.interval)
        self._server.close()
        await self._server.wait_closed()

    def _http(self, connection, request):
        from websockets.datastructures import Headers
        from websockets.http11 import Response

        path = request.path.split("?", 1)[0]
        if path == "/ws":
            return None
        name = {"/": "index.html", "/index.html": "index.html", "/live.js": "live.js"}.get(path)
        if name is None:
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        body = (resources.files("aiko.drivers") / "live_page" / name).read_bytes()
        headers = Headers([("Content-Type", _TYPES[name]), ("Cache-Control", "no-store"),
                           ("Content-Length", str(len(body)))])
        return Response(200, "OK", headers, body)

    async def _handler(self, ws) -> None:
        from websockets.exceptions import ConnectionClosed

        key = id(ws)
        self._cursors[key] = 0
        self.connections += 1
        try:
            while True:
                cursor = self._cursors[key]
                if ws.transport.get_write_buffer_size() > BUFFER_LIMIT:
                    await asyncio.sleep(self.interval)   # a page that does not keep up
                    continue
                if cursor < len(self.records):
                    end = min(len(self.records), cursor + BATCH)
                    await ws.send("[" + ",".join(self.records[cursor:end]) + "]")
                    self._cursors[key] = end
                    if self._closing and end == len(self.records):
                        break
                    # a send that did not wait did not give the loop back: a
                    # page catching up on a long history must not hold the
                    # trial's stream for the whole of it
                    await asyncio.sleep(0)
                    continue
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), 1.0)
                except TimeoutError:
                    pass
                await asyncio.sleep(self.interval)
        except ConnectionClosed:
            self.disconnects += 1
        finally:
            del self._cursors[key]
