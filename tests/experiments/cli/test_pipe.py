"""`aiko` piped into a reader that stops early (`aiko run GAIT --check | head`)
ends quietly with 141, as a command ended by SIGPIPE, not with a traceback."""

import subprocess

from tests.conftest import AIKO_COMMAND


def test_a_reader_that_stops_early_ends_the_command_quietly():
    proc = subprocess.Popen([*AIKO_COMMAND, "run", "sidewinding", "--check"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            bufsize=1)
    first = proc.stdout.readline()
    proc.stdout.close()                      # `head -1` has what it wanted
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141, err
    assert first.startswith("preflight of sidewinding") and err == ""
