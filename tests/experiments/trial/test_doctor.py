"""aiko doctor's checks in-process: emulated joint modules on the loop bus
(python-can's interface ``aiko-loop``) in virtual time (the firmware emulator
is the test double), motion capture from a UDP sender on loopback, the
broker, the disk and the report. The command against
`aiko emulate` over slcan is tested in tests/experiments/cli/test_doctor_command.py."""

import asyncio
import uuid
from pathlib import Path

import can
import pytest

from aiko.drivers.clock import TrialClock
from aiko.drivers.mocap import ViconUdpSender
from aiko.drivers.telemetry import MqttConfig
from aiko.drivers.virtual_time import LoopClock, run_virtual
from aiko.experiments.trial.doctor import DoctorConfig, Status, check_rig
from aiko.experiments.trial.doctor.bus import SYNC_ROUNDS, check_bus
from aiko.experiments.trial.doctor.host import LOG_BYTES_PER_S, check_disk
from aiko.firmware_interface.codec import Nmt, Sync, encode
from aiko.firmware_interface.emulator import FaultConfig, JointModule
from aiko.firmware_interface.protocol import NmtCommand, NodeState
from aiko.firmware_interface.service import EmulatedJoints
from tests.conftest import free_port


def _rows(checks):
    return {c.part: c for c in checks}


async def _with_modules(modules, body, *, before=None):
    """Run ``body(channel)`` with ``modules`` served on a fresh loop bus, in
    virtual time (run it with ``run_virtual``); ``before(bus)`` runs once they
    are up (e.g. to put one in another state)."""
    channel = f"doctor-{uuid.uuid4()}"
    node_bus = can.Bus(interface="aiko-loop", channel=channel)
    joints = EmulatedJoints(node_bus, modules, clock=LoopClock().now)
    try:
        async with asyncio.TaskGroup() as tg:
            served = tg.create_task(joints.run(), name="emulator")
            await asyncio.sleep(0.05)
            if before is not None:
                await before(channel)
            try:
                return await body(channel)
            finally:
                served.cancel()
    finally:
        node_bus.shutdown()


async def _send(channel, *frames):
    bus = can.Bus(interface="aiko-loop", channel=channel)
    try:
        for f in frames:
            ident, data = encode(f)
            bus.send(can.Message(arbitration_id=ident, data=data, is_extended_id=False))
        await asyncio.sleep(0.25)  # the next heartbeat says the new state
    finally:
        bus.shutdown()


def _bus_cfg(channel, nodes=3):
    return DoctorConfig(can_interface="aiko-loop", can_channel=channel, nodes=nodes,
                        kernels=False)


def test_modules_answer_sync_and_are_put_back_where_they_were_nothing_moves():
    modules = [JointModule(i) for i in (1, 2, 3)]
    for m, (ah, av) in zip(modules, ((0.1, -0.05), (-0.2, 0.0), (0.3, 0.1)), strict=True):
        m.set_angles(ah, av)

    async def body(channel):
        return await check_bus(_bus_cfg(channel), LoopClock())

    rows = _rows(run_virtual(_with_modules(
        modules, body, before=lambda ch: _send(ch, Nmt(NmtCommand.STOP, 2)))))
    assert rows["CAN adapter"].status == Status.OK
    for n in (1, 2, 3):
        assert rows[f"joint {n}"].status == Status.OK, rows[f"joint {n}"]
        assert f"STATE to {SYNC_ROUNDS} SYNCs" in rows[f"joint {n}"].seen
    assert "back to pre-operational" in rows["joint 1"].seen
    assert "stopped" in rows["joint 2"].seen and "back to stopped" in rows["joint 2"].seen
    # each started on its own and put back with the command of the state it was in
    assert modules[0].nmt_obeyed == [NmtCommand.START, NmtCommand.ENTER_PRE_OPERATIONAL]
    assert modules[1].nmt_obeyed == [NmtCommand.STOP, NmtCommand.START, NmtCommand.STOP]
    assert [m.state for m in modules] == [NodeState.PRE_OPERATIONAL, NodeState.STOPPED,
                                          NodeState.PRE_OPERATIONAL]
    # no reference was sent: every motor still at the angle it held
    assert modules[0].motor_angles == pytest.approx((0.1, -0.05), abs=1e-4)
    assert modules[2].motor_angles == pytest.approx((0.3, 0.1), abs=1e-4)


