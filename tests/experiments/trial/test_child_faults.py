"""A trial's fault is named by a child that has ended, whatever was seen first."""

from types import SimpleNamespace

from aiko.control.supervisor import TrialFault
from aiko.experiments.trial.services import blame_exited_child


def _child(name: str, pid: int, returncode: int | None):
    proc = SimpleNamespace(returncode=returncode)
    return SimpleNamespace(name=name, pid=pid, proc=proc,
                           describe_exit=lambda: "running" if returncode is None
                           else f"killed by SIGKILL ({returncode})")


def test_a_fault_seen_before_a_childs_exit_is_named_by_the_exit():
    lost = TrialFault("heartbeat_lost", 3, "node 3: no heartbeat for 0.31 s")
    alive, dead = _child("parallel model", 11, None), _child("simulated Aiko", 12, -9)
    named = blame_exited_child(lost, [alive, dead])
    assert named.kind == "process_exited" and named.node is None
    assert named.reason == ("the simulated Aiko (pid 12) stopped: killed by SIGKILL (-9); "
                            "seen first: node 3: no heartbeat for 0.31 s")
    assert blame_exited_child(lost, [alive]) is lost          # no child ended: as raised
    assert blame_exited_child(None, [dead]) is None           # no fault: none made up
    exited = TrialFault("process_exited", None, "the simulated Aiko (pid 12) stopped")
    assert blame_exited_child(exited, [dead]) is exited       # already its own cause
