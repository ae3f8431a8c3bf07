"""The site speaks only of what its reader has: no page points outside the
repository (the team's notes, the papers' files, the design document, issue
numbers), and a figure or table "above" or "below" is there on the page."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]

OUTSIDE = re.compile(r"\.\./shared|seeds/\d{3}|\bDESIGN\b|\b[Ii]ssue \d+\b|\bitem \d+\b")
POINTER = re.compile(r"\b(figure|table|plot|image)s? (above|below)\b", re.IGNORECASE)
FIGURE = re.compile(r"!\[|^\|\s*-+|^\|---|--8<-- \"docs/\.ref/", re.MULTILINE)


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_page_points_outside_the_repository(page):
    found = [(n, m.group(0)) for n, line in enumerate(page.read_text().splitlines(), 1)
             for m in OUTSIDE.finditer(line)]
    assert not found, f"{_name(page)}: {found}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_a_figure_or_table_above_or_below_is_there(page):
    text = page.read_text()
    for m in POINTER.finditer(text):
        kind, where = m.group(1).lower(), m.group(2).lower()
        side = text[:m.start()] if where == "above" else text[m.end():]
        wanted = r"!\[" if kind in ("figure", "plot", "image") else r"^\|\s*-|^\|---|--8<--"
        assert re.search(wanted, side, re.MULTILINE), \
            f"{_name(page)}: '{m.group(0)}' but no {kind} {where} it"
