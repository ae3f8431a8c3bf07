"""The trial live in Foxglove: the Foxglove WebSocket protocol through
``foxglove-sdk``.

:class:`FoxgloveView` serves, on ``host:port``, the same messages as the live
page: ``/aiko/links`` (a 3D scene: the model's links as spheres joined by a
line, red; the links motion capture sees, blue, the same way where it carries
several, link 6 larger; both link-6 trails; the scene's pegs as olive cylinders
and its steps as slabs, entity ``obstacles``),
``/aiko/link6`` and ``/aiko/model/link6`` (x, y, z m), ``/aiko/steering``,
``/aiko/status`` and ``/aiko/events`` (JSON). Timestamps are wall-clock
nanoseconds (Foxglove's live panels expect them); the trial clock's t is in
every JSON message. ``publish`` never blocks and never raises: the SDK queues
per client and drops for slow ones.
"""

from __future__ import annotations

import json
import logging
import time
from functools import singledispatchmethod
from typing import Any

from aiko.model.errors import AikoError

from .messages import (
    EmcyMessage,
    FaultMessage,
    Link6,
    Message,
    MocapLinks,
    ModelLink6,
    StatusUpdate,
    SteeringUpdate,
    TrialEnd,
    TrialStart,
)

__all__ = ["FoxgloveView", "FoxgloveViewError"]

log = logging.getLogger(__name__)

_EVENTS = {"title": "aiko.Event", "type": "object", "properties": {"kind": {"type": "string"}},
           "required": ["kind"]}
_CHANNELS = {"/aiko/link6": Link6.SCHEMA, "/aiko/model/link6": ModelLink6.SCHEMA,
             "/aiko/steering": SteeringUpdate.SCHEMA, "/aiko/status": StatusUpdate.SCHEMA,
             "/aiko/events": _EVENTS}
"""The JSON channels and their schemas (the messages', :mod:`.messages`;
/aiko/events takes trial_start, trial_end, fault and emcy, each with its kind)."""
TRAIL = 600
"""Points kept in each link-6 trail of the scene (30 s at 20 Hz)."""
PEG_HEIGHT = 0.3
"""Height the pegs are drawn with, m (the model's pegs have none)."""
STEP_LENGTH = 4.0
"""Extent the last step's top face and every step's width are drawn with, m."""
SCENE_PERIOD_NS = 100_000_000
"""The scene is sent at most at 10 Hz (building it costs the trial's process
about a millisecond)."""


class FoxgloveViewError(AikoError):
    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"foxglove server on {where}: {reason}")


