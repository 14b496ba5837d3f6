"""highdim.emergence: counts above the predicted edge recounted from stored eigenvalues, the edge as a
prediction, too few emerging modes left inconclusive, the reported drop shares, and a real point."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.claims.highdim.emergence import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim import FIGURES

ALPHAS = (0.03, 0.06, 0.1, 0.15, 0.25, 0.4)


def _rows(counts=(1, 1, 2, 3, 4, 5), sim_counts=None, edge=2.0):
    # k eigenvalues at 1.3 × edge (outliers), the rest a bulk below 0.7 × edge
    rows = []
    sim_counts = sim_counts or counts
    for a, k, ks in zip(ALPHAS, counts, sim_counts):
        ev = np.sort(np.concatenate([np.linspace(0, 0.7 * edge, 40 - ks), np.full(ks, 1.3 * edge)]))
        m = {
            "outliers_theory": k,
            "outliers_sim": ks,
            "edge": edge,
            "test_error_theory": 0.3 / (1 + 3 * a),
            "test_error_sim": 0.31 / (1 + 3 * a),
        }
        rows.append(Row("x", {"alpha": a, "d": 40, "rep": 0}, "ok", m, None, 0.0, {"eigenvalues": ev}))
    return rows


def test_counts_decide():
    v = CLAIM.decide(_rows())
    assert v.status == "holds" and v.numbers["modes_emerging"] == 4 and v.numbers["max_count_gap"] == 0
    assert 0 < v.numbers["log_range_share"] < 1 and 0 < v.numbers["drop_share_theory"] <= 1
    assert "leave the bulk" in v.note
    assert CLAIM.decide(_rows(sim_counts=(1, 1, 2, 3, 6, 5))).status == "fails"
    flat = CLAIM.decide(_rows(counts=(1, 1, 1, 2, 2, 2), sim_counts=(1, 1, 1, 2, 2, 2)))
    assert flat.status == "inconclusive" and "fewer than two" in flat.regime
    assert FIGURES[CLAIM.id](_rows())["emergence"].axes[0].get_ylabel()


def test_edge_prediction_flips_it():
    # outliers sit 30% above the edge, the bulk 30% below: a 50% shift of the edge moves them across
    pw = resolving_power(CLAIM, _rows())
    assert pw.flips["outlier_edge"] == {"+": 0.5, "-": 0.5} and not pw.cannot_fail


def test_drop_share_by_hand():
    from attnlab.claims.highdim.emergence import _drop_share

    share, span = _drop_share([1.0, 2.0, 4.0], [1.0, 0.5, 0.4], [True, False])
    assert share == pytest.approx(0.5 / 0.6) and span == pytest.approx(0.5)
    assert math.isnan(_drop_share([1.0, 2.0], [1.0, 1.0], [True])[0])


def test_real_point():
    p = CLAIM.points("quick", overrides={"d": 10, "max_steps": 30})[3]
    res = CLAIM.run(p)
    ev = res.arrays["eigenvalues"]
    assert (
        res.metrics["outliers_sim"] == int(np.sum(ev > res.metrics["edge"]))
        and res.metrics["outliers_theory"] >= 1
    )
