"""highdim.scaling-law: plateaus of local exponents decide, drifting ones leave it inconclusive, the
regime filter, the tuned-λ̃ envelope, and the prediction's resolving power."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.claims.highdim.scaling_law import CLAIM, curves
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim import FIGURES

ALPHAS = (0.0025, 0.005, 0.01, 0.02, 0.04)


def _rows(excess, d=800, gamma=1.0, lam=1e-3, side="theory"):
    return [
        Row(
            "x",
            {"side": side, "alpha": a, "d": d, "gamma": gamma, "lam": lam, "rep": 0},
            "ok",
            {"excess": excess(a * d), "converged": True},
        )
        for a in ALPHAS
    ]


def test_a_plateau_at_the_predicted_exponent_holds_and_a_few_percent_flips_it():
    rows = _rows(lambda x: 0.3 * x**-0.5)
    v = CLAIM.decide(rows)
    assert v.status == "holds" and v.numbers["plateaus"] == 1
    # exact power: every local exponent is −0.5 to rounding, the plateau spans the whole range
    assert v.numbers["exponent_g1.0_d800_lam0.001"] == pytest.approx(-0.5, abs=1e-12)
    assert v.numbers["plateau_n_over_d_g1.0_d800_lam0.001"] == [2.0, 32.0]
    pw = resolving_power(CLAIM, rows)
    # tolerance 0.03 on an exponent of 0.5: a 10% shift (0.05) flips it, 5% (0.025) does not
    assert pw.flips["exponent"] == {"+": 0.1, "-": 0.1}
    assert FIGURES[CLAIM.id](rows)["scaling_law"].axes[1].get_ylabel()


def test_wrong_plateau_fails_and_drift_is_inconclusive():
    assert CLAIM.decide(_rows(lambda x: x**-0.8)).status == "fails"
    # a crossover: local exponents −0.9, −0.6, −0.3, 0.0 never agree within 0.05
    drift = _rows(lambda x: np.exp(-0.9 * np.log(x) + 0.15 * np.log(x / 2) ** 2 / np.log(2)))
    v = CLAIM.decide(drift)
    assert v.status == "inconclusive" and "drift" in v.regime
    assert len(v.numbers["local_exponents_g1.0_d800_lam0.001"]) == 4


def test_regime_filter_and_tuned_envelope():
    # λ̃ = 0.01 violates λ̃ <= 0.1 √α below α = 0.01: those points leave the curve
    big = curves(_rows(lambda x: x**-0.5, lam=0.01))
    assert list(big["g1.0_d800_lam0.01"][1]) == [8.0, 16.0, 32.0]
    # two λ̃: the tuned curve takes the lower excess at each α
    rows = _rows(lambda x: x**-0.5, lam=1e-4) + _rows(lambda x: 0.5 * x**-0.5, lam=1e-3)
    tuned = curves(rows)["g1.0_d800_tuned"]
    assert np.allclose(tuned[2], 0.5 * tuned[1] ** -0.5)
    # unconverged and simulation rows do not enter the theory curves
    sim = _rows(lambda x: x**-2.0, side="simulation")
    assert CLAIM.decide(_rows(lambda x: x**-0.5) + sim).status == "holds"


def test_quick_profile_is_in_the_regime():
    pts = [p.p for p in CLAIM.points("quick")]
    assert {p.d for p in pts} == {800} and all(p.alpha * p.d >= 2 and p.alpha <= 0.1 for p in pts)
    assert all(p.lam <= 0.1 * p.alpha**0.5 for p in pts)
    full = {(p.p.side, p.p.gamma) for p in CLAIM.points("full")}
    assert {g for s, g in full if s == "theory"} == {0.75, 1.0, 2.0} and ("simulation", 1.0) in full


def test_scaling_simulation_point_is_a_paired_excess():
    from attnlab.engine.protocol import Point

    c = CLAIM
    params = {"side": "simulation", "alpha": 0.3, "d": 10, "gamma": 1.0, "noise": 0.1, "lam": 1e-3}
    r = c.run(
        Point(
            c.id,
            "quick",
            params | {"max_steps": 200, "n_test": 500, "rep": 0},
            7,
            c.version,
            params_cls=c.params,
        )
    )
    m = r.metrics
    assert m["excess"] == pytest.approx(m["test_error"] - m["e0"], abs=1e-15)
    assert m["e0"] > 0 and m["steps"] <= 200
