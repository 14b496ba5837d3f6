"""flow.relu-vs-softmax: early forces on synthetic rows (power, regime); the full field at random tokens."""

import math

import pytest
import torch

from attnlab.claims.flow.relu_vs_softmax import CLAIM
from attnlab.dynamics import Heads, gamma_rate, init, velocity
from attnlab.dynamics import theory as T
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row


def _force(kind, d, ratio, n=16):
    pred = T.phi(1.0, 1.0, n) if kind == "softmax" else T.relu_random_init_rate(1.0, 1.0, n, d)
    params = {"part": "force", "kind": kind, "n": n, "d": d, "d_min": 64}
    return Row(f"{kind}{d}", params, "ok", {"rate": ratio * pred, "rate_se": 0.002 * pred, "predicted": pred})


def test_rule_power_and_regime():
    rows = [_force(k, d, 1.0) for k in ("softmax", "relu") for d in (64, 256)]
    assert CLAIM.decide(rows).status == "holds"
    pw = resolving_power(CLAIM, rows)
    # tolerance 5%: 1/1.05 = 0.952 still holds, 1/0.95 = 1.053 does not
    assert pw.flips["phi"] == {"+": 0.1, "-": 0.05} and pw.flips["relu_force"] == {"+": 0.1, "-": 0.05}
    # a ReLU force that does not vanish like d^{-1/2}: twice the prediction at d = 256
    assert CLAIM.decide(rows[:3] + [_force("relu", 256, 2.0)]).status == "fails"
    v = CLAIM.decide([_force(k, 16, 1.0) for k in ("softmax", "relu")])  # d < 64 only: outside
    assert v.status == "inconclusive" and v.regime


def test_gamma_rate_against_a_pair_loop():
    g = torch.Generator().manual_seed(0)
    x = init.uniform(batch=2, n=5, d=6, generator=g)
    v = torch.randn(2, 5, 6, generator=g, dtype=torch.float64)
    ref = [
        sum(float(v[b, i] @ x[b, j] + x[b, i] @ v[b, j]) for i in range(5) for j in range(5) if i != j) / 20
        for b in range(2)
    ]
    assert gamma_rate(v, x).tolist() == pytest.approx(ref, rel=1e-13)


@pytest.mark.parametrize("kind", ["softmax", "relu"])
def test_early_force_at_random_tokens_matches_the_prediction(kind):
    n, d = 16, 256
    spec = Heads.scalar([1.0], d=d, kind=kind)
    x = init.uniform(batch=256, n=n, d=d, generator=torch.Generator().manual_seed(1))
    r = gamma_rate(velocity(spec, x, 1.0), x)
    pred = T.phi(1.0, 1.0, n) if kind == "softmax" else 2 / (n * math.sqrt(2 * math.pi * d))
    se = float(r.std() / math.sqrt(256))
    # O(1/d) corrections (~0.4% at d = 256) plus sampling noise: 4 standard errors + 2%
    assert abs(float(r.mean()) - pred) <= 4 * se + 0.02 * pred
