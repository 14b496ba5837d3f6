"""report.md carries stored text escaped: a Markdown renderer passes raw HTML through, so a stored
``<script>`` or ``onerror`` payload must arrive as text, and a stored run of backticks must not close
the code fence of the deciding numbers."""

from __future__ import annotations

import json
import sqlite3

from attnlab.engine import run_claims
from attnlab.report import build_report

PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "[click](javascript:alert(3))",
    "<svg onload=alert(4)>",
    "</code><iframe src=javascript:alert(5)>",
]


def test_stored_text_is_escaped_in_the_markdown_report(tmp_path, testclaims):
    run_claims(testclaims.CLAIMS[:1], out=tmp_path, backend="serial", threads=1)
    con = sqlite3.connect(tmp_path / "attnlab.sqlite")
    (claim_json,) = con.execute("SELECT claim FROM verdicts").fetchone()
    claim = json.loads(claim_json) | {"statement": PAYLOADS[0] + " | " + PAYLOADS[2]}
    numbers = json.dumps({"sum": 1.0, "label": "```\n" + PAYLOADS[3]})
    con.execute(
        "UPDATE verdicts SET claim = ?, note = ?, regime = ?, tolerance = ?, numbers = ?, "
        "status = 'inconclusive'",
        (json.dumps(claim), PAYLOADS[1], PAYLOADS[3], PAYLOADS[4], numbers),
    )
    con.commit()
    con.close()
    md = build_report(tmp_path).markdown.read_text()
    for tag in ("<script", "<img", "<svg", "<iframe", "</code>"):
        # raw tags only inside the fenced numbers block, where Markdown shows them literally
        outside = md.split("````json")[0] + md.split("````json")[-1].split("````", 1)[-1]
        assert tag not in outside, tag
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "](javascript:" not in md.replace("\\]", "")
    # the numbers block opens with a fence longer than the stored backticks, and closes with it
    assert md.count("````json") == 1 and md.count("\n````\n") >= 1
