"""The motion-capture systems a trial reads from a server, by kind: a
registry (as python-can's interfaces), so that ``--mocap KIND:HOST[:PORT]``,
the rig file's ``[mocap]``, a campaign plan and ``aiko doctor`` name them one
way and open them in one place. (Vicon Tracker's UDP stream, which a trial
receives rather than reads from a server, is :class:`~aiko.drivers.mocap.ViconUdpSource`.)
"""

from __future__ import annotations

from dataclasses import dataclass

from .mocap import MocapSource

__all__ = ["ServedKind", "SERVED_KINDS", "open_served_source"]


@dataclass(frozen=True)
class ServedKind:
    """A system served over TCP: what it is, its default port, the client;
    and the simulated Aiko's server of it: its name (the key of the
    simulated rig's servers and of its ready report), what `aiko emulate`
    calls it and the option that starts it."""

    what: str
    port: int
    client: str
    server: str
    server_what: str
    flag: str


SERVED_KINDS = {
    "vicon-datastream": ServedKind("Vicon DataStream (Tracker, Nexus, Shogun)", 801,
                                   "the DataStream SDK's own client (motioncapture)",
                                   "datastream", "Vicon DataStream server", "--datastream-port"),
    "qualisys": ServedKind("Qualisys Track Manager's real-time server (QTM RT)", 22223,
                           "Qualisys' Python SDK (qtm-rt)",
                           "qtm", "Qualisys QTM RT server", "--qtm-port"),
}


def open_served_source(kind: str, address: str, subject: str, clock) -> MocapSource:
    """A source of ``kind`` for the server at ``address`` (HOST[:PORT]),
    tracking ``subject``; enter it to connect."""
    if kind == "vicon-datastream":
        from .vendor_mocap import VendorMocapSource
        return VendorMocapSource(kind, address, subject, clock)
    if kind == "qualisys":
        from .qualisys_source import QualisysSource
        return QualisysSource(address, subject, clock)
    raise ValueError(f"unknown motion capture {kind!r}: expected one of "
                     f"{', '.join(SERVED_KINDS)}")
