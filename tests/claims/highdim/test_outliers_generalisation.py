"""highdim.outliers-generalisation: the error falls with each outlier kept (ERM and theory) by the predicted
gain, the gain as a prediction that flips it, the scrambled-outlier control failing, too few α with outliers
left inconclusive, and one real point."""

from __future__ import annotations

import numpy as np

from attnlab.claims.highdim import CLAIMS
from attnlab.claims.highdim.outliers_generalisation import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim import FIGURES


def _errors(k, step, base=0.3):
    return base - step * np.arange(k + 1)  # (k+1,) falling by ``step`` with each outlier kept


def _rows(ks=(1, 2, 3), sim_step=0.01, control="", draws_spread=1e-4):
    rows = []
    for a, k in zip((0.06, 0.15, 0.4), ks):
        # eight theory draws whose gains spread by about ``draws_spread``
        draws = np.array([_errors(k, 0.01 + draws_spread * (i - 3.5) / max(k, 1)) for i in range(8)])
        m = {"k": k, "outliers_sim": k, "test_error_theory": 0.2, "test_error_sim": 0.21}
        params = {"alpha": a, "d": 40, "rep": 0} | ({"control": control} if control else {})
        arrays = {"e_sim": _errors(k, sim_step), "e_theory_draws": draws}
        rows.append(Row("x", params, "ok", m, None, 0.0, arrays))
    return rows


def test_holds_when_each_outlier_lowers_the_error_by_the_predicted_gain():
    v = CLAIM.decide(_rows())
    assert v.status == "holds" and v.numbers["falls_sim"] and v.numbers["alphas_tested"] == 3
    assert abs(v.numbers["gain_sim_a0.4"] - 0.03) < 1e-12  # three outliers at 0.01 each
    assert abs(v.numbers["gain_theory_a0.4"] - 0.03) < 1e-12  # the draws' mean gain
    assert FIGURES[CLAIM.id](_rows() + _rows(control="scrambled", sim_step=-0.01))


def test_fails_when_outliers_do_not_help_or_the_gain_is_off():
    assert CLAIM.decide(_rows(sim_step=-0.01)).status == "fails"  # error rising with each outlier
    assert CLAIM.decide(_rows(sim_step=0.012)).status == "fails"  # a gain 20% above the prediction


def test_the_gain_prediction_flips_it_and_the_control_fails():
    rows = _rows() + _rows(control="scrambled", sim_step=-0.005)
    pw = resolving_power(CLAIM, rows)
    # tolerance 2 × spread (≈ 2e-4 relative to gains of 0.01–0.03) + 5% of the gain: a 10% shift flips it
    assert pw.flips["gain"]["+"] is not None and pw.flips["gain"]["+"] <= 0.10
    assert pw.flips["gain"]["-"] is not None and pw.flips["gain"]["-"] <= 0.10
    assert pw.controls["scrambled"]["got"] == "fails" and pw.controls["scrambled"]["as_designed"]


def test_too_few_alphas_with_outliers_is_inconclusive_and_registered():
    v = CLAIM.decide(_rows(ks=(0, 0, 2)))
    assert v.status == "inconclusive" and "two α" in v.regime
    assert CLAIM in CLAIMS


def test_real_point():
    pt = next(p for p in CLAIM.points("quick", overrides={"d": 16, "alpha": 0.4}) if not p.control)
    res = CLAIM.run(pt)
    k = res.metrics["k"]
    assert res.arrays["e_sim"].shape == (k + 1,) and res.arrays["e_theory_draws"].shape == (8, k + 1)
    # keeping no outlier and keeping all of them bracket the ERM's own matrix: with all k kept, Ŝ is
    # unchanged when its count above the edge is at most k, so e(k) is the error of Ŝ on the test set
    assert np.all(np.isfinite(res.arrays["e_sim"]))
