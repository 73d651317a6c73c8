"""The user's documentation holds together: every relative link and image in README.md and
docs/*.md resolves (files and #anchors), no product file points outside the repository or carries
the history of its making, and the architectures page's family table is the zoo's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PRODUCT = ("backend", "ui", "pages", "benchmarks", "docs")
PRODUCT_FILES = ("app.py", "README.md", "Makefile", "pyproject.toml")
SUFFIXES = {".py", ".md", ".html", ".js", ".css", ".toml", ".sh", ".txt"}

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)
HISTORY = re.compile(r"\bissues? #?\d+|\b(?:this|last|previous) round\b", re.I)


def _product_files() -> list[Path]:
    files = [ROOT / name for name in PRODUCT_FILES]
    for folder in PRODUCT:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    return [p for p in files if "__pycache__" not in p.parts]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8")))}


def links(page: Path) -> list[str]:
    """The link and image targets of ``page``, outside code blocks."""
    return LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8")))


def broken(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of ``page`` whose file or #anchor does not exist, or lies outside
    ``root``."""
    found = []
    for target in links(page):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            found.append(f"{target} (no such file)")
        elif not file.is_relative_to(root):
            found.append(f"{target} (outside the repository)")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            found.append(f"{target} (no heading #{anchor})")
    return found


def test_slugs_follow_github():
    assert slug("A 1.5B decoder on the CPU") == "a-15b-decoder-on-the-cpu"
    assert slug("## Will this checkpoint quantize?".lstrip("# ")) == "will-this-checkpoint-quantize"
    assert slug("`isoscope serve` and Ray") == "isoscope-serve-and-ray"


def test_the_link_check_finds_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n[ok](#top) [gone](missing.md) ![img](x.png) [bad](#nowhere)\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inner.md").write_text("[up](../page.md#top)\n")
    assert broken(tmp_path / "sub" / "inner.md", root=tmp_path / "sub") == [
        "../page.md#top (outside the repository)"
    ]
    assert broken(page, root=tmp_path) == [
        "missing.md (no such file)",
        "x.png (no such file)",
        "#nowhere (no heading #nowhere)",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_and_image_resolves(page):
    assert broken(page) == []


def test_the_readme_links_every_docs_page():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    pages = {p.resolve() for p in PAGES[1:]}
    assert pages <= linked, sorted(p.name for p in pages - linked)


def test_no_product_file_points_outside_the_repository():
    offenders = [
        p.relative_to(ROOT).as_posix()
        for p in _product_files()
        if "../shared" in p.read_text(encoding="utf-8", errors="replace")
    ]
    assert offenders == []


def test_no_product_file_carries_issue_numbers_or_rounds():
    hits = []
    for path in _product_files():
        for number, line in enumerate(
            path.read_text(encoding="utf-8", errors="replace").splitlines()
        ):
            if HISTORY.search(line):
                hits.append(
                    f"{path.relative_to(ROOT).as_posix()}:{number + 1}: {line.strip()[:80]}"
                )
    assert hits == []


def test_the_history_check_catches_what_it_should():
    assert HISTORY.search("the fix (issue 35)") and HISTORY.search("see issue #32")
    assert HISTORY.search("measured this round") and HISTORY.search("Last round's figures")
    assert not HISTORY.search("5 rounds per run") and not HISTORY.search("float64 rounding")


@pytest.mark.parametrize("name", ["first", "recent"])
def test_the_architectures_tables_list_the_zoos(name):
    """docs/architectures.md's tables (benchmarks/zoo_table.py --write) have one row per family of
    each zoo, one column per analysis it tries, no cell that is a bug, and the layer pattern of
    every family of the second zoo."""
    from benchmarks.zoo_table import ZOOS, markers
    from tests.zoo_checks import ANALYSES

    module = ZOOS[name][0]
    start, end = markers(name)
    text = (ROOT / "docs" / "architectures.md").read_text(encoding="utf-8")
    table = text.split(start)[1].split(end)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.strip().splitlines()]
    header, body = rows[0], rows[2:]
    views = [*ANALYSES, *(["quant sites"] if "quant sites" not in ANALYSES else [])]
    assert header == ["family", "layer pattern", "causal", "positions", *views, "CLI massive"]
    assert sorted(r[0] for r in body) == sorted(module.FAMILIES)
    assert all(len(r) == len(header) for r in body)
    assert not [c for r in body for c in r if c.startswith("bug:")]
    if name == "recent":
        assert all(r[1] and not r[1].startswith("(") for r in body), "a family without a pattern"
