"""flow.beta-star: form 3 against β/β*, the identities, power on synthetic rows, one real point."""

import numpy as np
import pytest

from attnlab.claims.flow.beta_star import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Predict, Row

RATIOS = np.array([0.5, 0.98, 1.02, 2.0])


def _cf(err=1e-13):
    return Row("cf", {"part": "closed-form", "heads": 2, "n": 32}, "ok",
               {"rel_err": err, "rel_err_form2": 1e-13, "beta_star": 1.476})  # fmt: skip


def _scan(form3, law="orthogonal", bstar=1.476):
    arrays = {"beta": RATIOS * bstar, "form3": np.array(form3, dtype=float)}
    return Row(law, {"part": "form3-scan", "heads": 2, "n": 32, "law": law}, "ok",
               {"beta_star": bstar, "form3_and_fall": 0}, arrays=arrays)  # fmt: skip


def _onset(bad=0):
    return Row("on", {"part": "onset", "heads": 2, "law": "orthogonal"}, "ok",
               {"onset": None, "form3_and_fall": bad, "beta_star": 1.476})  # fmt: skip


def test_rule_and_resolving_power():
    rows = [_cf(), _scan([1, 1, 0, 0]), _scan([0.9, 0, 0, 0], law="uniform"), _onset()]
    assert CLAIM.decide(rows).status == "holds"
    # β* placed 5% too high: the state at 1.02 β* lies below it and breaks form 3
    assert CLAIM.decide(rows, Predict({"beta_star": 1.05})).status == "fails"
    assert CLAIM.decide(rows, Predict({"beta_star": 0.95})).status == "fails"
    pw = resolving_power(CLAIM, rows)
    assert pw.flips["beta_star"] == {"+": 0.05, "-": 0.05} and not pw.cannot_fail
    assert CLAIM.decide([_cf(), _scan([1, 0.5, 0, 0]), _onset()]).status == "fails"
    # identities: a wrong closed form, or form 3 with a falling per-head energy
    assert CLAIM.decide([_cf(1e-3), _scan([1, 1, 0, 0]), _onset()]).status == "fails"
    assert CLAIM.decide([_cf(), _scan([1, 1, 0, 0]), _onset(bad=1)]).status == "fails"
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
