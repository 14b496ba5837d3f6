"""flow.equiangular-rates: real quick points (ODE, late rate, three readings), power on λ_c, the control."""

import numpy as np
import pytest

from attnlab.claims.flow.equiangular_rates import CLAIM
from attnlab.dynamics import local_superadditivity
from attnlab.dynamics import theory as T
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Predict, Row


def test_quick_points_hold_and_decide():
    rows = []
    for p in CLAIM.points("quick", overrides={"t1": 6.0, "samples": 2000}):
        r = CLAIM.run(p)
        rows.append(Row(p.point_id, p.params, "ok", r.metrics, arrays=r.arrays))
    v = CLAIM.decide(rows)
    assert v.numbers["max_gamma_err"] < 1e-8 and v.numbers["all_convex_failures"] == 0
    assert v.status == "holds" and v.numbers["mean_only_failures"] > 0  # the summary's reading is false
    ce = next(r for r in rows if r.params["part"] == "superadditivity").metrics["theory_counterexample"]
    assert ce[1] == pytest.approx(0.062, abs=5e-4) and ce[2] == pytest.approx(0.118, abs=5e-4)
    # λ_c 1% too high: the mean at 1.005 λ_c is super-additive although "below" the prediction
    assert CLAIM.decide(rows, Predict({"lambda_c": 1.01})).status == "fails"
    pw = resolving_power(CLAIM, rows)
    assert pw.flips["lambda_c"] == {"+": 0.01, "-": 0.01}
    assert pw.controls["wide-spread"]["got"] == "fails"


def test_local_superadditivity_is_the_second_order_term():
    beta, n = 1.0, 32
    lc = T.lambda_c(beta, n)
    means = np.array([0.5, 0.9, 1.1, 2.0]) * lc
    eps = 1e-3
    got = local_superadditivity(2, beta, n, means, eps)
    # φ'' by a central difference (step 1e-4·λ, error ~1e-8 relative); gain = φ'' (ελ)² for u = (+1, −1)
    h = 1e-4 * means
    d2 = (T.phi(means + h, beta, n) - 2 * T.phi(means, beta, n) + T.phi(means - h, beta, n)) / h**2
    np.testing.assert_allclose(got, d2 * (eps * means) ** 2, rtol=1e-4)  # fourth-order rest ~ε²
    assert np.all(np.sign(got) == np.sign(means - lc))