def test_cancelled_check_still_puts_every_started_module_back():
    modules = [JointModule(i) for i in (1, 2, 3)]

    async def body(channel):
        task = asyncio.create_task(check_bus(_bus_cfg(channel), LoopClock()))
        while not all(NmtCommand.START in m.nmt_obeyed for m in modules):
            await asyncio.sleep(0.002)
        task.cancel()   # in the middle of the SYNC rounds
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.25)

    run_virtual(_with_modules(modules, body))
    assert [m.state for m in modules] == [NodeState.PRE_OPERATIONAL] * 3
    assert all(m.nmt_obeyed[-1] == NmtCommand.ENTER_PRE_OPERATIONAL for m in modules)


def test_an_operational_module_gets_no_sync_and_the_rows_say_why():
    modules = [JointModule(i) for i in (1, 2, 3)]

    async def body(channel):
        return await check_bus(_bus_cfg(channel), LoopClock())

    rows = _rows(run_virtual(_with_modules(
        modules, body, before=lambda ch: _send(ch, Nmt(NmtCommand.START, 3)))))
    assert rows["joint 3"].status == Status.WARN
    assert "operational" in rows["joint 3"].seen and "node 3 operational" in rows["joint 1"].seen
    assert all(m.nmt_obeyed == ([NmtCommand.START] if m.node == 3 else []) for m in modules)
    assert modules[2].state == NodeState.OPERATIONAL


def test_another_controller_on_the_bus_is_left_alone():
    modules = [JointModule(i) for i in (1, 2)]

    async def body(channel):
        other = can.Bus(interface="aiko-loop", channel=channel)

        async def sync_forever():
            k = 0
            while True:
                ident, data = encode(Sync(k % 256))
                other.send(can.Message(arbitration_id=ident, data=data, is_extended_id=False))
                k += 1
                await asyncio.sleep(0.1)

        syncing = asyncio.create_task(sync_forever())
        try:
            return await check_bus(_bus_cfg(channel, nodes=2), LoopClock())
        finally:
            syncing.cancel()
            other.shutdown()

    rows = _rows(run_virtual(_with_modules(modules, body)))
    assert rows["joint 1"].status == Status.WARN
    assert "another controller" in rows["joint 1"].seen
    assert all(not m.nmt_obeyed for m in modules)


def test_silent_module_emcy_and_unlisted_node():
    """Module 2 silent from the start, module 3's encoder failing while the
    doctor listens (a module sends an EMCY once, when the condition starts),
    module 4 on the bus but not in the rig."""
    modules = [JointModule(1), JointModule(2, faults=FaultConfig(silent_from=0.0)),
               JointModule(3, faults=FaultConfig(encoder_fault_at=0.3)), JointModule(4)]

    async def body(channel):
        return await check_bus(_bus_cfg(channel, nodes=3), LoopClock())

    rows = _rows(run_virtual(_with_modules(modules, body)))
    assert rows["joint 1"].status == Status.OK
    assert rows["joint 2"].status == Status.FAIL and "no heartbeat" in rows["joint 2"].seen
    assert "module 2" in rows["joint 2"].hint
    assert rows["joint 3"].status == Status.FAIL and "0x5000 encoder fault" in rows["joint 3"].seen
    assert rows["joint 4"].status == Status.WARN and "does not list" in rows["joint 4"].seen


