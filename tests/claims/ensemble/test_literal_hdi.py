"""``ensemble.literal-hdi``: the literal HDI formula against closed forms, and its counterexample."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.claims.ensemble.literal_hdi import CLAIM as LITERAL_HDI
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row


def _rows(shape: list[int], cs: list[float]) -> list[Row]:
    pts = LITERAL_HDI.points("quick", overrides={"shape": [shape], "c": cs})
    return [Row(p.point_id, dict(p.params), "ok", LITERAL_HDI.run(p).metrics) for p in pts]


def test_literal_hdi_of_identical_frames_is_one_minus_c4_over_dk_and_zero_only_when_normalised():
    rows = _rows([3, 12, 4], [1.0, 4**0.25, 2.0])
    v = LITERAL_HDI.decide(rows)
    assert v.status == "holds" and v.branch == "closed forms" and v.numbers["max_abs_err"] < 1e-11
    by_c = {r.metrics["c"]: r.metrics for r in rows}
    # independent numbers: unit frames 1 − 1/4; c⁴ = d_k is the normalised frame (HDI 0); c = 2: 1 − 16/4
    assert by_c[1.0]["hdi_identical"] == pytest.approx(0.75, abs=1e-12)
    assert by_c[4**0.25]["hdi_identical"] == pytest.approx(0.0, abs=1e-12)
    assert by_c[2.0]["hdi_identical"] == pytest.approx(-3.0, abs=1e-11)
    assert all(r.metrics["hdi_orthogonal"] == pytest.approx(1.0, abs=1e-12) for r in rows)
    assert all(r.metrics["hdi_normalised"] == pytest.approx(0.0, abs=1e-12) for r in rows)
    # a literal overlap of identical Gaussian weights recomputed here by an explicit double sum
    A = np.random.default_rng(0).standard_normal((12, 4))
    G = np.array([[sum(A[i, a] * A[i, b] for i in range(12)) for b in range(4)] for a in range(4)])
    assert float(np.linalg.norm(A.T @ A) ** 2) == pytest.approx(float((G**2).sum()), rel=1e-12)
    # the prediction c⁴/d_k moved by 1% is far outside the tolerance: the verdict flips
    assert resolving_power(LITERAL_HDI, rows).flips["identical_overlap"] == {"+": 0.01, "-": 0.01}


def test_literal_hdi_refuses_a_shape_without_room_for_orthogonal_heads():
    p = LITERAL_HDI.points("quick", overrides={"shape": [[4, 6, 2]], "c": 1.0})[0]
    with pytest.raises(ValueError, match="H·d_k <= d"):
        LITERAL_HDI.run(p)
