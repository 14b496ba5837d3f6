"""The paper-A claims: grids, one small run each, and verdict logic on constructed rows."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from attnlab.claims.ensemble import CLAIMS  # noqa: E402
from attnlab.claims.ensemble.budget_law import CLAIM as BUDGET_LAW  # noqa: E402
from attnlab.claims.ensemble.decomposition import CLAIM as DECOMPOSITION  # noqa: E402
from attnlab.claims.ensemble.decorrelation_optimal import CLAIM as DECORRELATION_OPTIMAL  # noqa: E402
from attnlab.claims.ensemble.hdi_monotone import CLAIM as HDI_MONOTONE  # noqa: E402
from attnlab.claims.ensemble.variance_needs_decorrelation import CLAIM as VARIANCE_NEEDS_DECORRELATION  # noqa: E402
from attnlab.claims.ensemble.weighting import CLAIM as WEIGHTING  # noqa: E402
from attnlab.engine.protocol import Point, Row  # noqa: E402
from attnlab.report.figures.ensemble import FIGURES  # noqa: E402

MINE = [
    DECOMPOSITION,
    VARIANCE_NEEDS_DECORRELATION,
    HDI_MONOTONE,
    DECORRELATION_OPTIMAL,
    BUDGET_LAW,
    WEIGHTING,
]

# small overrides so each run takes well under a second
_SMALL = {
    "ensemble.decomposition": {"reps": 10, "queries": 20},
    "ensemble.variance-needs-decorrelation": {"reps": 20, "queries": 20},
    "ensemble.hdi-monotone": {"reps": 20, "queries": 20},
    "ensemble.decorrelation-optimal": {"steps": 5, "test": 50},
    "ensemble.budget-law": {"reps": 2, "queries": 10, "n": 100},
    "ensemble.weighting": {"reps": 4, "queries": 20, "n": 100},
}


def _row(p: Point, res, status: str = "ok") -> Row:
    return Row(p.point_id, p.params, status, res.metrics if res else {}, arrays=res.arrays if res else {})


def test_registered_in_order_and_unique():
    ids = [c.id for c in CLAIMS]
    assert ids[0] == "ensemble.nw-identity"
    assert ids[1:] == [c.id for c in MINE]
    assert len(set(ids)) == len(ids)
    for c in MINE:
        assert c.kind == ("identity" if c.id == "ensemble.decomposition" else "theorem")
        assert len(c.points("quick")) >= 4
        assert len(c.points("full")) > len(c.points("quick"))


@pytest.mark.parametrize("claim", MINE, ids=lambda c: c.id)
def test_one_small_point_runs_and_verdict_copes_with_failures(claim):
    pts = claim.points("quick", overrides=_SMALL[claim.id])
    p = pts[0]
    res = claim.run(p)
    assert res.metrics and all(isinstance(k, str) for k in res.metrics)
    rows = [_row(p, res), Row("x", p.params, "failed", {}, error="boom")]
    v = claim.verdict(rows)
    assert v.status in ("holds", "fails", "inconclusive")
    assert claim.verdict([]).status == "inconclusive"
    assert claim.verdict([Row("x", p.params, "failed", {}, error="boom")]).status == "inconclusive"


def test_decomposition_claim_holds_at_quick_scale():
    c = DECOMPOSITION
    rows = [_row(p, c.run(p)) for p in c.points("quick", overrides={"reps": 20, "queries": 30})]
    v = c.verdict(rows)
    assert v.status == "holds", v
    assert v.numbers["max_rel_err"] < 1e-12
    figs = FIGURES[c.id](rows)
    assert figs and all(f.axes[0].get_ylabel() for f in figs.values())


def _fake(claim, params: dict, metrics: dict, arrays: dict | None = None) -> Row:
    return Row(str(id(metrics)), {**params}, "ok", metrics, arrays=arrays or {})


def test_hdi_verdict_fails_on_a_significant_increase_and_holds_on_a_clean_decrease():
    s = [8, 3, 2, "sine", 1.0, 200, 1.5]
    good = [
        _fake(
            HDI_MONOTONE,
            {"setting": s, "rep": i},
            {
                "spearman_hdi_mse": -1.0 + 0.01 * i,
                "significant_increases": 0,
                "increases_with_bias_rise": 0,
                "max_increase_z": -2.0,
            },
        )
        for i in range(4)
    ]
    assert HDI_MONOTONE.verdict(good).status == "holds"
    bad = good[:3] + [
        _fake(
            HDI_MONOTONE,
            {"setting": s, "rep": 3},
            {
                "spearman_hdi_mse": -0.9,
                "significant_increases": 1,
                "increases_with_bias_rise": 1,
                "max_increase_z": 5.0,
            },
        )
    ]
    assert HDI_MONOTONE.verdict(bad).status == "fails"


def test_budget_verdict_distinguishes_the_laws():
    d = 2
    p = 2 / (4 + d)
    ns = [1e2, 1e3, 1e4, 1e5, 1e6]

    def rows(fn):
        return [
            _fake(
                BUDGET_LAW,
                {"n": n, "D": 16, "d": d, "c": 2.0, "rep": r},
                {"dk_star": fn(n) * (1 + 0.001 * r), "dk_best": 4},
            )
            for n in ns
            for r in range(2)
        ]

    stated = BUDGET_LAW.verdict(rows(lambda n: 2 * math.log(n) ** p))
    poly = BUDGET_LAW.verdict(rows(lambda n: 0.5 * n**p))
    assert stated.status == "holds", stated
    assert poly.status == "fails", poly
    assert poly.numbers["D=16, d=2, c=2.0"]["consistent_with"] == "polynomial"


def test_weighting_verdict_on_constructed_rates():
    ns = [100, 1000, 10000]
    rows = []
    for r in range(2):
        for n in ns:
            heads = np.array([n**-0.8, n**-0.2])
            rows.append(
                _fake(
                    WEIGHTING,
                    {"n": n, "rep": r, "kappas": [0.2, 0.05]},
                    {
                        "mse_uniform": n**-0.3,
                        "mse_geometric": n**-0.5,
                        "mse_fibonacci": n**-0.4,
                        "mse_optimal": n**-0.8,
                        "mse_heads": heads.tolist(),
                    },
                )
            )
    v = WEIGHTING.verdict(rows)
    assert v.status == "holds"
    assert v.numbers["slope_mean"]["geometric"] == pytest.approx(-0.5, abs=1e-9)


def test_decorrelation_verdict_per_objective_and_only_where_training_helped():
    s = [8, 3, 2, "bump", 0.5, 600, 1.5]

    def rows(objective: str, init: float, plain: float, pen: float) -> list[Row]:
        return [
            _fake(
                DECORRELATION_OPTIMAL,
                {"setting": s, "objective": objective, "penalty": 1.0, "rep": i},
                {
                    "test_mse_init": init + 0.01 * i,
                    "test_mse_plain": plain + 0.01 * i,
                    "test_mse_penalised": pen + 0.013 * i,
                    **{f"hdi_{k}": 0.5 for k in ("init", "plain", "penalised")},
                    "objective_plain": 0.3,
                    "best_step_plain": 10,
                    "best_step_penalised": 12,
                },
                {k: np.linspace(1, 0.5, 5) for k in ("val_plain", "val_penalised")},
            )
            for i in range(4)
        ]

    helped = DECORRELATION_OPTIMAL.verdict(rows("loo", 0.3, 0.1, 0.05))
    assert helped.status == "holds", helped
    hurt = DECORRELATION_OPTIMAL.verdict(rows("loo", 0.3, 0.1, 0.2) + rows("holdout", 0.3, 0.1, 0.05))
    assert hurt.status == "fails"
    labels = [k for k in hurt.numbers if isinstance(hurt.numbers[k], dict)]
    assert sorted(hurt.numbers[k]["status"] for k in labels) == ["fails", "holds"]
    # training made the test MSE worse: the penalty's gain is not counted as evidence
    overfit = DECORRELATION_OPTIMAL.verdict(rows("loo", 0.3, 0.6, 0.4))
    assert overfit.status == "inconclusive"
    assert FIGURES[DECORRELATION_OPTIMAL.id](rows("loo", 0.3, 0.1, 0.05))
