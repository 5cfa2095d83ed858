"""README.md and docs/: every relative link and image points at a file that exists, and every #anchor at a
heading of that file (GitHub's rule for heading ids), so moving a section cannot silently break a link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]*)\)")


def heading_ids(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    ids = set()
    for title in re.findall(r"^#+ +(.+?) *$", text, flags=re.MULTILINE):
        ids.add(re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-"))
    return ids


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    assert page.exists()
    broken = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked}")
        elif anchor and linked.suffix == ".md" and anchor not in heading_ids(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert not broken, broken


def test_the_readme_links_every_page_of_docs():
    readme = (ROOT / "README.md").read_text()
    assert all(f"](docs/{page.name})" in readme for page in PAGES[1:]), "a page of docs/ the README does not link"
