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


def _sl_rows(theory_exp, sim_exp, sim_d=100, seeds=3, noise=(0.0, 0.01, -0.01)):
    # exact power laws in n/d, the simulation with a small multiplicative seed-to-seed scatter
    rows = [
        _row(
            {"side": "theory", "alpha": a, "d": 200, "gamma": 1.0, "noise": 0.1, "rep": 0},
            {"excess": (a * 200) ** theory_exp, "converged": True},
        )
        for a in (0.02, 0.04, 0.08)
    ]
    for rep in range(seeds):
        for i, a in enumerate((0.08, 0.16, 0.32)):
            n_over_d = a * sim_d
            rows.append(
                _row(
                    {"side": "simulation", "alpha": a, "d": sim_d, "gamma": 1.0, "noise": 0.1, "rep": rep},
                    {"excess": n_over_d**sim_exp * (1 + noise[rep % 3] * (i - 1)), "converged": True},
                )
            )
    return rows


def test_scaling_verdict_fits_both_sides():
    c = _claim("highdim.scaling-law")
    v = c.verdict(_sl_rows(-0.5, -0.5))
    assert v.status == "holds"
    # the theory rows are exact powers: polyfit returns the exponent to rounding
    assert v.numbers["slope_g1.0"] == pytest.approx(-0.5, abs=1e-12)
    # the seed scatter (±1% tilts) averages out of the mean curve to < 1e-3 in the slope
    assert v.numbers["sim_slope_g1.0"] == pytest.approx(-0.5, abs=1e-3)
    assert v.numbers["theory_agrees"] and v.numbers["simulation_agrees"]
    assert "theory side agrees, simulation side agrees" in v.note
    # the theory side off the predicted exponent: fails, whatever the simulation says
    v = c.verdict(_sl_rows(-1.0, -0.5))
    assert v.status == "fails" and "theory side disagrees" in v.note
    # the simulation off at a small d: too thin to decide; at d = 100 with 3 seeds: fails
    assert c.verdict(_sl_rows(-0.5, -1.0, sim_d=50)).status == "inconclusive"
    assert c.verdict(_sl_rows(-0.5, -1.0, sim_d=100)).status == "fails"
    # one side only: the claim asks for both
    theory_only = [r for r in _sl_rows(-0.5, -0.5) if r.params["side"] == "theory"]
    v = c.verdict(theory_only)
    assert v.status == "inconclusive" and "simulation side not run" in v.note
    figs = c.figures(_sl_rows(-0.5, -0.5))
    ax = figs["scaling_law"].axes[0]
    assert ax.get_xlabel() and ax.get_ylabel() and len(ax.get_lines()) == 3  # theory, Adam, prediction


def test_scaling_simulation_point_is_a_paired_excess(one_thread):
    from attnlab.claims.base import Point

    c = _claim("highdim.scaling-law")
    params = {"side": "simulation", "alpha": 0.3, "d": 10, "gamma": 1.0, "noise": 0.1, "lam": 1e-3}
    r = c.run(Point(c.id, "quick", params | {"max_steps": 200, "n_test": 500, "rep": 0}, 7, c.version))
    m = r.metrics
    assert m["excess"] == pytest.approx(m["test_error"] - m["e0"], abs=1e-15)
    assert m["e0"] > 0 and m["steps"] <= 200


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
