"""flow.energy-monotone (identity with a failing control) and flow.energy-monotone-softmax (finding)."""

from attnlab.claims.flow.energy_monotone import CLAIM as ENERGY
from attnlab.claims.flow.energy_monotone_softmax import CLAIM as SOFTMAX
from attnlab.claims.flow.energy_monotone_softmax import THRESHOLDS
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import CONTROL_KEY, Row
from attnlab.report.figures.flow import FIGURES


def _run(claim, override, controls=True):
    out = []
    for p in claim.points("quick", overrides=override, controls=controls):
        r = claim.run(p)
        out.append(Row(p.point_id, p.params, "ok", r.metrics, arrays=r.arrays))
    return out


def test_identity_holds_and_its_control_fails():
    rows = _run(ENERGY, {"batch": 2, "states": 3})
    v = ENERGY.decide(rows + [Row("bad", {"space": "sphere"}, "failed", {}, error="x")])
    assert v.status == "holds" and v.numbers["max_rel_err_identity"] < 1e-8 and "1 failed" in v.note
    pw = resolving_power(ENERGY, rows)
    assert pw.controls["values-not-aligned"]["got"] == "fails" and not pw.cannot_fail
    assert FIGURES[ENERGY.id](rows)


def _soft(H, viol, trials=100, control=""):
    params = {"beta": 4.0, "heads": H, "n": 16, "d": 4, **({CONTROL_KEY: control} if control else {})}
    m = {"violations": viol, "trials": trials, "violation_rate": viol / trials}
    return Row(f"{H}{viol}", params, "ok", m)


def test_softmax_finding_rule():
    # 40 of 100 at β = 4: Wilson interval [0.309, 0.498] meets the reference's [0.35, 0.45]
    assert SOFTMAX.decide([_soft(1, 0), _soft(2, 40)]).status == "holds"
    assert SOFTMAX.decide([_soft(1, 1), _soft(2, 40)]).status == "fails"  # H = 1 must be exact
    assert SOFTMAX.decide([_soft(1, 1), _soft(2, 40)]).branch == "H=1"
    v = SOFTMAX.decide([_soft(1, 0), _soft(2, 10)])  # [0.055, 0.174]: below 35%
    assert v.status == "fails" and v.branch == "rate interval" and v.band == 0.125
    assert SOFTMAX.decide([_soft(1, 0), _soft(2, 70)]).status == "fails"  # [0.604, 0.781]: above 45%
    assert SOFTMAX.decide([_soft(2, 40)]).status == "inconclusive"
    assert SOFTMAX.decide([_soft(1, 0), _soft(2, 40)]).branch == "rate interval"
    ctrl = [_soft(1, 0, control="identical-heads"), _soft(2, 0, control="identical-heads")]
    pw = resolving_power(SOFTMAX, [_soft(1, 0), _soft(2, 40), *ctrl])
    c = pw.controls["identical-heads"]
    assert c["got"] == "fails" and c["same_branch"] and not pw.cannot_fail


def test_identical_heads_never_lose_energy():
    # H copies of one head share their normalisers: a positive rescaling of the gradient (exact)
    p = next(
        p
        for p in SOFTMAX.points("quick", overrides={"batch": 4, "head_draws": 1, "euler_dt": 0.0})
        if p["heads"] == 4 and p.control == "identical-heads" and p["beta"] == 4.0
    )
    m = SOFTMAX.run(p).metrics
    assert m["violations"] == 0 and m["min_rel_rate"] >= -1e-12


def test_softmax_point_metrics_are_nested():
    p = next(p for p in SOFTMAX.points("quick", overrides={"batch": 4, "head_draws": 1}) if p["heads"] == 2)
    m = SOFTMAX.run(p).metrics
    rates = [m["violation_rate_by_threshold"][f"{t:g}"] for t in THRESHOLDS]
    assert rates == sorted(rates, reverse=True)  # a stricter threshold never counts more
    q = list(m["min_rel_rate_quantiles"].values())
    assert q == sorted(q) and q[0] == m["min_rel_rate"]
    assert 0.0 <= m["euler_step_drop_rate"] <= m["euler_drop_rate"] <= 1.0
