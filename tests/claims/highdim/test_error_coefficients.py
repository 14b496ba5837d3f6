"""highdim.error-coefficients: each part's share of the excess error against the Gaussian read-out at its
overlaps, with a tolerance from the seeds; empty parts and single seeds left undecided; the resolving power
per part; the Marchenko–Pastur control; real points on both targets."""

from __future__ import annotations

import pytest

from attnlab.claims.highdim.error_coefficients import CLAIM
from attnlab.claims.highdim.error_decomposition import PARTS
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim import FIGURES

PRED = {"over": 0.018, "under": 0.014, "approx": 0.011, "rotation": 0.009}  # Gaussian shares (γ = 1, d = 100)
JITTER = (-0.01, 0.0, 0.01)  # each seed's measured share off its prediction by −1%, 0, +1%


def _rows(off=None, factor=1.0, seeds=3, empty=(), control="", alphas=(0.1,)):
    # per part: the seeds' differences e1 − g1 spread by 1% of the share, so the seed mean's standard error is
    # 0.01 × share / √3 and the tolerance 2 × that + 5% = 6.15% of the share
    rows = []
    for a in alphas:
        for rep in range(seeds):
            m = {"fq": 0.383, "fm": -0.759, "e1": 0.06, "g1": 0.056, "n_recovered": 4, "e0": 0.05}
            m["t1_over"] = PRED["over"] * 1.1  # the over part on the target's exact law: 10% above g1
            for k, g in PRED.items():
                E = 0.0 if k in empty else g / 0.38
                scale = factor * ((1 + off[1]) if off and off[0] == k else 1.0)
                m |= {f"E_{k}": E, f"a_{k}": 0.0, f"g1_{k}": g, f"e1_{k}": g * (scale + JITTER[rep % 3])}
            extra = {"control": control} if control else {}
            rows.append(Row("x", {"alpha": a, "d": 100, "gamma": 1.0, "rep": rep} | extra, "ok", m))
    return rows


def test_shares_against_the_gaussian_read_out():
    v = CLAIM.decide(_rows())
    assert v.status == "holds" and v.branch == "share gap" and v.numbers["parts_decided"] == 4
    assert v.numbers["ratio_over"] == pytest.approx(1.0) and v.numbers["first_order_c"] == 0.383
    # 2∂e/∂q + ∂e/∂m over ∂e/∂q: how far the target is from stationary along its scale
    assert v.numbers["stationarity"] == pytest.approx((2 * 0.383 - 0.759) / 0.383)
    assert v.numbers["c_over_a0.1"] == pytest.approx(0.38)  # e1_part / E_part
    # reported, not deciding: the measured over share against its read-out on the target's exact law
    assert v.numbers["target_law_over"] == pytest.approx(1 / 1.1) and "exact logit law" in v.note
    # one part 10% above its prediction fails the claim and is named
    v = CLAIM.decide(_rows(off=("under", 0.10)))
    assert v.status == "fails" and "under" in v.numbers["worst_part"]
    assert v.numbers["worst_gap_over_tol"] == pytest.approx(0.10 / (0.05 + 2 * 0.01 / 3**0.5))
    assert "under 1.100" in v.numbers["ratios"]
    ax = FIGURES[CLAIM.id](_rows())["coefficients"].axes[0]
    assert ax.get_ylabel() and "exact law" in " ".join(t.get_text() for t in ax.get_legend().get_texts())


def test_each_part_is_a_prediction_that_flips_it():
    pw = resolving_power(CLAIM, _rows())
    assert set(pw.flips) == set(PARTS) and not pw.cannot_fail
    # tolerance 6.15% of each share: a 10% shift of any one prediction flips it, a 5% one does not
    assert all(f == {"+": 0.1, "-": 0.1} for f in pw.flips.values())
    assert pw.band == pytest.approx(0.05 + 2 * 0.01 / 3**0.5)
    # failing through one part 10% above: that part's prediction moved up by 5% brings it within its 6.15%,
    # moved down never; no other part's prediction can make it hold
    pw = resolving_power(CLAIM, _rows(off=("over", 0.10)))
    assert pw.base == "fails" and pw.flips["over"] == {"+": 0.05, "-": None}
    assert all(pw.flips[k] == {"+": None, "-": None} for k in ("under", "approx", "rotation"))


def test_empty_parts_and_single_seeds_are_not_decided():
    # a target with no recovered outlier: the approximation and rotation parts are empty, not decided
    v = CLAIM.decide(_rows(empty=("approx", "rotation")))
    assert v.status == "holds" and v.numbers["parts_decided"] == 2 and v.numbers["c_approx_a0.1"] is None
    assert v.numbers["ratios"] == "over 1.000, under 1.000"
    v = CLAIM.decide(_rows(empty=PARTS))
    assert v.status == "inconclusive" and "empty" in v.regime
    v = CLAIM.decide(_rows(seeds=1))
    assert v.status == "inconclusive" and ">= 2 seeds" in v.regime


def test_gaussian_logits_control_holds_through_the_same_branch():
    name, c = next(iter(CLAIM.controls.items()))
    assert c.expect == "holds" and dict(c.set) == {"target": "marchenko_pastur"}
    # the test fails through the over part; the control's full-rank parts sit on the read-out
    rows = _rows(off=("over", 0.12)) + _rows(control=name, empty=("approx", "rotation"))
    got = resolving_power(CLAIM, rows).controls[name]
    assert (
        got["got"] == "holds" and got["as_designed"] and got["same_branch"] and got["branch"] == "share gap"
    )


@pytest.mark.parametrize("target", ["power_law", "marchenko_pastur"])
def test_real_point(target):
    ov = {"d": 12, "max_steps": 40, "n_test": 400, "target": target}
    p = next(p for p in CLAIM.points("quick", overrides=ov) if not p.control)
    m = CLAIM.run(p).metrics
    # the parts are orthogonal blocks of Ŝ − S0: their sizes add up to the total (a check of the code)
    assert sum(m[f"E_{k}"] for k in PARTS) == pytest.approx(m["E_total"], rel=1e-10)
    assert all(f"e1_{k}" in m and f"g1_{k}" in m for k in PARTS) and m["fq"] > 0 > m["fm"]
    assert m["t1_over"] > 0 if m["E_over"] > 0 else m["t1_over"] == 0.0
    if target == "marchenko_pastur":  # no outlier: only the over- and under-fitting parts
        assert m["n_recovered"] == 0 and m["E_approx"] == m["E_rotation"] == m["g1_approx"] == 0.0
    else:
        assert m["n_recovered"] >= 1 and m["E_approx"] > 0


def test_bad_values_are_refused_before_work():
    with pytest.raises(ValueError, match="target"):
        CLAIM.points("quick", overrides={"target": "wishart"})
    with pytest.raises(ValueError, match="tokens"):
        CLAIM.points("quick", overrides={"tokens": 3})
