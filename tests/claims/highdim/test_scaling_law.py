"""highdim.scaling-law: the simulated exponent decides over the window where the state evolution at the
ERM's d plateaus (a planted power law recovers its exponent, a shifted prediction and the flatter-target
control fail through the exponent branch, the window does not move with a simulated cell), a drifting
theory, a missing theory and too few seeds leave it inconclusive, the quick profile (state evolution only)
is inconclusive with its numerics part, and the state evolution's own plateau rule."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.claims.highdim import scaling_law as sl
from attnlab.claims.highdim.scaling_law import CLAIM, curves, sim_plateau
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Point, Predict, Row
from attnlab.report.figures.highdim import FIGURES

ALPHAS = (0.0025, 0.005, 0.01, 0.02, 0.04)
SIM_ALPHAS = (0.005, 0.01, 0.02, 0.04, 0.08)  # d = 400: n/d = 2 ... 32


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


def _sim(excess, seeds=4, sigma=0.03, d=400, gamma=1.0, lam=1e-3, seed=0):
    """Simulation rows: ``excess(n/d)`` times independent log-normal seed noise of width ``sigma``."""
    rng = np.random.default_rng(seed)
    return [
        Row(
            "s",
            {"side": "simulation", "alpha": a, "d": d, "gamma": gamma, "lam": lam, "rep": r},
            "ok",
            {"excess": excess(a * d) * float(np.exp(sigma * rng.standard_normal())), "converged": True},
        )
        for r in range(seeds)
        for a in SIM_ALPHAS
    ]


def _theory400(excess, gamma=1.0, lam=1e-3):
    """State-evolution rows on the ERM's own grid (d = 400): the window the ERM's exponent is read over."""
    return [
        Row(
            "t",
            {"side": "theory", "alpha": a, "d": 400, "gamma": gamma, "lam": lam, "rep": 0},
            "ok",
            {"excess": excess(a * 400), "converged": True},
        )
        for a in SIM_ALPHAS
    ]


def _crossover(p):
    """A power law ``x^p`` up to n/d = 16 that turns up at 32 (the interpolation peak seen at d = 400)."""
    return lambda x: x**p * (1.0 if x <= 16 else 2.0)


NAME = "g1.0_d400_lam0.001"


def test_a_planted_power_law_recovers_its_exponent_and_holds():
    rows = _sim(_crossover(-0.5)) + _rows(lambda x: 0.3 * x**-0.5) + _theory400(_crossover(-0.5))
    v = CLAIM.decide(rows)
    assert v.status == "holds" and v.branch == "exponent" and v.numbers["plateaus"] == 1
    # the theory's plateau stops before the planted upturn at n/d = 32; the exponent is the planted one within
    # the noise: 4 seeds of 3% log-noise over a 3-octave fit give a slope se of about 0.03/(√4·3·ln2·0.8)
    # ≈ 0.01, so 0.04 is four standard errors
    assert v.numbers[f"sim_window_n_over_d_{NAME}"] == [2.0, 16.0]
    assert v.numbers[f"window_theory_exponent_{NAME}"] == pytest.approx(-0.5, abs=1e-12)
    se = v.numbers[f"sim_exponent_se_{NAME}"]
    assert v.numbers[f"sim_tolerance_{NAME}"] == pytest.approx(0.05 + 2 * se)
    assert v.numbers[f"sim_exponent_{NAME}"] == pytest.approx(-0.5, abs=0.04)
    assert 0 < v.numbers[f"sim_exponent_se_{NAME}"] < 0.03
    assert v.parts == {"state-evolution": "holds"}
    assert FIGURES[CLAIM.id](rows)["scaling_law"].axes[1].get_ylabel()


def test_the_figure_draws_the_level_at_the_erms_own_d():
    """Right panel: the ERM's seed means over the state evolution's excess at the same (γ, d, λ̃, α); a planted
    1.2× offset reads 1.2 within the seed noise (3% log-noise, four seeds: 4 standard errors ≈ 0.06)."""
    rows = _sim(lambda x: 1.2 * _crossover(-0.5)(x)) + _theory400(_crossover(-0.5))
    ax = FIGURES[CLAIM.id](rows)["scaling_law"].axes[2]
    (line,) = [ln for ln in ax.get_lines() if ln.get_linestyle() != ":"]
    assert list(line.get_xdata()) == [2.0, 4.0, 8.0, 16.0, 32.0]
    assert np.allclose(line.get_ydata(), 1.2, atol=0.06)
    # without theory rows at the ERM's d the panel draws no level
    ax = FIGURES[CLAIM.id](_sim(_crossover(-0.5)) + _rows(lambda x: x**-0.5))["scaling_law"].axes[2]
    assert [ln for ln in ax.get_lines() if ln.get_linestyle() != ":"] == []


def test_a_prediction_shifted_beyond_the_band_fails_through_the_exponent():
    rows = _sim(_crossover(-0.5)) + _theory400(_crossover(-0.5))
    v = CLAIM.decide(rows)
    gap = abs(v.numbers[f"sim_exponent_{NAME}"] + 0.5)
    shift = (gap + v.numbers[f"sim_tolerance_{NAME}"]) / 0.5 * 1.05  # just past the band
    w = CLAIM.verdict(rows, Predict({"exponent": 1 + shift}))
    assert w.status == "fails" and w.branch == "exponent"
    pw = resolving_power(CLAIM, rows)
    # the flip is the smallest tabulated ε beyond the band (band + gap); both directions flip
    assert pw.flips["exponent"]["+"] is not None and pw.flips["exponent"]["-"] is not None
    assert min(pw.flips["exponent"].values()) >= v.band - gap / 0.5


def test_the_flatter_target_control_fails_through_the_same_branch():
    # the control's ERM learns γ = 0.75: its excess decays like (n/d)^(−1/3), held against −0.5 over the
    # window of the test's state evolution (the control shares the test's theory rows)
    v = CLAIM.decide(_sim(_crossover(-1 / 3)) + _theory400(_crossover(-0.5)))
    assert v.status == "fails" and v.branch == "exponent"
    assert v.numbers["worst_gap_over_tol"] > 1
    assert CLAIM.controls["flatter_target"].set == {"target_gamma_scale": 0.75}


def test_drift_missing_theory_too_few_seeds_and_the_quick_profile_are_inconclusive():
    # a crossover: the exponent −0.9 + 0.3·log2(x/2) rises by 0.3 per octave, so the local exponents over the
    # octaves are −0.75, −0.45, −0.15, +0.15 and never agree within 0.05: the theory gives no window
    law = lambda x: np.exp(-0.9 * np.log(x) + 0.15 * np.log(x / 2) ** 2 / np.log(2))  # noqa: E731
    v = CLAIM.decide(_sim(law) + _theory400(law))
    assert v.status == "inconclusive" and "drift" in v.regime
    assert len(v.numbers[f"sim_local_exponents_{NAME}"]) == 4
    loc = v.numbers[f"window_theory_local_exponents_{NAME}"]
    assert loc == pytest.approx([-0.75, -0.45, -0.15, 0.15], abs=1e-4)
    assert "theory drifts" in v.numbers["sim_summary"]
    # the simulation alone, however clean, has no window without the state evolution at its d
    v = CLAIM.decide(_sim(_crossover(-0.5)) + _rows(lambda x: 0.3 * x**-0.5))
    assert v.status == "inconclusive" and "no state evolution at this d" in v.numbers["sim_summary"]
    v = CLAIM.decide(_sim(_crossover(-0.5), seeds=2) + _theory400(_crossover(-0.5)))
    assert v.status == "inconclusive" and "fewer than 3 seeds" in v.regime
    # the quick profile: the state evolution only; its part is reported, the verdict waits for the ERM
    v = CLAIM.decide(_rows(lambda x: 0.3 * x**-0.5))
    assert v.status == "inconclusive" and "simulation" in v.regime
    assert v.parts == {"state-evolution": "holds"}
    assert CLAIM.decide(_rows(lambda x: x**-0.8)).parts == {"state-evolution": "fails"}


def test_the_window_comes_from_the_theory_not_from_a_simulated_cell():
    # the shape measured at d = 400, γ = 0.75 (root seed 0): the ERM's first local exponent (−0.19) is far
    # flatter than the next two (−0.38); the theory's (−0.28, −0.36, −0.37, −0.23) plateau at n/d = 4–16
    x = np.array([2.0, 4.0, 8.0, 16.0, 32.0])

    def law(local):  # a curve with these local exponents over successive octaves
        return np.exp(np.concatenate([[0.0], np.cumsum(np.array(local) * np.log(2))]))

    theory, sim = law([-0.283, -0.362, -0.370, -0.228]), law([-0.192, -0.382, -0.386, -0.260])
    tw = sl.theory_window((0.75, x, theory), x)
    assert tw["span"] == [4.0, 16.0] and tw["exponent"] == pytest.approx((-0.362 - 0.370) / 2, abs=1e-12)
    y = sim[None, :] * np.exp(0.02 * np.random.default_rng(1).standard_normal((6, 5)))
    a = sl.sim_window(x, y, tw["span"])
    # moving the first simulated cell by ±20% moves neither the window nor the exponent (v8's plateau rule
    # let that cell decide whether the plateau began at n/d = 2)
    for f in (0.8, 1.2):
        z = y.copy()
        z[:, 0] *= f
        assert sl.sim_window(x, z, sl.theory_window((0.75, x, theory), x)["span"]) == a
    # independent computation: least squares on the three window points of the seed means, and the standard
    # error of the six seeds' own slopes
    lx = np.log(x[1:4])
    slope = np.polyfit(lx, np.log(y[:, 1:4].mean(axis=0)), 1)[0]
    per = [np.polyfit(lx, np.log(row[1:4]), 1)[0] for row in y]
    assert a["exponent"] == pytest.approx(slope, rel=1e-10)
    assert a["se"] == pytest.approx(np.std(per, ddof=1) / np.sqrt(6), rel=1e-10)
    # two window points: the slope between them
    b = sl.sim_window(x, y, [4.0, 8.0])
    assert b["exponent"] == pytest.approx(np.log(y[:, 2].mean() / y[:, 1].mean()) / np.log(2), rel=1e-12)
    assert sl.theory_window(None, x) == {} and sl.sim_window(x, y[:2], [4.0, 16.0]) == {}


def test_the_seed_standard_errors_of_the_plateau():
    # independent computation: per-seed slopes of a planted law with known per-seed exponents
    x = np.array([2.0, 4.0, 8.0, 16.0])
    slopes = np.array([-0.45, -0.50, -0.55, -0.50])
    y = x[None, :] ** slopes[:, None]
    pl = sim_plateau(x, y)
    # each seed is an exact power law, so every seed's local exponents equal its slope: the se of each local
    # exponent is std(slopes)/2, and the plateau's se is the same (to rounding)
    se = slopes.std(ddof=1) / 2
    assert pl["local_se"] == pytest.approx([se] * 3, rel=1e-9)
    assert pl["se"] == pytest.approx(se, rel=1e-9)
    # the seed mean is not a power law, so its slope is close to but not exactly the mean slope
    assert pl["exponent"] == pytest.approx(slopes.mean(), abs=5e-3) and pl["span"] == [2.0, 16.0]


def test_state_evolution_regime_filter_and_tuned_envelope():
    # λ̃ = 0.01 violates λ̃ <= 0.1 √α below α = 0.01: those points leave the curve
    big = curves(_rows(lambda x: x**-0.5, lam=0.01))
    assert list(big["g1.0_d800_lam0.01"][1]) == [8.0, 16.0, 32.0]
    # two λ̃: the tuned curve takes the lower excess at each α
    rows = _rows(lambda x: x**-0.5, lam=1e-4) + _rows(lambda x: 0.5 * x**-0.5, lam=1e-3)
    tuned = curves(rows)["g1.0_d800_tuned"]
    assert np.allclose(tuned[2], 0.5 * tuned[1] ** -0.5)


def test_profiles_are_in_the_regime():
    pts = [p.p for p in CLAIM.points("quick", controls=False)]
    assert {p.d for p in pts} == {800} and all(p.alpha * p.d >= 2 and p.alpha <= 0.1 for p in pts)
    assert all(p.lam <= 0.1 * p.alpha**0.5 for p in pts)
    full = [p.p for p in CLAIM.points("full", controls=False)]
    sim = [p for p in full if p.side == "simulation"]
    assert {p.gamma for p in sim} == {0.75, 1.0, 1.5} and {p.d for p in sim} == {400}
    # six seeds per (γ, α): the extra grid keeps its own replicates (not the theory grid's one)
    reps = [q.params["rep"] for q in CLAIM.points("full", controls=False) if q.p.side == "simulation"]
    assert sorted(set(reps)) == list(range(6)) and len(reps) == 3 * 5 * 6
    assert all(p.alpha * p.d >= 2 and p.alpha <= 0.1 and p.lam <= 0.1 * p.alpha**0.5 for p in sim)
    assert {p.gamma for p in full if p.side == "theory"} == {0.75, 1.0, 1.5, 2.0}


def test_the_controls_state_evolution_is_the_tests(monkeypatch):
    calls = []
    real = sl._theory_metrics
    monkeypatch.setattr(sl, "_theory_metrics", lambda p: calls.append(p) or real(p))
    base = {"side": "theory", "alpha": 0.05, "d": 20, "gamma": 1.0, "lam": 1e-3, "nodes": 64}
    a, b = (
        CLAIM.run(Point(CLAIM.id, "quick", base | extra, 3, CLAIM.version, params_cls=CLAIM.params))
        for extra in ({"nodes": 64}, {"target_gamma_scale": 2.0})
    )
    assert a.metrics == b.metrics and len(calls) == 1


def test_scaling_simulation_point_is_a_paired_excess():
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


def test_the_level_is_reported_beside_the_exponent_and_does_not_decide():
    """The ERM's excess over the state evolution's, per n/d and over the window (docs/highdim.md C6, "The
    level"): a planted 1.2× offset with the same exponent is read back as 1.2 (seed noise 1% log: the mean
    of four seeds is within 1.5% of it), the verdict still holds (the rule reads exponents only), and the
    target errors of both sides and the strongest direction's share of the logit variance are reported."""
    from attnlab.highdim import power_law_spectrum, top_share

    sim = _sim(lambda x: 1.2 * _crossover(-0.5)(x), sigma=0.01)
    for r in sim:
        r.metrics["e0"] = 0.093
    th = _theory400(_crossover(-0.5))
    for r in th:
        r.metrics["e0"] = 0.0868
    v = CLAIM.decide(sim + th)
    assert v.status == "holds" and v.branch == "exponent"
    ratios = v.numbers[f"level_ratio_{NAME}"]
    assert len(ratios) == len(SIM_ALPHAS) and all(r == pytest.approx(1.2, rel=0.015) for r in ratios)
    assert v.numbers[f"level_ratio_window_{NAME}"] == pytest.approx(1.2, rel=0.015)
    assert v.numbers[f"sim_e0_{NAME}"] == pytest.approx(0.093)
    assert v.numbers[f"theory_e0_{NAME}"] == pytest.approx(0.0868)
    assert v.numbers[f"top_share_{NAME}"] == pytest.approx(top_share(power_law_spectrum(400, 1.0)))
    assert "excess 1.20× the state evolution's" in v.numbers["sim_summary"]
    # the control's rows (target drawn at 0.75 γ): the share is that of the target the ERM learns
    ctl = [Row(r.point_id, {**r.params, "target_gamma_scale": 0.75}, r.status, dict(r.metrics)) for r in sim]
    v = CLAIM.decide(ctl + th)
    assert v.numbers[f"top_share_{NAME}"] == pytest.approx(top_share(power_law_spectrum(400, 0.75)))
    # the theory lacks a simulated point: its ratio is None, the others stand
    v = CLAIM.decide(sim + [r for r in th if r.params["alpha"] != 0.08])
    assert v.numbers[f"level_ratio_{NAME}"][-1] is None
    assert v.numbers[f"level_ratio_{NAME}"][0] == pytest.approx(1.2, rel=0.015)
    # a point where no seed converged: its ratio is None, not NaN
    for r in sim:
        if r.params["alpha"] == 0.04:
            r.metrics["converged"] = False
    v = CLAIM.decide(sim + th)
    assert v.numbers[f"level_ratio_{NAME}"][3] is None
    assert v.numbers[f"level_ratio_{NAME}"][2] == pytest.approx(1.2, rel=0.015)
    # no theory at the ERM's d: no ratio, the simulation's e0 still reported
    v = CLAIM.decide(sim)
    assert f"level_ratio_{NAME}" not in v.numbers and v.numbers[f"sim_e0_{NAME}"] == pytest.approx(0.093)


