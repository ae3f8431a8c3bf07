"""Frames for the simulated motion-capture servers' tests (DataStream and QTM
RT alike): frame k's subjects and a publisher at a fixed rate."""

import asyncio
import time

from aiko.drivers.datastream import Pose, rotation_xyz


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
