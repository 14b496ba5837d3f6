"""highdim.variance-rate and highdim.bias-rate: the exponent of the fall e(α) − e(rα) along a geometric
ladder against −1 and −2, with a tolerance from the seeds and the finite-d theory's own departure; the flips
of the prediction; each control (the other law's data) failing through the same branch; the regime and the
seed count left undecided; real points at both laws; bad values refused before work."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.claims.highdim.large_sample import BIAS, VARIANCE, Params, ladder
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim_rates import FIGURES

ALPHAS = [4.0, 8.0, 16.0, 32.0]


def _rows(p=1.0, p_se=None, seeds=8, jitter=0.05, control="", alpha0=4.0, lam=0.01, positive=True):
    # e(α) = e∞ + 0.02 (α/4)^(−p), each seed's fall scaled by 1 ± jitter (alternating): the seed means are
    # the law exactly, so the slope is −p and its standard error comes from the spread alone
    alphas = [alpha0 * 2**i for i in range(4)]
    p_se = p if p_se is None else p_se
    rows = []
    for rep in range(seeds):
        f = 1 + jitter * (1 if rep % 2 else -1)
        e = [0.08 + f * 0.02 * (a / alpha0) ** -p for a in alphas]
        if not positive:
            e = [0.08 + 0.001 * (i % 2) for i in range(4)]
        m = {
            "alphas": alphas,
            "test_errors": e,
            "e0": 0.082,
            "converged": True,
            "se_test_errors": [0.08 + 0.02 * (a / alpha0) ** -p_se for a in alphas],
            "se_e0": 0.082,
            "se_converged": True,
        }
        extra = {"control": control} if control else {}
        rows.append(Row("x", {"d": 30, "lam": lam, "alpha0": alpha0, "rep": rep} | extra, "ok", m))
    return rows


def test_the_slope_of_the_fall_against_the_law():
    v = VARIANCE.decide(_rows(p=1.0))
    assert v.status == "holds" and v.branch == "exponent"
    assert v.numbers["exponent"] == pytest.approx(-1.0, abs=1e-12) and v.numbers["allowance"] == 0.05
    # alternating ±5% falls: the seed means are exact, the spread of each column 5.3% of its mean (ddof 1),
    # perfectly correlated along the ladder, so the slope's error is 0 to first order
    assert v.numbers["se"] == pytest.approx(0.0, abs=1e-12)
    assert v.numbers["se_exponent"] == pytest.approx(-1.0) and v.parts["state-evolution"] == "holds"
    assert v.numbers["local_exponents"] == [-1.0, -1.0]
    # a fall like α^−1.1 is 0.1 off: outside 0.05 (no seed noise), fails through the same branch
    v = VARIANCE.decide(_rows(p=1.1, p_se=1.0))
    assert v.status == "fails" and v.branch == "exponent" and v.numbers["gap_over_tol"] == pytest.approx(2.0)
    v = BIAS.decide(_rows(p=2.0))
    assert v.status == "holds" and v.numbers["predicted"] == -2.0
    ax = FIGURES[VARIANCE.id](_rows())["rates"].axes[0]
    assert ax.get_xscale() == "log" and ax.get_legend() is not None


def test_the_allowance_is_fixed_by_the_law_not_by_the_cell_s_theory():
    # the bias law's allowance is 0.1: a simulated −2.08 holds, −2.2 fails, and a cell whose state evolution
    # departs further (−2.15 here) is held to the same width while its theory part fails against the law
    v = BIAS.decide(_rows(p=2.08, p_se=2.15))
    assert v.numbers["allowance"] == 0.1 and v.status == "holds" and v.parts["state-evolution"] == "fails"
    v = BIAS.decide(_rows(p=2.2, p_se=2.08))
    assert v.status == "fails" and v.numbers["gap_over_tol"] == pytest.approx(0.2 / 0.1)
    assert v.parts["state-evolution"] == "holds"


def test_seed_noise_widens_the_tolerance():
    # independent seed noise: the delta-method error of the slope enters as 2 se
    rng = np.random.default_rng(0)
    rows = _rows(p=1.0, seeds=12, jitter=0.0)
    for r in rows:
        r.metrics["test_errors"] = (np.array(r.metrics["test_errors"]) + rng.normal(0, 4e-4, 4)).tolist()
    v = VARIANCE.decide(rows)
    assert 0 < v.numbers["se"] < 0.2 and v.numbers["tolerance"] == pytest.approx(2 * v.numbers["se"] + 0.05)


def test_the_prediction_flips_it():
    pw = resolving_power(VARIANCE, _rows(p=1.02))
    # a measured −1.02 with tolerance 0.05: the prediction moved to −1.05 still holds and to −1.1 fails
    # (+10%), moved to −0.95 fails (−5%)
    assert pw.flips["exponent"] == {"+": 0.1, "-": 0.05} and not pw.cannot_fail
    assert pw.band == pytest.approx(0.05)


@pytest.mark.parametrize(("claim", "p_test", "p_ctrl"), [(VARIANCE, 1.0, 2.0), (BIAS, 2.0, 1.0)])
def test_the_other_law_s_data_fail_through_the_same_branch(claim, p_test, p_ctrl):
    name, c = next(iter(claim.controls.items()))
    assert c.expect == "fails"
    rows = _rows(p=p_test) + _rows(p=p_ctrl, control=name)
    got = resolving_power(claim, rows).controls[name]
    assert got["got"] == "fails" and got["as_designed"] and got["same_branch"] and got["branch"] == "exponent"


def test_the_theory_rides_on_replicate_zero_only():
    # the state evolution is stored on replicate 0's row alone: the verdict reads it from that row wherever
    # it stands among the rows, and decides the same as with the theory on every row
    full = VARIANCE.decide(_rows(p=1.0, p_se=1.02))
    rows = _rows(p=1.0, p_se=1.02)
    for r in rows[1:]:
        r.metrics.update(se_test_errors=None, se_e0=None, se_converged=None)
    v = VARIANCE.decide(rows)
    assert v.status == full.status == "holds" and v.numbers == full.numbers and v.parts == full.parts
    v = VARIANCE.decide(rows[::-1])  # the same sums in another order: equal to rounding
    assert v.status == "holds" and v.parts == full.parts
    for k in ("exponent", "se", "se_exponent", "se_excess_over_e0", "tolerance"):
        assert v.numbers[k] == pytest.approx(full.numbers[k], rel=1e-12, abs=1e-15), k
    # replicate 0's point failed: the simulation still decides, the state evolution's part is absent
    v = VARIANCE.decide(rows[1:])
    # (seven seeds: their mean fall is the law times one constant, the slope the same)
    assert v.status == "holds" and v.numbers["exponent"] == pytest.approx(full.numbers["exponent"], rel=1e-12)
    assert v.numbers["se_exponent"] is None and v.numbers["se_excess_over_e0"] is None and not v.parts
    assert FIGURES[VARIANCE.id](rows[1:])["rates"].axes[0].lines  # the simulated falls, no theory line


def test_undecided_outside_the_regime_or_with_few_seeds():
    v = VARIANCE.decide(_rows(alpha0=2.0))
    assert v.status == "inconclusive" and "alpha0 >= 4" in v.regime
    v = VARIANCE.decide(_rows(lam=1.0))  # λ̃/α = 0.25: the penalty is no small perturbation
    assert v.status == "inconclusive" and "λ̃/alpha0" in v.regime
    v = VARIANCE.decide(_rows(seeds=2))
    assert v.status == "inconclusive" and ">= 3" in v.regime
    # an error that does not fall along the ladder fails through the exponent branch
    v = VARIANCE.decide(_rows(positive=False))
    assert v.status == "fails" and v.branch == "exponent" and math.isinf(v.numbers["gap_over_tol"])


@pytest.mark.parametrize("claim", [VARIANCE, BIAS])
def test_real_point(claim):
    ov = {"d": 8, "max_steps": 200, "n_test": 500, "nodes": 512}
    p = next(p for p in claim.points("quick", overrides=ov) if not p.control and not p.cell)
    m = claim.run(p).metrics
    # the variance law's ladder starts at α = 4, the bias law's at 8 (its finite-α correction is larger)
    start = 4.0 if claim is VARIANCE else 8.0
    assert m["alphas"] == ladder(p.p) == [start * a / 4 for a in ALPHAS] and len(m["se_test_errors"]) == 4
    assert m["se_converged"] and len(m["steps"]) == 4
    # the state evolution's error falls along the ladder; at Δ = 0 the target's own error is exactly zero
    se = np.array(m["se_test_errors"])
    assert np.all(np.diff(se) < 0)
    # the ladder's rungs are warm-started from the one below: the top rung solved cold is the same fixed
    # point (the solver stops within 1e-6 of it in the order parameters; the error at the top rung is small
    # but smooth in them, 1e-5 relative leaves room for both solves' stopping errors)
    from attnlab.claims.highdim._common import setting
    from attnlab.highdim import OutputChannel, power_law_spectrum, state_evolution
    from attnlab.highdim.channel_nodes import default_fold

    s = setting(p.p, target=power_law_spectrum(p.p.d, p.p.gamma))
    cold = state_evolution(s, m["alphas"][-1], channel=OutputChannel(s, p.p.nodes, fold=default_fold(s)))
    assert cold.test_error == pytest.approx(m["se_test_errors"][-1], rel=1e-5)
    # the other replicates carry no theory; their simulation is the same computation on their own seed
    pts = claim.points("quick", overrides=ov)
    p1 = next(q for q in pts if not q.control and not q.cell and q["rep"] == 1)
    m1 = claim.run(p1).metrics
    assert m1["se_test_errors"] is None and m1["se_e0"] is None and len(m1["test_errors"]) == 4
    if claim is BIAS:
        assert m["e0"] == 0.0 and min(m["test_errors"]) > 0
        # without noise the ERM's error is the shrinkage alone: at d = 8 within a factor 2 of the theory's
        # (a finite-d check of the code, not of the law)
        assert np.all(np.abs(np.log(np.array(m["test_errors"]) / se)) < math.log(2))


def test_bad_values_are_refused_before_work():
    for ov, word in [({"ratio": 1.0}, "ratio"), ({"steps": 2}, "steps"), ({"gamma": 0.4}, "gamma")]:
        with pytest.raises(ValueError, match=word):
            VARIANCE.points("quick", overrides=ov)
    with pytest.raises(ValueError, match="training sequences"):  # the top rung: 4 · 2^11 · 40² = 1.3e7 > 1e7
        VARIANCE.points("quick", overrides={"steps": 12, "d": 40})
    assert ladder(Params(alpha0=2.0, ratio=3.0, steps=3)) == [2.0, 6.0, 18.0]
