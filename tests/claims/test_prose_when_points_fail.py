"""A verdict's reading never shows an unfilled ``{name}``: when every point failed (the numbers the
reading needs are missing), the note says what happened instead."""

from __future__ import annotations

import re

import pytest

from attnlab.claims import all_claims
from attnlab.engine.protocol import Row, render_or_say_why

PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*(?:[:!][^}]*)?\}")
CLAIMS = all_claims()


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_every_claim_reads_cleanly_when_every_point_failed(claim):
    rows = [
        Row(p.point_id, dict(p.params), "failed", {}, "RuntimeError: boom") for p in claim.points("quick")
    ]
    try:
        v = claim.decide(rows)
    except Exception as e:  # noqa: BLE001 - the engine stores such a verdict as "verdict raised ..."
        pytest.skip(f"the verdict raises {type(e).__name__} on rows that all failed")
    assert v.status == "inconclusive"
    assert v.note or v.regime, "an inconclusive verdict says why"
    assert not PLACEHOLDER.search(v.note), v.note


def test_a_reading_with_missing_numbers_says_why():
    rows = [Row("a", {}, "failed", {}, "boom"), Row("b", {}, "ok", {"x": 1.0})]
    assert render_or_say_why("worst {gap:.2f} over {points}", {"points": 3}, rows, "") == (
        "1 of 2 points failed; the rest cannot give the reading."
    )
    assert (
        render_or_say_why("worst {gap:.2f}", {}, rows[1:], "") == "The rows do not give the reading (no gap)."
    )
    assert render_or_say_why("worst {gap:.2f}", {}, rows, "no point finished") == ""
    assert render_or_say_why("worst {gap:.2f}", {"gap": 0.5}, rows, "") == "worst 0.50"
