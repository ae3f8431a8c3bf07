"""The joint protocol's DBC and typed codec: round trips for every frame and
node id (hypothesis), errors, the DBC file, and the generated C code."""

import shutil
import subprocess
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiko.firmware_interface.codec import (
    Emcy,
    FrameValueError,
    Heartbeat,
    JointState,
    MalformedFrameError,
    Nmt,
    Ref,
    Sync,
    UnknownFrameError,
    decode,
    encode,
)
from aiko.firmware_interface.dbc import DBC_PATH, build_database
from aiko.firmware_interface.protocol import MAX_NODE_ID, Status, frame_kind

nodes = st.integers(1, MAX_NODE_ID)
angle = st.floats(-3.2768, 3.2767)
rate = st.floats(-32.768, 32.767)
u8 = st.integers(0, 255)
Q_ANGLE = 0.5e-4 + 1e-12
Q_RATE = 0.5e-3 + 1e-12


@given(st.sampled_from([0x01, 0x02, 0x80, 0x81, 0x82]), st.integers(0, MAX_NODE_ID))
def test_nmt_roundtrip(cmd, node):
    ident, data = encode(Nmt(cmd, node))
    assert ident == 0 and len(data) == 2 and data == bytes([cmd, node])
    assert decode(ident, data) == Nmt(cmd, node)


@given(u8)
def test_sync_roundtrip(counter):
    ident, data = encode(Sync(counter))
    assert (ident, data) == (0x080, bytes([counter]))
    assert decode(ident, data) == Sync(counter)


@given(nodes, angle, angle, rate, rate)
def test_ref_roundtrip_within_quantisation(node, ah, av, wh, wv):
    ident, data = encode(Ref(node, ah, av, wh, wv))
    assert ident == 0x200 + node and len(data) == 8
    r = decode(ident, data)
    assert r.node == node
    assert abs(r.alpha_h - ah) <= Q_ANGLE and abs(r.alpha_v - av) <= Q_ANGLE
    assert abs(r.omega_h - wh) <= Q_RATE and abs(r.omega_v - wv) <= Q_RATE
    assert decode(*encode(r)) == r  # decoded values are fixed points


@given(nodes, angle, angle, st.integers(-100, 100), st.integers(-100, 100),
       st.integers(0, 0x3F), u8)
def test_state_roundtrip(node, ah, av, dh, dv, status, echo):
    f = JointState(node, ah, av, dh, dv, Status(status), echo)
    ident, data = encode(f)
    assert ident == 0x180 + node
    assert data[7] == echo and data[6] == status  # layout of the spec
    g = decode(ident, data)
    assert abs(g.alpha_h - ah) <= Q_ANGLE and abs(g.alpha_v - av) <= Q_ANGLE
    assert (g.duty_h, g.duty_v, g.status, g.sync_echo) == (dh, dv, Status(status), echo)


@given(nodes, st.integers(0, 0xFFFF), u8, u8)
def test_emcy_roundtrip(node, code, reg, motor):
    ident, data = encode(Emcy(node, code, reg, motor))
    assert ident == 0x080 + node and data == code.to_bytes(2, "little") + bytes([reg, motor])
    assert decode(ident, data) == Emcy(node, code, reg, motor)


@given(nodes, st.sampled_from([0x00, 0x04, 0x05, 0x7F]))
def test_heartbeat_roundtrip(node, state):
    ident, data = encode(Heartbeat(node, state))
    assert (ident, data) == (0x700 + node, bytes([state]))
    assert decode(ident, data) == Heartbeat(node, state)


def test_little_endian_twos_complement_scaling():
    _, data = encode(Ref(1, -0.0001, 0.0002, -0.001, 1.0))
    assert data == bytes.fromhex("ffff0200ffffe803")


@pytest.mark.parametrize("frame,field", [
    (Ref(1, 3.3, 0.0, 0.0, 0.0), "alpha_h"),
    (Ref(1, 0.0, 0.0, 40.0, 0.0), "omega_h"),
    (Ref(1, float("nan"), 0.0, 0.0, 0.0), "alpha_h"),
    (JointState(2, 0.0, 0.0, 101, 0, Status(0), 0), "duty_h"),
    (Sync(256), "counter"),
    (Ref(0, 0.0, 0.0, 0.0, 0.0), "node"),
    (Ref(64, 0.0, 0.0, 0.0, 0.0), "node"),
    (Nmt(1, 64), "node_id"),
])
def test_out_of_range_values_are_named(frame, field):
    with pytest.raises(FrameValueError) as err:
        encode(frame)
    assert err.value.field == field


