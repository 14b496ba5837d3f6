"""The claim models.minilm-diversity: its verdict rule on synthetic rows, its power, and one real run."""

from __future__ import annotations

import math

import pytest

from attnlab.claims.models import CLAIMS
from attnlab.claims.models.minilm_diversity import CLAIM, decide
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Predict, Row
from attnlab.report.figures.models import FIGURES


def _row(hdi, null=0.9, sd=0.01, ok=True) -> Row:
    L = len(hdi)
    metrics = {"model": "m", "hdi_k": hdi, "hdi_null": [null] * L, "hdi_null_sd": [sd] * L}
    return Row("p", {}, "ok" if ok else "failed", metrics if ok else {})


def test_registered() -> None:
    assert CLAIM in CLAIMS and CLAIM.kind == "finding"
    assert len(CLAIM.points("quick")) == 1


def test_rule() -> None:
    # z = (HDI − null)/sd: −10, −10, −10, 0
    assert decide([0.8, 0.8, 0.8, 0.9], [0.9] * 4, [0.01] * 4)[0] == "fails"
    # z = 5, 5, −1, −5
    assert decide([0.95, 0.95, 0.89, 0.85], [0.9] * 4, [0.01] * 4)[0] == "holds"
    # z ≥ −3 in most layers but HDI below the null in most: inconclusive
    assert decide([0.89, 0.89, 0.89, 0.91], [0.9] * 4, [0.01] * 4)[0] == "inconclusive"
    # exactly half below −3: neither "most" fails nor "most" holds
    assert decide([0.8, 0.8, 0.95, 0.95], [0.9] * 4, [0.01] * 4)[0] == "inconclusive"
    status, numbers = decide([], [], [])
    assert status == "inconclusive" and numbers["layers"] == 0
    assert decide([0.8, math.nan], [0.9, 0.9], [0.01, 0.01])[1]["layers"] == 1


def test_perturbed_null_redecides() -> None:
    """HDI 0.80 against a null 0.90 fails; a null 15% lower (0.765) sits below the HDI: it holds."""
    rows = [_row([0.8] * 4)]
    assert CLAIM.decide(rows).status == "fails"
    assert CLAIM.decide(rows, Predict({"hdi_null": 0.85})).status == "holds"
    p = resolving_power(CLAIM, rows)
    # −10% gives a null 0.81 > 0.80 (still z = −1 per layer but HDI below: inconclusive), a flip
    assert p.flips["hdi_null"]["-"] == 0.10 and p.flips["hdi_null"]["+"] is None
    assert not p.cannot_fail  # a finding is never labelled "cannot fail"


def test_band_and_branch() -> None:
    """The band is the rule's tolerance, 3 null sd, as a fraction of the null (3 × 0.01 / 0.9 = 3.33%);
    holds and fails go through the same branch, so the power's flip is read against that band."""
    fails = CLAIM.decide([_row([0.8] * 4)])
    holds = CLAIM.decide([_row([0.95] * 4)])
    assert fails.status == "fails" and holds.status == "holds"
    assert fails.branch == holds.branch == "layer z"
    assert fails.band == pytest.approx(0.03 / 0.9, rel=1e-12)
    p = resolving_power(CLAIM, [_row([0.8] * 4)])
    assert p.band == pytest.approx(0.03 / 0.9, rel=1e-12)


def test_verdict_copes_with_failed_rows() -> None:
    v = CLAIM.decide([_row([], ok=False)])
    assert v.status == "inconclusive" and "failed" in v.note
    v = CLAIM.decide([_row([0.8, 0.8]), _row([], ok=False)])
    assert v.status == "fails" and v.numbers["failed_rows"] == 1 and "failed" in v.note
    assert "key-subspace HDI per layer [0.8, 0.8]" in v.note  # prose rendered from the numbers


@pytest.mark.slow
def test_quick_point_runs_and_draws() -> None:
    """One real point on the bundled model (weights only, to keep the suite fast) and its figures."""

    p = CLAIM.points("quick", overrides={"text": False})[0]
    res = CLAIM.run(p)
    assert len(res.metrics["hdi_k"]) == 6 and res.metrics["token_level"] is False
    row = Row("p", p.params, "ok", res.metrics, arrays=res.arrays)
    v = CLAIM.decide([row])
    assert v.status in ("holds", "fails", "inconclusive") and v.numbers["layers"] == 6
    # the recomputed z agrees with the diagnostics' own z-score per layer
    assert v.numbers["z_per_layer"] == [round(z, 2) for z in res.metrics["hdi_k_z"]]
    figs = FIGURES[CLAIM.id]([row])
    assert {"overlap_k", "angles_k", "qk_spectra", "hdi_layers"} <= set(figs)
    for fig in figs.values():
        for ax in fig.axes:
            if ax.get_label() == "<colorbar>":
                assert ax.get_ylabel()  # the colour scale is labelled with its quantity and unit
            elif ax.get_visible() and ax.has_data():
                assert ax.get_xlabel() and ax.get_ylabel()
