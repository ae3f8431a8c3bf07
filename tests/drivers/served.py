"""Frames for the simulated motion-capture servers' tests (DataStream and QTM
RT alike): frame k's subjects, a publisher at a fixed rate, and one in
lockstep with a client; and what a source says when no server is there."""

import asyncio
import time

import pytest

from aiko.drivers.datastream import Pose, rotation_xyz
from aiko.drivers.mocap import MocapUnavailableError


def subjects(k: int) -> dict:
    """Frame k's subjects: 'clock' at x = k mm (its frame number, for a
    client to read back), link6 on a line, 'hidden' occluded in 3 frames of 10."""
    return {"clock": Pose((float(k), 0.0, 0.0), rotation_xyz(0, 0, 0)),
            "link6": Pose((2.0 * k, -1.0 * k, 52.5), rotation_xyz(0.0, 0.0, 0.3)),
            "hidden": None if k % 10 < 3 else Pose((5.0, 5.0, 5.0), rotation_xyz(0, 0, 0))}


async def publish(server, rate: float, until) -> int:
    """Frames 1, 2, ... of :func:`subjects` at ``rate`` Hz until ``until()``;
    how many."""
    k = 0
    t0 = time.monotonic()
    while not until():
        k += 1
        server.publish(k, time.monotonic() - t0, subjects(k))
        await asyncio.sleep(max(0.0, t0 + k / rate - time.monotonic()))
    return k


async def lockstep(server, seen, until) -> int:
    """Frames 1, 2, ... of :func:`subjects`, every 10 ms until the client has
    reported one, then each as soon as the client has reported the one
    before (``seen()``: the highest frame number it reported, 0 for none),
    until ``until()``. Returns the number of the first frame published in
    lockstep: from it on nothing is published while the client still owes a
    frame, so a client that keeps up misses none, however loaded the machine
    (before it, a client still joining may)."""
    k = 0
    first = 0
    while not until():
        if seen() == 0:
            await asyncio.sleep(0.01)
        else:
            first = first or k + 1
            while seen() < k and not until():
                await asyncio.sleep(0.001)
        k += 1
        server.publish(k, k / 100.0, subjects(k))
    return first


def unreachable_error(source) -> str:
    """The one-line error of entering ``source`` (a motion-capture source for
    an address nothing listens on)."""
    async def main():
        async with source:
            pass

    with pytest.raises(MocapUnavailableError) as exc:
        asyncio.run(main())
    message = str(exc.value)
    assert "cannot connect" in message and "\n" not in message
    return message
