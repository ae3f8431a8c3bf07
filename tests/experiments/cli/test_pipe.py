"""`aiko` piped into a reader that stops early (`aiko run GAIT --check | head`)
ends quietly with 141, as a command ended by SIGPIPE, not with a traceback."""

import os
import subprocess

from tests.conftest import AIKO_COMMAND


def test_a_reader_that_stops_early_ends_the_command_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)                  # the reader is gone before the first line
    try:
        run = subprocess.run([*AIKO_COMMAND, "run", "sidewinding", "--check"], stdout=write_end,
                             stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert run.returncode == 141 and run.stderr == "", run.stderr
