"""The ``aiko`` packages, found rather than listed: every folder with an
``__init__.py`` under the five top-level folders, mapped into the ``aiko``
namespace (``experiments/trial/doctor`` is ``aiko.experiments.trial.doctor``).
Everything else about the project is in pyproject.toml."""

from pathlib import Path

from setuptools import setup

TOP_LEVEL = ("model", "control", "drivers", "firmware_interface", "experiments")


def aiko_packages(root: Path = Path(__file__).parent) -> list[str]:
    found = []
    for top in TOP_LEVEL:
        for init in sorted((root / top).rglob("__init__.py")):
            found.append(".".join(("aiko", *init.parent.relative_to(root).parts)))
    return found


setup(packages=aiko_packages())
