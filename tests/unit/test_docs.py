"""README.md and docs/: every relative link and image points at a file that exists, and every #anchor at a
heading of that file (GitHub's rule for heading ids), so moving a section cannot silently break a link."""

from __future__ import annotations

import re
import shlex
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


#: An inline `gpu-scheduler <command> --flag ...` span, possibly wrapped over lines.
COMMAND = re.compile(r"`gpu-scheduler ([a-z]+)\b([^`]*)`", flags=re.DOTALL)


def cli_commands() -> list[tuple[str, str]]:
    """Every inline ``gpu-scheduler`` command with flags in README.md and docs/. A bare name is a mention, and
    a synopsis with alternatives (``--seed N | --seeds 0-4``) is no one command."""
    found = []
    for page in PAGES:
        for command, rest in COMMAND.findall(page.read_text()):
            if "--" in rest and "|" not in rest:
                found.append((page.name, f"{command}{rest}"))
    return found


@pytest.mark.parametrize(("page", "command"), cli_commands(), ids=lambda v: " ".join(v.split())[:60])
def test_every_documented_cli_command_parses(page, command):
    """A benchmark command in the docs can take an hour, so no test runs each; parsing each as written with
    the real parser catches what goes stale: a renamed flag, a scenario or policy that no longer exists.
    Usage forms are read as written too: brackets and ``...`` dropped, a capitalised placeholder (FILE.csv,
    PATH, S) standing for a value."""
    from airflow_gpu_scheduler.cli import build_parser

    tokens = shlex.split(command.replace("[", " ").replace("]", " ").replace("...", " "))
    argv = [t if t.startswith("-") or not t[0].isupper() else "1" for t in tokens]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{page}: `gpu-scheduler {' '.join(tokens)}` does not parse (exit {exc.code})")
