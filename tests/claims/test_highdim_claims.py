"""The claims of paper C: registry and theory-vs-adam's quick setting (per claim: tests/claims/highdim/)."""

from attnlab.claims.highdim import CLAIMS
from attnlab.engine.protocol import Row

IDS = {
    "highdim.theory-vs-adam",
    "highdim.factorised-beats-frobenius",
    "highdim.spectrum",
    "highdim.interpolation-threshold",
    "highdim.perfect-recovery",
    "highdim.error-decomposition",
    "highdim.error-coefficients",
    "highdim.emergence",
    "highdim.scaling-law",
    "highdim.variance-rate",
    "highdim.bias-rate",
    "highdim.seq2seq",
    "highdim.tokens",
    "highdim.temperature",
    "highdim.width",
    "highdim.nuclear-norm",
    "highdim.outliers-generalisation",
    "highdim.training-loss",
}


def _row(params, metrics, status="ok"):
    return Row("x", params, status, metrics)


def test_registry():
    assert {c.id for c in CLAIMS} == IDS
    for c in CLAIMS:
        assert c.kind == "theorem" and c.paper == "C"
        assert c.points("quick") and c.points("full")
        # every claim can fail: predictions to perturb or a negative control
        assert c.predictions or any(k.expect == "fails" for k in c.controls.values()), c.id
    from attnlab.report.figures.highdim import FIGURES
    from attnlab.report.figures.highdim_rates import FIGURES as RATES

    assert set(FIGURES) | set(RATES) == IDS and not set(FIGURES) & set(RATES)


def _claim(cid):
    return next(c for c in CLAIMS if c.id == cid)


def test_tva_quick_profile_is_the_issue_setting():
    # Adam at d = 100, at least two α and two λ̃, at least two seeds, and one state evolution per (α, λ̃)
    pts = [p.params for p in _claim("highdim.theory-vs-adam").points("quick") if not p.control]
    sim = [p for p in pts if p["side"] == "simulation"]
    th = [p for p in pts if p["side"] == "theory"]
    assert {p["d"] for p in sim} == {100}
    pairs = {(p["alpha"], p["lam"]) for p in sim}
    assert len({a for a, _ in pairs}) >= 2 and len({lam for _, lam in pairs}) >= 2
    assert all(sum((p["alpha"], p["lam"]) == k for p in sim) >= 2 for k in pairs)
    assert sorted((p["alpha"], p["lam"]) for p in th) == sorted(pairs)
