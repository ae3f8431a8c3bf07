"""``python -m aiko.experiments.cli``: the ``aiko`` command."""

import sys

from aiko.experiments.cli import main

sys.exit(main())
