"""Bad datagrams and frames by the thousand: mutated Vicon Tracker datagrams
and random CAN frames give the decoders' own errors (which the receivers count
and skip), never another exception; seeded and bounded."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.drivers.mocap import (
    _HEAD,
    ObjectStreamError,
    _items,
    decode_object_stream,
    encode_object_stream,
)
from aiko.firmware_interface.codec import FrameError, decode
from aiko.firmware_interface.protocol import frame_kind

FUZZ = settings(max_examples=1000, derandomize=True, deadline=None)
VALID = encode_object_stream(7, {"link6": (100.0, 200.0, 60.0, 0.0, 0.0, 0.1),
                                 "peg1": (500.0, 100.0, 0.0, 0.0, 0.0, 0.0)})


@st.composite
def mutated(draw, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        if op == "flip" and i < len(data):
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del data[i:]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=80))
        else:
            del data[i:i + draw(st.integers(1, 80))]
    return bytes(data)


@FUZZ
@given(st.one_of(mutated(VALID), st.binary(max_size=300)))
def test_vicon_datagrams(data):
    try:
        frame, objects = decode_object_stream(data)
    except ObjectStreamError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert all(len(v) == 6 and all(math.isfinite(x) for x in v) for v in objects.values())


def item_by_item(data: bytes):
    """The reference reading: the header, then each item on its own."""
    if len(data) < _HEAD.size:
        raise ObjectStreamError("short")
    frame, count = _HEAD.unpack_from(data, 0)
    return frame, _items(data, count)


@FUZZ
@given(st.one_of(mutated(VALID), st.binary(max_size=300)))
def test_a_datagram_read_whole_is_what_reading_it_item_by_item_gives(data):
    try:
        want = item_by_item(data)
    except ObjectStreamError:
        want = None
    try:
        got = decode_object_stream(data)
    except ObjectStreamError:
        got = None
    assert got == want


NAMES = st.text(st.characters(min_codepoint=1, max_codepoint=127), min_size=1, max_size=23)
VALUES = st.tuples(*[st.floats(allow_nan=False, allow_infinity=False)] * 6)


@FUZZ
@given(st.integers(0, 2**32 - 1), st.dictionaries(NAMES, VALUES, max_size=30))
def test_objects_come_back_as_they_were_sent(frame, objects):
    assert decode_object_stream(encode_object_stream(frame, objects)) == (frame, objects)


@FUZZ
@given(st.integers(0, 0x7FF), st.binary(max_size=8))
def test_can_frames(ident, data):
    try:
        frame = decode(ident, data)
    except FrameError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    kind = frame_kind(ident)              # what decodes is the frame its identifier names
    assert kind is not None and type(frame).__name__.upper().startswith(
        {"STATE": "JOINTSTATE"}.get(kind[0].upper(), kind[0].upper()))
