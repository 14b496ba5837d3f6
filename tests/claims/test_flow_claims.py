"""flow.equiangular-rates and flow.radial-shadow on real quick points."""

import pytest

from attnlab.claims import flow
from attnlab.engine.protocol import Row


def _claim(cid):
    return next(c for c in flow.CLAIMS if c.id == cid)


def _rows(claim, profile="quick", override=None):
    rows = []
    for p in claim.points(profile, overrides=override):
        r = claim.run(p)
        rows.append(Row(p.point_id, p.params, "ok", r.metrics, arrays=r.arrays))
    return rows


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
