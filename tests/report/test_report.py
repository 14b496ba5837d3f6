"""The report: written from the store, self-contained HTML, every claim listed, figures embedded."""

from __future__ import annotations

import base64
import re

from attnlab.engine import run_claims
from attnlab.report import build_report
from clitools import parse_json, run_cli


def test_report_lists_every_stored_claim_and_embeds_every_figure(tmp_path, testclaims):
    from attnlab.claims import get_claim

    claims = [*testclaims.CLAIMS, get_claim("ensemble.nw-identity")]
    run_claims(claims, out=tmp_path, backend="serial", threads=1)
    rep = build_report(tmp_path)
    html = rep.html.read_text()
    md = rep.markdown.read_text()
    for c in claims:
        assert f"<code>{c.id}</code>" in html and f"`{c.id}`" in md
    # every figure the claims drew is embedded as a decodable PNG, with no external reference
    imgs = re.findall(r"<img [^>]*src='([^']+)'", html)
    assert len(imgs) == len(rep.figures) == 2  # test.value and ensemble.nw-identity have one each
    for src in imgs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r"(src|href)=['\"](?!data:|#)", html), "the HTML must not reference external files"
    for f in rep.figures:
        assert f.png.exists() and f.svg.exists() and f.svg.read_text().lstrip().startswith("<?xml")
        assert f"({f.png.relative_to(tmp_path).as_posix()})" in md
    # grouped by kind, verdicts shown
    assert html.index("Identities") < html.index("Theorems")
    assert "fails" in html and "holds" in html
    assert "boom at x=3" in html  # the failed point's error is shown


def test_reproduce_twice_computes_nothing_the_second_time(tmp_path):
    args = ("reproduce", "--only", "test.", "--out", str(tmp_path), "--backend", "serial", "--json")
    first = parse_json(run_cli(*args).stdout)
    assert first["summary"]["computed"] == 14 and (tmp_path / "report.html").exists()
    second = run_cli(*args)
    assert second.returncode == 0
    d = parse_json(second.stdout)
    assert d["summary"]["computed"] == 0 and d["summary"]["cached"] == 14
    assert {c["id"]: c["verdict"] for c in d["claims"]} == {"test.value": "holds", "test.flaky": "fails"}
    human = run_cli("reproduce", "--only", "test.", "--out", str(tmp_path), "--backend", "serial")
    assert "test.value" in human.stdout and "holds" in human.stdout and "report.html" in human.stdout
