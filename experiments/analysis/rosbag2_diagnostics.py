"""A trial's ``/diagnostics`` (``diagnostic_msgs/msg/DiagnosticArray``) for
its rosbag2: what ``rqt_robot_monitor`` and PlotJuggler show of a robot's
health.

* at each supervisor event that concerns health (fault, EMCY, nodes missing,
  safe stop, safe state): one status, ERROR for a fault and an EMCY other
  than an error reset, else OK or WARN;
* once a second of the trial: each node's state as the supervisor knew it
  from its newest HEARTBEAT and STATE (``aiko/joint<n>``: OK operational with
  no status bit but bit 0; WARN saturated, clamped, holding, or not
  operational; STALE before its first heartbeat).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from aiko.experiments.files.ros_types import typestore
from aiko.experiments.files.triallog import TrialData
from aiko.firmware_interface.codec import FrameError, Heartbeat, decode
from aiko.firmware_interface.protocol import EmcyCode, NodeState, Status

__all__ = ["diagnostics", "node_level"]

OK, WARN, ERROR, STALE = 0, 1, 2, 3
HEALTH_EVENTS = ("fault", "emcy", "nodes_missing", "safe_stop", "safe_state")
INTERVAL = 1.0   # s between the nodes' states


def _status(level: int, name: str, message: str, hardware_id: str = "", values=None):
    types = typestore().types
    kv = types["diagnostic_msgs/msg/KeyValue"]
    return types["diagnostic_msgs/msg/DiagnosticStatus"](
        level=level, name=name, message=message, hardware_id=hardware_id,
        values=[kv(key=str(k), value=v if isinstance(v, str) else json.dumps(v))
                for k, v in (values or {}).items()])


def _array(header, statuses):
    return typestore().types["diagnostic_msgs/msg/DiagnosticArray"](header=header,
                                                                    status=statuses)


def _emcy_text(code: int) -> str:
    try:
        return f"EMCY 0x{code:04X} {EmcyCode(code).name.lower().replace('_', ' ')}"
    except ValueError:
        return f"EMCY 0x{code:04X}"


def _event_status(kind: str, d: dict):
    if kind == "fault":
        return _status(ERROR, "aiko/trial", f"fault: {d.get('reason', d.get('fault', '?'))}",
                       values=d)
    if kind == "emcy":
        code = int(d.get("error_code", 0))
        node = d.get("node", "?")
        return _status(OK if code == EmcyCode.ERROR_RESET else ERROR, f"aiko/joint{node}",
                       _emcy_text(code), f"CAN node {node}", d)
    if kind == "nodes_missing":
        return _status(ERROR, "aiko/trial", f"nodes missing: {d.get('missing')}", values=d)
    if kind == "safe_stop":
        return _status(OK if d.get("reason") == "completed" else WARN, "aiko/trial",
                       f"safe stop ({d.get('reason')})", values=d)
    return _status(OK if not d.get("missing") else WARN, "aiko/trial",
                   f"safe state: {len(d.get('confirmed', []))} confirmed, "
                   f"{len(d.get('missing', []))} missing", values=d)


def node_level(state: int | None, status: int | None) -> tuple[int, str]:
    """(level, message) of a node from its newest HEARTBEAT state and STATE
    status byte (None: none seen yet)."""
    if state is None:
        return STALE, "no heartbeat yet"
    try:
        name = NodeState(state).name.lower().replace("_", "-")
    except ValueError:
        return WARN, f"unknown state 0x{state:02X}"
    if state != NodeState.OPERATIONAL:
        return WARN, name
    flags = Status(status or 0) & ~Status.OPERATIONAL
    if flags:
        return WARN, f"{name}, " + ", ".join(str(f.name).lower().replace("_", " ")
                                             for f in Status if f in flags)
    return OK, name


def _node_events(data: TrialData) -> list[tuple[float, int, str, int]]:
    """(t, node, "state" or "status", value) from the log, in time order."""
    out = []
    for t, ident, payload in data.frames("/can/rx"):
        try:
            frame = decode(ident, payload)
        except FrameError:
            continue
        if isinstance(frame, Heartbeat):
            out.append((t, frame.node, "state", frame.state))
    for t, d in data.records.get("/joint_state", []):
        out.append((t, d["node"], "status", int(d["status"])))
    out.sort(key=lambda e: e[0])
    return out


def _nodes(data: TrialData, s) -> Iterator[tuple[int, str, object]]:
    if data.span is None:
        return
    config = data.metadata.get("config")
    try:
        nodes = json.loads(config).get("nodes") if isinstance(config, str) else None
    except ValueError:
        nodes = None
    seen = _node_events(data)
    if not isinstance(nodes, int):
        nodes = max((e[1] for e in seen), default=0)
    state: dict[int, int] = {}
    status: dict[int, int] = {}
    i = 0
    t = data.span[0]
    while t <= data.span[1] + 1e-9 and nodes > 0:
        while i < len(seen) and seen[i][0] <= t:
            _, node, what, value = seen[i]
            (state if what == "state" else status)[node] = value
            i += 1
        statuses = []
        for node in range(1, nodes + 1):
            level, message = node_level(state.get(node), status.get(node))
            statuses.append(_status(level, f"aiko/joint{node}", message, f"CAN node {node}",
                                    {"state": state.get(node), "status": status.get(node)}))
        yield s.ns(t), "/diagnostics", _array(s.header(t), statuses)
        t += INTERVAL


def diagnostics(data: TrialData, s) -> Iterator[tuple[int, str, object]]:
    """The trial's /diagnostics messages ((stamp ns, topic, message));
    ``s`` turns trial times into stamps and headers."""
    for t, e in data.records.get("/events", []):
        kind = e.get("kind")
        if kind in HEALTH_EVENTS and isinstance(e.get("data"), dict):
            yield s.ns(t), "/diagnostics", _array(s.header(t), [_event_status(kind, e["data"])])
    yield from _nodes(data, s)
