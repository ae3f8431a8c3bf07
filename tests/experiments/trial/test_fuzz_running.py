"""Bad input by the thousand at a running trial: while `aiko run` streams on
the simulated rig, one emulated module babbles random CAN frames onto its
bus (any identifier, 0-8 random bytes; `--plant-fault 3:babble=RATE`) and
this test sends mutated and random Vicon datagrams to the trial's motion
capture port. The trial must end as documented (completed, or a fault it
names), with no traceback, its log complete and readable, the bad input
counted (frames that do not decode are logged with their error; datagrams
that do not decode are counted as malformed) and the comparison made.

Seeded (the emulator's seed, a fixed random.Random for the datagrams) and
bounded: one 6 s trial."""

import random
import socket
import subprocess
import threading
import time

from aiko.drivers.mocap import ObjectStreamError, decode_object_stream, encode_object_stream
from aiko.experiments.files.triallog import read_trial
from aiko.firmware_interface.codec import FrameError, decode
from tests.conftest import AIKO_COMMAND, free_port

RATE = 400           # babbled frames a second
DATAGRAMS = 500      # bad datagrams a second
DURATION = 6.0
# an object the trial does not track: a datagram that still decodes after a
# mutation adds nothing to link 6's samples
BASE = encode_object_stream(12, {"intruder": (100.0, 200.0, 60.0, 0.0, 0.0, 0.1)})


def mutated(rng: random.Random) -> bytes:
    """A random datagram (a third) or the base one flipped, cut, spliced."""
    if rng.random() < 1 / 3:
        return rng.randbytes(rng.randrange(0, 300))
    data = bytearray(BASE)
    for _ in range(rng.randrange(1, 5)):
        i = rng.randrange(0, len(data) + 1)
        op = rng.choice(("flip", "cut", "insert", "delete"))
        if op == "flip" and i < len(data):
            data[i] ^= 1 << rng.randrange(8)
        elif op == "cut":
            del data[i:]
        elif op == "insert":
            data[i:i] = rng.randbytes(rng.randrange(1, 80))
        else:
            del data[i:i + rng.randrange(1, 80)]
    return bytes(data)


def _send_datagrams(port: int, stop: threading.Event, sent: list[bytes]) -> None:
    rng = random.Random(31)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        next_t = time.monotonic()
        while not stop.is_set():
            data = mutated(rng)
            s.sendto(data, ("127.0.0.1", port))
            sent.append(data)
            next_t += 1 / DATAGRAMS
            time.sleep(max(0.0, next_t - time.monotonic()))


def test_a_trial_takes_random_frames_and_datagrams_as_documented(tmp_path):
    port = free_port()
    out = tmp_path / "fuzzed.mcap"
    proc = subprocess.Popen(
        [*AIKO_COMMAND, "run", "sidewinding", "--plant", "ideal",
         "--duration", str(DURATION), "--mocap", f"vicon-udp:{port}",
         "--plant-fault", f"3:babble={RATE}", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop, sent = threading.Event(), []
    sender = threading.Thread(target=_send_datagrams, args=(port, stop, sent), daemon=True)
    sender.start()
    try:
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        stop.set()
        sender.join(timeout=5)
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in stdout + stderr, stderr[-3000:]
    # documented endings: completed, or a fault the supervisor names (a random
    # heartbeat can say "boot-up", 1 in about 5e5 frames)
    assert proc.returncode == 0 or (proc.returncode == 1 and "fault:" in stderr), stderr
    data = read_trial(out)
    assert data.complete
    rx = data.records["/can/rx"]
    undecodable = [r for _, r in rx if "error" in r]
    decoded_babble = [r for _, r in rx if "error" not in r and not _a_module_frame(r)]
    assert len(undecodable) > 0.4 * RATE * DURATION, len(undecodable)
    for _, r in rx:   # the error logged is the codec's own verdict, frame by frame
        assert ("error" in r) == (_decoded(r) is None), r
    bad = sum(1 for d in sent if _malformed(d))
    assert len(sent) > 0.5 * DATAGRAMS * DURATION and bad > 0.5 * len(sent)
    mocap = next(line for line in stdout.splitlines() if line.startswith("CAN tx"))
    malformed = int(mocap.split("'malformed': ")[1].split(",")[0].rstrip("}"))
    assert malformed >= 0.5 * bad, mocap
    if proc.returncode == 0:
        assert data.records.get("/comparison"), "no comparison"
        assert "link 6, experiment" in stdout or "comparison" in stdout
    print(f"frames babbled on the bus: ~{RATE * DURATION:.0f}, logged undecodable "
          f"{len(undecodable)}, decoded as protocol frames {len(decoded_babble)}; datagrams "
          f"sent {len(sent)}, malformed {bad}, counted malformed by the trial {malformed}")


def _a_module_frame(r: dict) -> bool:
    """A frame the ten modules send themselves (heartbeat, STATE, EMCY of nodes 1..10)."""
    ident = r["id"]
    return any(base + 1 <= ident <= base + 10 for base in (0x700, 0x180, 0x080))


def _decoded(r: dict):
    try:
        return decode(r["id"], bytes.fromhex(r["data"]))
    except FrameError:
        return None


def _malformed(data: bytes) -> bool:
    try:
        decode_object_stream(data)
    except ObjectStreamError:
        return True
    return False
