"""flow.beta-star: form 3 against β/β*, the identities, power on synthetic rows, one real point."""

import numpy as np
import pytest

from attnlab.claims.flow.beta_star import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import CONTROL_KEY, Predict, Row

RATIOS = np.array([0.5, 0.98, 1.02, 2.0])


def _cf(err=1e-13):
    return Row("cf", {"part": "closed-form", "heads": 2, "n": 32}, "ok",
               {"rel_err": err, "rel_err_form2": 1e-13, "beta_star": 1.476})  # fmt: skip


def _scan(form3, law="orthogonal", bstar=1.476):
    arrays = {"beta": RATIOS * bstar, "form3": np.array(form3, dtype=float)}
    return Row(law, {"part": "form3-scan", "heads": 2, "n": 32, "law": law}, "ok",
               {"beta_star": bstar, "form3_and_fall": 0}, arrays=arrays)  # fmt: skip


def test_rule_and_resolving_power():
    rows = [_cf(), _scan([1, 1, 0, 0]), _scan([0.9, 0, 0, 0], law="uniform")]
    assert CLAIM.decide(rows).status == "holds"
    # β* placed 5% too high: the state at 1.02 β* lies below it and breaks form 3
    assert CLAIM.decide(rows, Predict({"beta_star": 1.05})).status == "fails"
    assert CLAIM.decide(rows, Predict({"beta_star": 0.95})).status == "fails"
    pw = resolving_power(CLAIM, rows)
    assert pw.flips["beta_star"] == {"+": 0.05, "-": 0.05} and not pw.cannot_fail
    assert CLAIM.decide([_cf(), _scan([1, 0.5, 0, 0])]).status == "fails"
    # the identity: a wrong closed form
    assert CLAIM.decide([_cf(1e-3), _scan([1, 1, 0, 0])]).status == "fails"
    assert CLAIM.grade == "numerics"  # every draw of orthonormal tokens is one state up to rotation
    # uniform tokens alone are outside the regime: nothing decides
    assert CLAIM.decide([_cf(), _scan([0.9, 0, 0, 0], law="uniform")]).status == "inconclusive"


def test_real_orthogonal_scan_is_a_step_at_beta_star():
    p = next(
        p
        for p in CLAIM.points("quick", overrides={"draws": 8})
        if p.params["part"] == "form3-scan" and p.params["law"] == "orthogonal" and p.params["heads"] == 4
    )
    r = CLAIM.run(p)
    ratios = r.arrays["beta"] / r.metrics["beta_star"]
    # at orthogonal tokens form 3 is cos θ ≤ c*(H): a step at β* in every state (docs/flow.md B4)
    np.testing.assert_array_equal(r.arrays["form3"], (ratios < 1).astype(float))
    assert r.metrics["beta_star"] == pytest.approx(
        0.2073373, rel=1e-6
    )  # H = 4, n = 16 (independent numpy: 0.20733735)


# ---------------------------------------------------------------------------------- flow.beta-star-onset
def _on(onset, bstar=1.476, heads=2, statistic="energy-fall", bad=0):
    params = {"part": "onset", "heads": heads, "n": 32, "statistic": statistic, "band": 0.1}
    m = {"beta_star": bstar, "onset": onset, "largest_ratio": 32.0, "form3_and_fall": bad}
    return Row(f"o{heads}{statistic}", params, "ok", m)


def test_onset_rule_branch_and_power():
    from attnlab.claims.flow.beta_star_onset import CLAIM as ONSET

    at = [_on(1.05 * 1.476), _on(1.05 * 0.570, bstar=0.570, heads=4)]
    v = ONSET.decide(at)
    assert v.status == "holds" and v.branch == "onset ratio" and v.band == 0.1
    # β* 10% too low puts the onset at 1.17 β*: outside the band
    assert ONSET.decide(at, Predict({"beta_star": 0.9})).status == "fails"
    far = [_on(6 * 1.476), _on(None, bstar=0.570, heads=4)]  # one onset beyond the grid (ρ > 32)
    v = ONSET.decide(far)
    assert v.status == "fails" and v.branch == "onset ratio"
    assert v.numbers["onset_over_beta_star"]["H=4,n=32"] == "> 32"
    assert ONSET.decide([_on(1.05 * 1.476, bad=1)]).status == "fails"  # the implication's identity
    assert ONSET.decide([_on(0.25 * 1.476)]).status == "fails"  # an onset far below β* fails too
    # a positive control that holds through the test's branch makes a failing verdict able to hold
    ctrl = [Row(r.point_id + "c", {**r.params, CONTROL_KEY: "form3-scalar"}, "ok", r.metrics) for r in at]
    pw = resolving_power(ONSET, far + ctrl)
    assert pw.controls["form3-scalar"]["got"] == "holds" and pw.controls["form3-scalar"]["same_branch"]
    assert not pw.cannot_fail


def test_onset_points_control_at_beta_star_and_implication_identity():
    from attnlab.claims.flow.beta_star_onset import CLAIM as ONSET

    pts = ONSET.points("quick", overrides={"draws": 8})
    ctrl = next(p for p in pts if p.control == "form3-scalar" and p["part"] == "onset" and p["heads"] == 2)
    r = ONSET.run(ctrl)
    # independent: at orthonormal tokens form 3 of identical scalar heads is cos θ ≤ c*(H) with
    # cos θ = e^{βλ}/√(e^{2βλ} + n − 1) (docs/flow.md B4), so it breaks in every state exactly above β*
    b, n = r.arrays["beta"], ctrl["n"]
    c = (np.sqrt(1 + 4) - 1) / 2
    cos = np.exp(b) / np.sqrt(np.exp(2 * b) + n - 1)
    np.testing.assert_array_equal(r.arrays["statistic"], (cos > c).astype(float))
    imp = next(p for p in pts if p["part"] == "implication" and not p.control and not p.cell)
    m = ONSET.run(imp).metrics
    assert m["form3_and_fall"] == 0 and m["states"] == 8 * 7  # form 3 ⇒ dE_h/dt ≥ 0 (orthogonal blocks)
