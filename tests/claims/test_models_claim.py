"""The claim models.minilm-diversity: its verdict rule on synthetic rows, and one real run."""

from __future__ import annotations

import math

import pytest

from attnlab.claims.base import Row
from attnlab.claims.models import CLAIMS, MINILM_DIVERSITY, decide


def _row(hdi, z, null=0.9, ok=True) -> Row:
    L = len(hdi)
    metrics = {"model": "m", "hdi_k": hdi, "hdi_k_z": z, "hdi_null": [null] * L}
    return Row("p", {}, "ok" if ok else "failed", metrics if ok else {})


def test_registered() -> None:
    assert MINILM_DIVERSITY in CLAIMS and MINILM_DIVERSITY.kind == "finding"
    assert len(MINILM_DIVERSITY.points("quick")) == 1


def test_rule() -> None:
    assert decide([0.8] * 4, [0.9] * 4, [-10, -10, -10, 0])[0] == "fails"
    assert decide([0.95] * 4, [0.9] * 4, [2, 2, -1, -5])[0] == "holds"
    # z ≥ −3 in most layers but HDI below the null in most: inconclusive
    assert decide([0.89, 0.89, 0.89, 0.91], [0.9] * 4, [-1, -1, -1, 1])[0] == "inconclusive"
    # exactly half below −3: neither "most" fails nor "most" holds
    assert decide([0.8, 0.8, 0.95, 0.95], [0.9] * 4, [-9, -9, 2, 2])[0] == "inconclusive"
    status, numbers = decide([], [], [])
    assert status == "inconclusive" and numbers["layers"] == 0
    assert decide([0.8, math.nan], [0.9, 0.9], [-9, math.nan])[1]["layers"] == 1


def test_verdict_copes_with_failed_rows() -> None:
    v = MINILM_DIVERSITY.verdict([_row([], [], ok=False)])
    assert v.status == "inconclusive" and "failed" in v.note
    v = MINILM_DIVERSITY.verdict([_row([0.8, 0.8], [-9, -9]), _row([], [], ok=False)])
    assert v.status == "fails" and v.numbers["failed_rows"] == 1 and "failed" in v.note


@pytest.mark.slow
def test_quick_point_runs_and_draws() -> None:
    """One real point on the bundled model (weights only, to keep the suite fast) and its figures."""

    p = MINILM_DIVERSITY.points("quick", overrides={"text": False})[0]
    res = MINILM_DIVERSITY.run(p)
    assert len(res.metrics["hdi_k"]) == 6 and res.metrics["token_level"] is False
    row = Row("p", p.params, "ok", res.metrics, arrays=res.arrays)
    v = MINILM_DIVERSITY.verdict([row])
    assert v.status in ("holds", "fails", "inconclusive") and v.numbers["layers"] == 6
    figs = MINILM_DIVERSITY.figures([row])
    assert {"overlap_k", "angles_k", "qk_spectra", "hdi_layers"} <= set(figs)
    for fig in figs.values():
        for ax in fig.axes:
            if ax.get_label() == "<colorbar>":
                assert ax.get_ylabel()  # the colour scale is labelled with its quantity and unit
            elif ax.get_visible() and ax.has_data():
                assert ax.get_xlabel() and ax.get_ylabel()
