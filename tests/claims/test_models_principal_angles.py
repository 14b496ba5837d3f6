"""models.principal-angles: the angle computation against numpy, the rule, and the bundled model."""

import numpy as np
import pytest
import torch

from attnlab.claims.models import CLAIMS
from attnlab.claims.models.principal_angles import CLAIM, _angles, _planted
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import CONTROL_KEY, Predict, Row
from attnlab.report.figures.models import FIGURES


def test_angles_against_numpy_svd():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(3, 10, 2, generator=g, dtype=torch.float64)
    got = np.sort(_angles(W))
    ref = []
    for a in range(3):
        for b in range(a + 1, 3):
            qa, _ = np.linalg.qr(W[a].numpy())
            qb, _ = np.linalg.qr(W[b].numpy())
            ref += np.degrees(np.arccos(np.clip(np.linalg.svd(qa.T @ qb, compute_uv=False), -1, 1))).tolist()
    np.testing.assert_allclose(got, np.sort(ref), atol=1e-6)  # arccos near 1 loses ~1e-8 rad


def _row(lo, hi, control=""):
    m = {"model": "m", "pairing": "key-key", "head_pairs": 396, "band_fraction": 0.5 + (lo + hi) / 2,
         "band_fraction_null": 0.5, "delta_ci": [lo, hi], "median": 76.0, "median_null": 76.0,
         "m_ratio": 0.31, "m_ratio_null": 0.31, "quantiles": [1.0] * 5, "quantiles_null": [1.0] * 5,
         "median_by_layer": [76.0]}  # fmt: skip
    params = {"band_lo": 70.0, "band_hi": 85.0, **({CONTROL_KEY: control} if control else {})}
    return Row("r" + control, params, "ok", m)


def test_rule_branch_and_controls():
    assert CLAIM in CLAIMS and CLAIM.kind == "finding"
    v = CLAIM.decide([_row(0.02, 0.08)])
    assert v.status == "holds" and v.branch == "band excess CI"
    assert CLAIM.decide([_row(-0.08, -0.02)]).status == "fails"
    assert CLAIM.decide([_row(-0.02, 0.03)]).status == "inconclusive"
    # a null 10% higher (0.55) moves the interval (0.02, 0.08) to (−0.03, 0.03)
    assert CLAIM.decide([_row(0.02, 0.08)], Predict({"null_band_fraction": 1.1})).status == "inconclusive"
    assert CLAIM.decide([Row("x", {}, "failed", {}, error="e")]).status == "inconclusive"
    rows = [_row(-0.1, -0.05), _row(-0.55, -0.45, "planted-orthogonal"), _row(0.45, 0.55, "planted-78")]
    pw = resolving_power(CLAIM, rows)
    assert all(c["as_designed"] and c["same_branch"] for c in pw.controls.values()) and not pw.cannot_fail


def test_planted_heads_angles():
    g = torch.Generator().manual_seed(1)
    for kind, deg in (("planted-orthogonal", 90.0), ("planted-78", 78.0)):
        W = _planted(kind, 4, 40, 3, g)
        # independent: numpy's SVD of the orthonormal bases' cross products
        qa, _ = np.linalg.qr(W[0].numpy())
        qb, _ = np.linalg.qr(W[1].numpy())
        cos = np.linalg.svd(qa.T @ qb, compute_uv=False)
        np.testing.assert_allclose(np.degrees(np.arccos(np.clip(cos, -1, 1))), deg, atol=1e-6)


def test_bundled_model():
    p = CLAIM.points("quick", overrides={"null_pairs": 50, "boot": 200})[0]
    r = CLAIM.run(p)
    m = r.metrics
    assert m["d_model"] == 384 and m["d_head"] == 32 and m["head_pairs"] == 6 * 66
    assert r.arrays["angles_k"].size == 6 * 66 * 32  # layers × head pairs × angles per pair
    assert 0.0 <= m["median"] <= 90.0 and m["median_null"] == pytest.approx(76.1, abs=2.0)
    assert m["delta_ci"][0] <= m["band_fraction"] - m["band_fraction_null"] <= m["delta_ci"][1]
    assert FIGURES[CLAIM.id]([Row("r", p.params, "ok", m, arrays=r.arrays)])


def test_m_ratio_against_dense_numpy():
    from attnlab.claims.models.principal_angles import _m_ratio

    g = torch.Generator().manual_seed(0)
    K, Q = (torch.randn(4, 40, 3, generator=g, dtype=torch.float64) for _ in range(2))
    M = (Q @ K.transpose(1, 2)).numpy()  # independent: dense d × d products and their spectral norms
    ref = [
        np.linalg.norm(M[i] @ M[j], 2) / (np.linalg.norm(M[i], 2) * np.linalg.norm(M[j], 2))
        for i in range(4)
        for j in range(4)
        if i != j
    ]
    np.testing.assert_allclose(_m_ratio(K, Q), ref, rtol=1e-10)  # the k × k reduction is exact algebra


def test_trained_models_cell():
    """The knob ``model`` maps MiniLM and transformers trained here (120 steps already learn: 2.67 nats
    at root seed 0 against the unigram 3.32); one learned model's head pairs are 2 layers × C(4, 2) = 12,
    each with 8 angles, against the null of 8-dimensional subspaces of R^32."""
    assert CLAIM.knobs["model"].values_for("quick") == ["minilm", "trained-text"]
    p = CLAIM.points("quick", overrides={"model": "trained-text", "trained_seeds": 1, "train_steps": 120,
                                         "null_pairs": 50, "boot": 200})[0]  # fmt: skip
    m = CLAIM.run(p).metrics
    assert m["learned"] == 1 and m["val_losses"][0] < 0.9 * m["baseline"]
    assert m["d_model"] == 32 and m["d_head"] == 8 and m["head_pairs"] == 12
    v = CLAIM.decide([Row("r", p.params, "ok", m)])
    assert v.branch == "band excess CI" and v.numbers["learned"] == 1


def test_untrained_models_are_outside_the_regime():
    """Two optimiser steps do not learn: no model's heads count, and the verdict says so."""
    p = CLAIM.points("quick", overrides={"model": "trained-text", "trained_seeds": 1, "train_steps": 2})[0]
    m = CLAIM.run(p).metrics
    assert m["learned"] == 0 and m["band_fraction"] is None
    v = CLAIM.decide([Row("r", p.params, "ok", m)])
    assert v.status == "inconclusive" and "learned" in v.regime
