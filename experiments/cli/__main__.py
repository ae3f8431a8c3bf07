"""``python -m aiko.experiments.cli``: the ``aiko`` command."""

import sys

from aiko.experiments.cli import console_main

sys.exit(console_main())
