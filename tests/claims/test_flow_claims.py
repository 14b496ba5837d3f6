"""The eight flow.* claims: registration, grids, verdict logic on synthetic rows, one cheap run each part."""


import pytest

from attnlab.claims import flow
from attnlab.claims.flow.energy_monotone import THRESHOLDS
from attnlab.engine.protocol import Row
from attnlab.report.figures.flow import FIGURES

IDS = {
    "flow.energy-monotone",
    "flow.value-perturbation",
    "flow.radial-shadow",
    "flow.beta-star",
    "flow.equiangular-rates",
    "flow.relu-vs-softmax",
    "flow.entropy",
    "flow.approx-orthogonal",
}


def _claim(cid):
    return next(c for c in flow.CLAIMS if c.id == cid)


def _rows(claim, profile="quick", override=None):
    rows = []
    for p in claim.points(profile, overrides=override):
        r = claim.run(p)
        rows.append(Row(p.point_id, p.params, "ok", r.metrics, arrays=r.arrays))
    return rows


def test_registered():
    assert {c.id for c in flow.CLAIMS} == IDS
    for c in flow.CLAIMS:
        assert c.kind == "theorem" and c.paper == "B"
        assert c.points("quick") and c.points("full")
        assert len(c.points("full")) >= len(c.points("quick"))


def test_failed_rows_only_is_inconclusive():
    for c in flow.CLAIMS:
        v = c.verdict([Row("x", {"mode": "identity"}, "failed", {}, error="boom")])
        assert v.status == "inconclusive"


def test_energy_identity_claim_holds_and_failed_rows_noted():
    c = _claim("flow.energy-monotone")
    rows = _rows(c, override={"batch": 2, "states": 3, "head_draws": 1})
    rows.append(Row("bad", {"mode": "identity"}, "failed", {}, error="x"))
    v = c.verdict(rows)
    assert v.status == "holds" and v.numbers["max_rel_err_identity"] < 1e-8
    assert "1 failed" in v.note
    table = v.numbers["softmax_by_setting"]
    assert table and all(row["at_t0"] is not None for row in table.values())
    for row in table.values():  # nested thresholds: a stricter threshold never counts fewer
        rates = [row[f"traj_{t:g}"] for t in THRESHOLDS]
        assert rates == sorted(rates, reverse=True)
        assert row["euler_E_drop"] is not None
    assert FIGURES[c.id](rows)


def test_energy_softmax_single_point_metrics():
    c = _claim("flow.energy-monotone")
    p = next(
        p
        for p in c.points("quick", overrides={"batch": 4, "head_draws": 1})
        if p.params["mode"] == "softmax" and p.params["heads"] == 2 and p.params["d"] == 4
    )
    m = c.run(p).metrics
    assert set(m["violation_rate_by_threshold"]) == {f"{t:g}" for t in THRESHOLDS}
    q = list(m["min_rel_rate_quantiles"].values())
    assert q == sorted(q) and q[0] == pytest.approx(m["min_rel_rate"])
    assert 0.0 <= m["euler_step_drop_rate"] <= m["euler_drop_rate"] <= 1.0


def test_energy_verdict_fails_on_large_error():
    c = _claim("flow.energy-monotone")
    row = Row("a", {"mode": "identity"}, "ok", {"max_rel_err": 1e-3, "states": 10, "min_rate": 0.0})
    assert c.verdict([row]).status == "fails"


def test_equiangular_claim():
    c = _claim("flow.equiangular-rates")
    rows = _rows(c, override={"t1": 6.0, "samples": 2000})
    v = c.verdict(rows)
    assert v.numbers["max_gamma_err"] < 1e-8
    # the mean-only reading of super-additivity has counterexamples (THEORY.md B5); Jensen's never fails
    assert v.numbers["all_convex_failures"] == 0
    assert v.status == "fails" and v.numbers["mean_only_failures"] > 0
    ce = rows[-1].metrics["theory_counterexample"]
    assert ce[1] == pytest.approx(0.062, abs=5e-4) and ce[2] == pytest.approx(0.118, abs=5e-4)


def test_radial_shadow_claim():
    c = _claim("flow.radial-shadow")
    rows = _rows(c, override={"batch": 128, "head_draws": 2, "beta": [4.0]})
    v = c.verdict(rows)
    assert v.numbers["flat_violation_rate"] == 0.0
    assert v.numbers["form1_equals_sign_fraction"] == 1.0
    for r in rows:
        for r1, rany in r.metrics.get("rates", {}).values():
            assert 0.0 <= r1 <= rany <= 1.0
    top = v.numbers["scan_largest_dE1_rates"]
    assert top and top[0]["dE1_negative"] >= top[-1]["dE1_negative"]
    assert FIGURES[c.id](rows)