class FoxgloveView:
    """``pegs`` ((x, y, radius) m each) and ``steps`` ((x0, level above) m
    each, sorted by x0): the obstacles drawn in the scene."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8766, name: str = "aiko",
                 pegs=(), steps=()) -> None:
        self.host, self.port, self.name = host, port, name
        self.pegs = tuple(tuple(float(v) for v in p) for p in pegs)
        self.steps = tuple(tuple(float(v) for v in s) for s in steps)
        self.published = 0
        self.errors = 0
        self._server: Any = None
        self._trail_exp: list = []
        self._trail_model: list = []
        self._model_links: tuple[tuple[float, float, float], ...] | None = None
        self._exp: tuple | None = None
        self._exp_links: list[tuple] | None = None
        self._scene_sent = 0

    async def __aenter__(self) -> FoxgloveView:
        import foxglove
        from foxglove.channels import SceneUpdateChannel

        self._ctx = foxglove.Context()
        try:
            self._server = foxglove.start_server(name=self.name, host=self.host, port=self.port,
                                                 context=self._ctx)
        except Exception as exc:  # the SDK raises its own errors for a port in use
            raise FoxgloveViewError(f"{self.host}:{self.port}", str(exc)) from exc
        self.port = self._server.port
        self._scene = SceneUpdateChannel("/aiko/links", context=self._ctx)
        self._json = {topic: foxglove.Channel(topic, schema=schema, context=self._ctx)
                      for topic, schema in _CHANNELS.items()}
        return self

    async def __aexit__(self, *exc) -> None:
        if self._server is not None:
            self._server.stop()

    def publish(self, message: Message) -> None:
        """Take one of the trial's messages (:mod:`.messages`); never blocks,
        never raises."""
        try:
            if self._publish(message, time.time_ns()):
                self.published += 1
        except Exception as exc:  # never into the trial
            self.errors += 1
            log.debug("foxglove: %s dropped: %s", type(message).__name__, exc)

    def _log(self, channel: str, payload: dict, now: int) -> bool:
        self._json[channel].log(json.loads(json.dumps(payload)), log_time=now)
        return True

    @singledispatchmethod
    def _publish(self, message: Message, now: int) -> bool:
        """Messages Foxglove is not sent (the comparison)."""
        return False

    @_publish.register
    def _(self, m: ModelLink6, now: int) -> bool:
        self._log("/aiko/model/link6", {"t": m.t, "x": m.x, "y": m.y, "z": m.z, "lag": m.lag},
                  now)
        if m.positions is not None:
            self._model_links = m.positions
        self._trail_model.append((m.x, m.y, m.z))
        del self._trail_model[:-TRAIL]
        self._scene_update(now)
        return True

    @_publish.register
    def _(self, m: MocapLinks, now: int) -> bool:
        self._exp_links = list(m.positions)
        self._scene_update(now)
        return True

    @_publish.register
    def _(self, m: Link6, now: int) -> bool:
        if m.x is None or m.y is None or m.z is None:
            return False
        self._exp = (m.x, m.y, m.z)
        self._trail_exp.append(self._exp)
        del self._trail_exp[:-TRAIL]
        self._log("/aiko/link6", m.payload(), now)
        self._scene_update(now)
        return True

    @_publish.register
    def _(self, m: SteeringUpdate, now: int) -> bool:
        return self._log("/aiko/steering", m.payload(), now)

    @_publish.register
    def _(self, m: StatusUpdate, now: int) -> bool:
        return self._log("/aiko/status", m.payload(), now)

    @_publish.register(TrialStart)
    @_publish.register(TrialEnd)
    def _(self, m: TrialStart | TrialEnd, now: int) -> bool:
        return self._log("/aiko/events", m.payload(), now)

    @_publish.register(FaultMessage)
    @_publish.register(EmcyMessage)
    def _(self, m: FaultMessage | EmcyMessage, now: int) -> bool:
        return self._log("/aiko/events", {"kind": m.topic, **m.payload()}, now)

    def _scene_update(self, now: int) -> None:
        if now - self._scene_sent < SCENE_PERIOD_NS:
            return
        self._scene_sent = now
        from foxglove.messages import (
            Color,
            CubePrimitive,
            CylinderPrimitive,
            LinePrimitive,
            LinePrimitiveLineType,
            Point3,
            Pose,
            Quaternion,
            SceneEntity,
            SceneUpdate,
            SpherePrimitive,
            Timestamp,
            Vector3,
        )

        ts = Timestamp.from_epoch_secs(now * 1e-9)
        red, blue = Color(r=0.78, g=0.06, b=0.18, a=1.0), Color(r=0.12, g=0.31, b=0.61, a=1.0)
        ident = Quaternion(x=0, y=0, z=0, w=1)

        def sphere(p, color, size=0.06):
            return SpherePrimitive(pose=Pose(position=Vector3(x=p[0], y=p[1], z=p[2]),
                                             orientation=ident),
                                   size=Vector3(x=size, y=size, z=size), color=color)

        def strip(points, color, thickness):
            return LinePrimitive(type=LinePrimitiveLineType.LineStrip, thickness=thickness,
                                 scale_invariant=True, color=color,
                                 points=[Point3(x=p[0], y=p[1], z=p[2]) for p in points])

        entities = []
        if self._model_links is not None:
            entities.append(SceneEntity(
                timestamp=ts, frame_id="world", id="model",
                spheres=[sphere(p, red) for p in self._model_links],
                lines=[strip(self._model_links, red, 3.0), strip(self._trail_model, red, 1.0)]))
        if self._exp is not None:
            links = self._exp_links or []
            entities.append(SceneEntity(
                timestamp=ts, frame_id="world", id="experiment",
                spheres=[sphere(self._exp, blue, 0.08)] + [sphere(p, blue) for p in links],
                lines=[strip(self._trail_exp, blue, 1.5)]
                + ([strip(links, blue, 3.0)] if links else [])))
        if self.pegs or self.steps:
            olive = Color(r=0.42, g=0.56, b=0.14, a=0.85)
            brown = Color(r=0.69, g=0.54, b=0.41, a=0.5)
            cylinders = [CylinderPrimitive(
                pose=Pose(position=Vector3(x=x, y=y, z=PEG_HEIGHT / 2), orientation=ident),
                size=Vector3(x=2 * r, y=2 * r, z=PEG_HEIGHT), bottom_scale=1.0, top_scale=1.0,
                color=olive) for x, y, r in self.pegs]
            cubes = []
            for k, (x0, level) in enumerate(self.steps):
                x1 = self.steps[k + 1][0] if k + 1 < len(self.steps) else x0 + STEP_LENGTH
                cubes.append(CubePrimitive(
                    pose=Pose(position=Vector3(x=(x0 + x1) / 2, y=0.0, z=level / 2),
                              orientation=ident),
                    size=Vector3(x=x1 - x0, y=STEP_LENGTH, z=level), color=brown))
            entities.append(SceneEntity(timestamp=ts, frame_id="world", id="obstacles",
                                        cylinders=cylinders, cubes=cubes))
        self._scene.log(SceneUpdate(entities=entities), log_time=now)
