"""The README and the documentation site agree with the command line: every
`aiko` subcommand has a row in the README's commands table and a page in the
site's navigation that includes its --help text (golden files in docs/.cli,
written by docs/cli_help.py); the reference tables of the trial log's
channels and the MQTT topics are the code's schemas (docs/.ref, written by
docs/reference_tables.py); the README stays the door (under 12 KB)."""

import importlib.util
import re
from pathlib import Path

import pytest

from aiko.experiments.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("cli_help", ROOT / "docs" / "cli_help.py")
assert _spec is not None and _spec.loader is not None
_cli_help = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cli_help)
help_texts = _cli_help.help_texts
_tables_spec = importlib.util.spec_from_file_location("reference_tables",
                                                      ROOT / "docs" / "reference_tables.py")
assert _tables_spec is not None and _tables_spec.loader is not None
_tables = importlib.util.module_from_spec(_tables_spec)
_tables_spec.loader.exec_module(_tables)


def _subcommands():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices


def _page(name):
    """The docs page that documents ``aiko NAME`` (from mkdocs.yml's nav)."""
    nav = (ROOT / "mkdocs.yml").read_text()
    for line in nav.splitlines():
        m = re.match(r"\s+- (aiko .+): (commands/\S+\.md)$", line)
        if m and re.search(rf"\baiko {name}\b", m.group(1)):
            return ROOT / "docs" / m.group(2)
    return None


def test_readme_is_small_and_lists_every_command():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 12 * 1024
    table = re.findall(r"^\| `aiko (\w+)` \|", readme, re.M)
    assert sorted(table) == sorted(_subcommands())


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_command_page_shows_the_help_the_command_prints(name):
    page = _page(name)
    assert page is not None and page.exists(), f"aiko {name}: no page in mkdocs.yml's nav"
    assert f'--8<-- "docs/.cli/{name}.txt"' in page.read_text()
    shown = (ROOT / "docs" / ".cli" / f"{name}.txt").read_text()
    assert shown == help_texts()[name], \
        f"docs/.cli/{name}.txt is not aiko {name} --help: run python docs/cli_help.py"


@pytest.mark.parametrize("name", sorted(_tables.tables()))
def test_the_reference_tables_are_the_codes_schemas(name):
    shown = (ROOT / "docs" / ".ref" / name).read_text()
    assert shown == _tables.tables()[name], \
        f"docs/.ref/{name} differs from the code: run python docs/reference_tables.py"
    assert any(f'--8<-- "docs/.ref/{name}"' in page.read_text()
               for page in (ROOT / "docs").rglob("*.md")), f"no page includes {name}"
