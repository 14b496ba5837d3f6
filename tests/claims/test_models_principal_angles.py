"""models.principal-angles: the angle computation against numpy, the rule, and the bundled model."""

import numpy as np
import pytest
import torch

from attnlab.claims.models import CLAIMS
from attnlab.claims.models.principal_angles import CLAIM, _angles
from attnlab.engine.protocol import Row
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


def _row(median, frac):
    m = {"model": "m", "median_k": median, "median_q": median, "median_null": 76.0, "band_fraction_k": frac,
         "band_fraction_q": frac, "band_fraction_null": 0.5, "median_k_by_layer": [median],
         "quantiles_k": [1.0] * 5, "quantiles_null": [1.0] * 5}  # fmt: skip
    return Row("r", {"band_lo": 70.0, "band_hi": 85.0}, "ok", m)


def test_rule():
    assert CLAIM in CLAIMS and CLAIM.kind == "finding"
    assert CLAIM.decide([_row(75.0, 0.6)]).status == "holds"
    assert CLAIM.decide([_row(75.0, 0.4)]).status == "fails"
    assert CLAIM.decide([_row(60.0, 0.6)]).status == "fails"
    assert CLAIM.decide([Row("x", {}, "failed", {}, error="e")]).status == "inconclusive"


def test_bundled_model():
    p = CLAIM.points("quick", overrides={"null_pairs": 50})[0]
    r = CLAIM.run(p)
    m = r.metrics
    assert m["d_model"] == 384 and m["d_head"] == 32
    assert r.arrays["angles_k"].size == 6 * 66 * 32  # layers × head pairs × angles per pair
    assert 0.0 <= m["median_k"] <= 90.0 and m["median_null"] == pytest.approx(76.1, abs=2.0)
    assert FIGURES[CLAIM.id]([Row("r", p.params, "ok", m, arrays=r.arrays)])
