"""Every theory reference in the package, its --help texts and the report points at a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "attnlab"
DOC_REF = re.compile(r"docs/([\w./-]+\.md)")


def _sources() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in SRC.rglob("*.py")}


def test_no_reference_to_files_outside_the_repository():
    # the package and the tests (whose comments cite reference values) alike; this file names the patterns
    tests = {
        p: p.read_text(encoding="utf-8")
        for p in (ROOT / "tests").rglob("*.py")
        if p.resolve() != Path(__file__).resolve()
    }
    stale = [
        f"{p.relative_to(ROOT)}"
        for p, text in {**_sources(), **tests}.items()
        if "THEORY.md" in text or "../shared" in text
    ]
    assert not stale, f"cite docs/ pages instead of files outside the repository: {stale}"


def test_every_cited_docs_page_exists_with_the_cited_section():
    missing = []
    for p, text in _sources().items():
        for m in re.finditer(r"docs/(\w+\.md)(?: ([ABC]\d?))?", text):
            page = ROOT / "docs" / m.group(1)
            if not page.is_file():
                missing.append(f"{p.relative_to(ROOT)}: {m.group(0)}")
            elif (
                m.group(2)
                and len(m.group(2)) > 1
                and f"## {m.group(2)}." not in page.read_text(encoding="utf-8")
            ):
                missing.append(f"{p.relative_to(ROOT)}: {m.group(0)} (no section {m.group(2)})")
    assert not missing, missing


def test_help_texts_cite_existing_pages(cli):
    seen = 0
    for cmd in (["flow", "beta-star"], ["flow", "equiangular"], ["highdim", "se"], ["highdim", "spectrum"]):
        r = cli(*cmd, "--help")
        assert r.code == 0
        for ref in DOC_REF.findall(r.stdout):
            assert (ROOT / "docs" / ref).is_file(), ref
            seen += 1
    assert seen >= 2  # the help texts of se and spectrum cite docs/highdim.md
