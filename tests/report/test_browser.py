"""The report in a real browser: every image loads, nothing overflows at 1400 px, every claim has
its section. Chromium is installed by the Makefile's test bootstrap; without it the test is skipped
with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnlab.engine import run_claims
from attnlab.report import build_report
from attnlab.report.browser import find_chromium, layout_checks, screenshot

HERE = Path(__file__).resolve().parents[1] / "engine"

pytestmark = pytest.mark.skipif(
    find_chromium() is None, reason="Chromium is not installed (make test installs it)"
)


@pytest.fixture()
def report(tmp_path, monkeypatch, testclaims):
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("ATTNLAB_EXTRA_CLAIMS", "attnlab_testclaims,attnlab_powerclaims")
    import attnlab_powerclaims as pc

    claims = list(testclaims.CLAIMS) + list(pc.CLAIMS)
    run_claims(claims, out=tmp_path, backend="serial", threads=1)
    run_claims(pc.CLAIMS[:1], out=tmp_path, backend="serial", threads=1, overrides={"test.mean": {"mu": 1.2}})
    return build_report(tmp_path), [c.id for c in claims]


def test_report_renders_cleanly_in_chromium(report):
    rep, ids = report
    checks = layout_checks(rep.html, width=1400)
    assert checks["images"] == len(rep.figures) >= 1
    assert checks["broken"] == []
    assert checks["overflow_count"] == 0, checks["overflow"]
    assert checks["scroll_width"] <= checks["width"]
    assert set(ids) <= set(checks["sections"])


@pytest.mark.parametrize("width", [800, 1400])
def test_the_board_keeps_words_whole_at_both_widths(report, width, tmp_path):
    """Also with a claim id as long as the longest real ones (the board once broke those, and the
    'theorem' and 'inconclusive' beside them, mid-word at 800 px)."""
    from attnlab.report.render import _breakable

    rep, ids = report
    html = rep.html.read_text()
    assert "<code>test.<wbr>value</code>" in html
    long_id = _breakable("ensemble.variance-needs-decorrelation-and-more")
    page = tmp_path / "board.html"
    page.write_text(html.replace("<code>test.<wbr>value</code>", f"<code>{long_id}</code>"))
    checks = layout_checks(page, width=width)
    assert checks["midword"] == [], checks["midword"]
    assert checks["overflow_count"] == 0, checks["overflow"]
    assert checks["scroll_width"] <= checks["width"]


def test_checks_detect_a_word_broken_across_lines(report, tmp_path):
    """The mid-word check can fail: a 40 px column that may break anywhere splits 'inconclusive'."""
    rep, _ = report
    bad = tmp_path / "midword.html"
    planted = (
        "<table data-whole-words style='width:40px;table-layout:fixed'>"
        "<tr><td style='overflow-wrap:anywhere'>inconclusive</td></tr></table></body>"
    )
    bad.write_text(rep.html.read_text().replace("</body>", planted))
    assert "inconclusive" in layout_checks(bad, width=800)["midword"]


def test_checks_detect_a_planted_overflow_and_a_broken_image(report, tmp_path):
    """The browser checks can fail: a 3000 px wide table and an image that cannot load."""
    rep, _ = report
    bad = tmp_path / "bad.html"
    bad.write_text(
        rep.html.read_text().replace(
            "</body>",
            "<table style='width:3000px'><tr><td>x</td></tr></table><img alt='gone' src='nope.png'></body>",
        )
    )
    checks = layout_checks(bad, width=1400)
    assert checks["overflow_count"] > 0 and checks["broken"] == ["gone"]


def test_screenshot_is_a_png(report, tmp_path):
    rep, _ = report
    png = screenshot(rep.html, tmp_path / "shot.png", width=1000, height=800)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