def test_no_adapter_skips_the_modules():
    cfg = DoctorConfig(can_interface="slcan", can_channel=f"socket://127.0.0.1:{free_port()}",
                       nodes=2, kernels=False)
    rows = _rows(asyncio.run(check_bus(cfg, TrialClock())))
    assert rows["CAN adapter"].status == Status.FAIL
    assert "Connection refused" in rows["CAN adapter"].seen
    assert [rows[f"joint {n}"].status for n in (1, 2)] == [Status.SKIP] * 2


def _stream(port, objects, rate=100.0):
    return ViconUdpSender(("127.0.0.1", port), lambda t: objects, TrialClock(), rate=rate)


@pytest.mark.parametrize("subject, rate, status, words", [
    ("link6", 20.0, Status.OK, "link6 in view in 100 %"),
    ("link7", 20.0, Status.FAIL, "never in view (objects: link5, link6)"),
    ("link6", 400.0, Status.FAIL, "the trial logs 400 Hz"),
])
def test_motion_capture_rate_and_subject(subject, rate, status, words):
    port = free_port()
    cfg = DoctorConfig(can_interface="virtual", can_channel=f"none-{uuid.uuid4()}", nodes=1,
                       mocap_source="vicon-udp", mocap_host="127.0.0.1", mocap_port=port,
                       mocap_subject=subject, mocap_rate=rate, kernels=False,
                       trial_duration=1.0)

    async def main():
        objects = {"link5": (1.0, 2.0, 3.0, 0.0, 0.0, 0.0), "link6": (100.0, 200.0, 30.0, 0.0, 0.0, 0.0)}
        sender = asyncio.create_task(_stream(port, objects).run())
        try:
            return await check_rig(cfg)
        finally:
            sender.cancel()

    row = _rows(asyncio.run(main()).checks)["motion capture"]
    assert row.status == status, row
    assert words in row.seen
    assert "frames/s" in row.seen


def test_nothing_configured_is_off_and_broker_down_fails():
    cfg = DoctorConfig(can_interface="virtual", can_channel=f"none-{uuid.uuid4()}", nodes=1,
                       kernels=False, mqtt=MqttConfig("127.0.0.1", free_port()))
    report = asyncio.run(check_rig(cfg))
    rows = _rows(report.checks)
    assert rows["motion capture"].status == Status.OFF
    assert rows["MQTT broker"].status == Status.FAIL
    assert "refused" in rows["MQTT broker"].seen.lower()
    assert not report.ready and "MQTT broker" in [c.part for c in report.failed]


def test_broker_accepts(broker):
    cfg = DoctorConfig(can_interface="virtual", can_channel=f"none-{uuid.uuid4()}", nodes=1,
                       kernels=False, mqtt=MqttConfig("127.0.0.1", broker))
    row = _rows(asyncio.run(check_rig(cfg)).checks)["MQTT broker"]
    assert row.status == Status.OK and "connection accepted" in row.seen


def test_disk(tmp_path):
    ok = check_disk(tmp_path / "trials" / "day1", 600.0)
    assert ok.status == Status.OK
    assert "to be made in" in ok.seen and f"{600 * LOG_BYTES_PER_S / 1e6:.1f} MB" in ok.seen
    assert not (tmp_path / "trials").exists()          # nothing made
    (tmp_path / "notes.txt").write_text("x")
    bad = check_disk(tmp_path / "notes.txt" / "trials", 600.0)
    assert bad.status == Status.FAIL and "is a file" in bad.seen
    huge = check_disk(tmp_path, 1e12)                  # 64 PB of log
    assert huge.status == Status.FAIL and "free" in huge.seen


def test_disk_a_folder_that_takes_no_file(tmp_path):
    """A folder that exists but takes no file: permissions for a user; as root
    (who writes anywhere else), procfs, where no process may create a file."""
    import os
    if os.geteuid() != 0:
        folder = tmp_path / "locked"
        folder.mkdir()
        folder.chmod(0o555)
    else:
        folder = Path("/proc/self")
    row = check_disk(folder, 60.0)
    assert row.status == Status.FAIL and "not writable" in row.seen
    assert "permissions" in row.hint