def test_curve_names_parse_and_a_foreign_name_is_refused():
    from attnlab.claims.highdim._scaling_level import name_d_lam

    assert name_d_lam("g1.0_d400_lam0.001") == (400, 0.001)
    assert name_d_lam("g0.75_d800_lam1e-04") == (800, 1e-4)
    with pytest.raises(ValueError, match="name: expected a curve name"):
        name_d_lam("g1.0_d400_tuned")


def test_the_full_profile_maps_the_label_noise():
    # Δ is a knob of the full profile only: at Δ = 0.25 the ERM and the theory at its d fall like about −0.6
    # over the window (measured −0.58 … −0.62 and −0.614 at γ = 1), so that cell fails and the map depends
    assert CLAIM.knobs["noise"].values_for("full") == [0.25] and not CLAIM.knobs["noise"].values_for("quick")
    assert not any(p.cell for p in CLAIM.points("quick"))
    cell = {"cell": "noise=0.25", "noise": 0.25}
    rows = _sim(_crossover(-0.5)) + _theory400(_crossover(-0.5))
    steep = _sim(_crossover(-0.6)) + _theory400(_crossover(-0.6))
    rows += [Row(r.point_id, {**r.params, **cell}, r.status, r.metrics) for r in steep]
    v, test, cells = CLAIM.decide_map(rows, "full")
    assert test.status == "holds" and v.status == "depends"
    assert {(c.value, c.verdict.status) for c in cells} == {(0.5, "holds"), (0.25, "fails")}
