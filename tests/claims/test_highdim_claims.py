"""The eight claims of paper C: registry, verdict logic on synthetic rows, one end-to-end run."""

import pytest

from attnlab.claims.base import Row
from attnlab.claims.highdim import CLAIMS

IDS = {
    "highdim.theory-vs-adam",
    "highdim.factorised-beats-frobenius",
    "highdim.spectrum",
    "highdim.interpolation-threshold",
    "highdim.perfect-recovery",
    "highdim.error-decomposition",
    "highdim.emergence",
    "highdim.scaling-law",
}


def _row(params, metrics, status="ok"):
    return Row("x", params, status, metrics)


def test_registry():
    assert {c.id for c in CLAIMS} == IDS
    for c in CLAIMS:
        assert c.kind == "theorem" and c.paper == "C"
        assert c.points("quick") and c.points("full")


def _claim(cid):
    return next(c for c in CLAIMS if c.id == cid)


def test_tva_verdicts():
    c = _claim("highdim.theory-vs-adam")
    base = {"se_test_error": 0.17, "se_train_loss": 0.012}
    good = [
        _row(
            {"alpha": 0.3, "lam": 0.01, "d": 100}, base | {"sim_test_error": 0.172, "sim_train_loss": 0.0121}
        )
    ]
    assert c.verdict(good).status == "holds"
    bad = [
        _row({"alpha": 0.3, "lam": 0.01, "d": 100}, base | {"sim_test_error": 0.25, "sim_train_loss": 0.02}),
        _row({"alpha": 0.3, "lam": 0.01, "d": 100}, base | {"sim_test_error": 0.251, "sim_train_loss": 0.02}),
    ]
    assert c.verdict(bad).status == "fails"
    small = [_row({**r.params, "d": 40}, r.metrics) for r in bad]
    assert c.verdict(small).status == "inconclusive"
    assert c.verdict([_row({}, {}, "failed")]).status == "inconclusive"


def test_interp_and_pr_verdicts():
    ci = _claim("highdim.interpolation-threshold")
    rows = [
        _row({"alpha": 0.05}, {"alpha_interp": 0.15, "data_loss": 1e-6}),
        _row({"alpha": 0.3}, {"alpha_interp": 0.15, "data_loss": 1e-3}),
    ]
    assert ci.verdict(rows).status == "holds"
    rows[0] = _row({"alpha": 0.05}, {"alpha_interp": 0.15, "data_loss": 1e-3})
    assert ci.verdict(rows).status == "fails"
    assert ci.verdict(rows[:1]).status == "inconclusive"
    cp = _claim("highdim.perfect-recovery")
    rows = [
        _row({"alpha": 0.1}, {"alpha_pr": 0.21, "test_error": 0.1}),
        _row({"alpha": 0.4}, {"alpha_pr": 0.21, "test_error": 0.05}),
    ]
    assert cp.verdict(rows).status == "fails"


def test_scaling_verdict_fits_the_slope():
    c = _claim("highdim.scaling-law")
    rows = [
        _row(
            {"alpha": a, "d": 100, "gamma": 1.0, "noise": 0.1},
            {"excess": (a * 100) ** -0.5, "converged": True},
        )
        for a in (0.02, 0.04, 0.08)
    ]
    v = c.verdict(rows)
    assert v.status == "holds" and v.numbers["slope_g1.0"] == pytest.approx(-0.5)
    rows = [
        _row(
            {"alpha": a, "d": 100, "gamma": 1.0, "noise": 0.1},
            {"excess": (a * 100) ** -1.0, "converged": True},
        )
        for a in (0.02, 0.04, 0.08)
    ]
    assert c.verdict(rows).status == "fails"


@pytest.fixture
def one_thread():
    # the engine runs each point on one thread; do the same here
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.slow
def test_perfect_recovery_quick_end_to_end(one_thread):
    c = _claim("highdim.perfect-recovery")
    rows = []
    for p in c.points("quick"):
        r = c.run(p)
        rows.append(Row(p.point_id, p.params, "ok", r.metrics, None, 0.0, r.arrays))
    v = c.verdict(rows)
    assert v.status in ("holds", "fails", "inconclusive") and "ratio" in v.numbers
    figs = c.figures(rows)
    assert figs and all(f.axes[0].get_xlabel() for f in figs.values())