def test_wrong_dlc_and_unknown_ids():
    with pytest.raises(MalformedFrameError, match="expected 8"):
        decode(0x203, b"\x00" * 7)
    with pytest.raises(MalformedFrameError):
        decode(0x080, b"")
    for ident in (0x001, 0x040, 0x0C0, 0x300, 0x6FF, 0x740, 0x7FF):
        assert frame_kind(ident) is None
        with pytest.raises(UnknownFrameError):
            decode(ident, b"\x00")


def test_dbc_file_is_the_generated_one():
    """aiko_joint.dbc is what build_database() writes (regenerate with
    `python -m aiko.firmware_interface.dbc`)."""
    assert DBC_PATH.read_bytes() == build_database().as_dbc_string().encode("ascii")


C_MAIN = textwrap.dedent("""
    #include <stdio.h>
    #include "aiko_joint.h"
    int main(void) {
        struct aiko_joint_state_03_t s = {0};
        uint8_t buf[8];
        s.alpha_h = aiko_joint_state_03_alpha_h_encode(-0.6543);
        s.alpha_v = aiko_joint_state_03_alpha_v_encode(0.25);
        s.duty_h = -42; s.duty_v = 100; s.operational = 1; s.v_clamped = 1; s.sync_echo = 200;
        int n = aiko_joint_state_03_pack(buf, &s, sizeof buf);
        for (int i = 0; i < n; i++) printf("%02x", buf[i]);
        printf("\\n");
        struct aiko_joint_ref_07_t r;
        uint8_t in[8] = {0x10, 0x27, 0xf0, 0xd8, 0xe8, 0x03, 0x18, 0xfc};
        aiko_joint_ref_07_unpack(&r, in, sizeof in);
        printf("%.4f %.4f %.3f %.3f\\n", aiko_joint_ref_07_alpha_h_ref_decode(r.alpha_h_ref),
               aiko_joint_ref_07_alpha_v_ref_decode(r.alpha_v_ref),
               aiko_joint_ref_07_omega_h_ref_decode(r.omega_h_ref),
               aiko_joint_ref_07_omega_v_ref_decode(r.omega_v_ref));
        return 0;
    }
""")


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler installed")
def test_generated_c_code_packs_like_python(tmp_path):
    from aiko.experiments.cli import main

    assert main(["dbc", "--c-source", str(tmp_path)]) == 0
    (tmp_path / "main.c").write_text(C_MAIN)
    exe = tmp_path / "roundtrip"
    subprocess.run(["cc", "-std=c99", "-O0", "-o", str(exe), str(tmp_path / "main.c"),
                    str(tmp_path / "aiko_joint.c"), "-lm"], check=True, cwd=tmp_path, timeout=300)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    f = decode(0x183, bytes.fromhex(out[0]))
    assert f == JointState(3, -0.6543, 0.25, -42, 100, Status.OPERATIONAL | Status.V_CLAMPED, 200)
    # and a frame packed by Python decodes in C to the same values
    r = decode(0x207, bytes([0x10, 0x27, 0xF0, 0xD8, 0xE8, 0x03, 0x18, 0xFC]))
    assert out[1] == f"{r.alpha_h:.4f} {r.alpha_v:.4f} {r.omega_h:.3f} {r.omega_v:.3f}"
    assert encode(Ref(7, 1.0, -1.0, 1.0, -1.0))[1] == bytes([0x10, 0x27, 0xF0, 0xD8, 0xE8, 0x03,
                                                               0x18, 0xFC])


def test_the_codecs_caches_keep_its_checks_and_its_errors():
    """encode and decode keep what they made (a fit replays the same frames
    dozens of times), yet a value the codec refuses is refused after an
    equal one was made (True == 1, but a bool is no node), a bytearray gives
    the frame its bytes give, and a bad frame raises every time."""
    ident, data = encode(Ref(1, 0.1, -0.2, 0.3, 0.0))
    assert encode(Ref(1, 0.1, -0.2, 0.3, 0.0)) == (ident, data)
    with pytest.raises(FrameValueError):
        encode(Ref(True, 0.1, -0.2, 0.3, 0.0))
    with pytest.raises(FrameValueError):
        encode(Sync(True))
    assert decode(ident, bytearray(data)) == decode(ident, data)
    assert decode(ident, data).alpha_h == pytest.approx(0.1)
    for _ in range(2):
        with pytest.raises(MalformedFrameError):
            decode(ident, data[:7])
        with pytest.raises(UnknownFrameError):
            decode(0x7FF, b"\x00")
