"""New paper-B claims: flow.late-constant (theorem), flow.relu-late, flow.radial-invariance (findings)."""

import numpy as np
import pytest
import torch

from attnlab.claims.flow.late_constant import CLAIM as LATE_C
from attnlab.claims.flow.radial_invariance import CLAIM as INVARIANCE
from attnlab.claims.flow.relu_late import CLAIM as RELU_LATE
from attnlab.dynamics import Heads, init, radial_invariance
from attnlab.dynamics import theory as T
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Predict, Row
from attnlab.report.figures.flow import FIGURES


def test_late_constant_against_the_ode_solution():
    # independent: DOP853 solution of the equiangular ODE, ε(t) e^{2Λt} at a late time (ε ~ 1e-7)
    lam, n = [1.0, 0.5], 8
    t = np.array([5.0, 6.0])
    eps = 1 - T.equiangular_gamma(lam, 1.0, n, t)
    np.testing.assert_allclose(eps * np.exp(3.0 * t), T.late_constant(lam, 1.0, n), rtol=1e-5)  # O(ε) rest


def test_late_constant_claim_point_and_power():
    p = LATE_C.points("quick")[0]
    r = LATE_C.run(p)
    assert abs(r.metrics["C_measured"] / r.metrics["C_theory"] - 1) < 1e-4
    rows = [Row("a", p.params, "ok", r.metrics)]
    assert LATE_C.decide(rows).status == "holds"
    assert LATE_C.decide(rows, Predict({"C": 1.02})).status == "fails"
    assert resolving_power(LATE_C, rows).flips["C"] == {"+": 0.01, "-": 0.01}


def _late(kind, beta, rate):
    rates = None if rate is None else [rate, rate]
    return Row(kind + str(beta), {"kind": kind, "beta": beta, "strength": 1.0, "n": 8, "band": 0.005}, "ok",
               {"late_rates": rates, "late_rate": rate, "late_rate_linearised": 0.0})  # fmt: skip


def test_relu_late_rule_power_and_rates():
    ok = [
        _late("softmax", 0.9, 2.0),
        _late("relu", 0.9, 1.8),
        _late("softmax", 1.1, 2.0),
        _late("relu", 1.1, 2.2),
    ]
    v = RELU_LATE.decide(ok)
    assert v.status == "holds" and v.branch == "rates" and v.band == 0.005
    assert RELU_LATE.decide(ok[:3] + [_late("relu", 1.1, 1.9)]).status == "fails"  # ReLU slower, βλ > 1
    assert RELU_LATE.decide(ok[:3] + [_late("relu", 1.1, 2.2 * 1.006)]).status == "fails"  # off by 0.6%
    assert RELU_LATE.decide(ok[:3] + [_late("relu", 1.1, None)]).status == "inconclusive"
    # a prediction 1% off is outside the 0.5% band: the verdict resolves 2βλ² from 1.01·2βλ²
    assert resolving_power(RELU_LATE, ok).flips["relu_rate"] == {"+": 0.01, "-": 0.01}
    p = next(p for p in RELU_LATE.points("quick") if p["kind"] == "relu" and p["beta"] == 2.0 and not p.cell)
    m = RELU_LATE.run(p).metrics
    assert m["min_pair_inner_product_start"] > 0  # the cap start keeps every pair in ReLU's positive half
    # independent: near consensus δ̇_i = βλ²(δ̄ − δ_i), so 1 − γ decays at 2βλ² = 4 (β = 2, λ = 1);
    # RK4 at dt = 0.1 and the window's O(ε) rest are below 1e-4 (docs: relu-late's band)
    assert all(r == pytest.approx(4.0, rel=1e-3) for r in m["late_rates"])


def test_radial_invariance_counts_times_and_rule():
    g = torch.Generator().manual_seed(0)
    spec = Heads.orthogonal_subspaces(2, 8, generator=g, random_within=True, kind="usa")
    x0 = init.uniform(batch=16, n=8, d=8, generator=g)
    ri = radial_invariance(spec, x0, 1.0, 6.0, 0.5)
    assert ri.trajectories == 16 and all(lf <= st for lf, st in zip(ri.left, ri.started, strict=True))
    assert ri.started[2] <= ri.started[1] <= ri.started[0]  # form 3 ⇒ form 2 ⇒ form 1
    # per trajectory: leaving form 1 at some record is a finite exit time, and exactly those count as left
    assert int((ri.form1_start & np.isfinite(ri.exit_time)).sum()) == ri.left[0]
    assert np.all(ri.exit_time[~ri.form1_start] == 0.0) and np.all(
        (ri.form1_share >= 0) & (ri.form1_share <= 1)
    )
    # one head: form 1 has no cross term, so it holds at every state, also once the tokens have clustered
    # (‖P⊥f‖² is computed from the projected vector, never negative by cancellation)
    one = Heads.orthogonal_subspaces(1, 8, generator=g, random_within=True, kind="usa")
    r1 = radial_invariance(one, x0, 1.0, 20.0, 0.5)
    assert r1.form1_start.all() and np.isinf(r1.exit_time).all() and np.isfinite(r1.cluster_time).any()

    def row(stayed, settled, control=""):
        m = {"started": [settled, 5, 1], "left": [settled - stayed, 0, 0], "entered": [0, 0, 0],
             "trajectories": 40, "settled": settled, "stayed": stayed}  # fmt: skip
        return Row("r" + control, {"beta": 1.0, **({"control": control} if control else {})}, "ok", m)

    v = INVARIANCE.decide([row(40, 40)])  # Wilson [0.912, 1]: reaches 0.95, lower end ≥ 0.9
    assert v.status == "holds" and v.branch == "persistence"
    v = INVARIANCE.decide([row(3, 40)])  # [0.026, 0.199]: below 0.95
    assert v.status == "fails" and v.branch == "persistence"
    assert INVARIANCE.decide([row(36, 40)]).status == "inconclusive"  # [0.769, 0.960] straddles
    assert INVARIANCE.decide([row(5, 5)]).status == "inconclusive"  # too few settled
    c = resolving_power(INVARIANCE, [row(3, 40), row(40, 40, control="one-head")]).controls["one-head"]
    assert c["as_designed"] and c["same_branch"]
    # a real (small) point: its metrics agree with themselves and its figure draws
    ov = {"batch": 8, "head_draws": 1, "t1": 4.0, "beta": [1.0]}
    p = next(iter(INVARIANCE.points("quick", overrides=ov, controls=False)))
    res = INVARIANCE.run(p)
    assert res.metrics["stayed"] <= res.metrics["settled"] <= res.metrics["started"][0] <= 8
    assert FIGURES[INVARIANCE.id]([Row(p.point_id, p.params, "ok", res.metrics, arrays=res.arrays)])
