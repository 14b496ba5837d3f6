"""highdim.perfect-recovery: the large-d recovery point (a χ²-tested a + b/d over three d) against the
state evolution's at the same λ̃ within 2 standard errors, the side by side with the unfactorised student, no
recovery below the Bayes-optimal threshold, the closed form as a numerics part, resolving power, and a real
point's thresholds."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.claims.highdim.perfect_recovery import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim import FIGURES
from formtools import STEPS, crossing_fit_by_hand, first_flips

APR, ABO, AUNF = 0.21108749109275288, 0.1875, 0.25
ALPHAS = (0.17, 0.19, 0.21, 0.23, 0.25)


SE_ALPHAS = (0.15, 0.16, 0.17, 0.18, 0.19, 0.22, 0.23)
SE_LAMS = (1e-6, 1e-7)
SIM_ALPHAS = (0.2, 0.21, 0.22, 0.23, 0.24, 0.25)
JITTER = (-0.003, 0.0, 0.003)  # per-seed shifts of the recovery point


def _theory_row(onset=APR, cross=APR, width=0.01, scr=(-0.0005, 0.0, 0.0005)):
    # the state evolution at λ̃ → 0: 14 (α_c − α)² below the onset at both λ̃ (in the limit), above it an
    # error proportional to λ̃ (not in the limit); at the simulations' λ̃ the same log-linear fall as theirs,
    # through the level at ``cross + scr[k]`` on scramble k
    err = [[14 * (onset - a) ** 2 if a < onset else 1e-2 * lam for a in SE_ALPHAS] for lam in SE_LAMS]
    at_lam = [[1e-3 * np.exp(-(a - cross - e) / width) for a in SIM_ALPHAS] for e in scr]
    params = {"side": "theory", "se_alphas": SE_ALPHAS, "se_lams": SE_LAMS, "se_rtol": 0.05}
    params |= {"se_sim_alphas": SIM_ALPHAS, "lam": 1e-4, "factorised": True}
    m = {"alpha_pr": APR, "alpha_bo": ABO, "alpha_pr_unfactorised": AUNF, "se_converged": True}
    m |= {"se_error_at_lam_scrambles": at_lam, "se_error_at_lam": np.mean(at_lam, axis=0).tolist()}
    return Row("t", params, "ok", m | {"se_test_error": err})


def _rows(shift=0.1, ds=(20, 30, 40), unf_error=0.06, width=0.01, limit=APR, jitter=JITTER, onset=APR):
    # noiseless error = level · exp(−(α − α_c(d))/width): log-linear, falling through the level at
    # α_c(d) = limit + shift/d + the seed's jitter exactly (limit = α_PR by default, and the state
    # evolution's crossing at the simulations' λ̃ is put at α_PR too)
    th = {"alpha_pr": APR, "alpha_bo": ABO, "alpha_pr_unfactorised": AUNF}
    rows = [_theory_row(onset)]
    for d in ds:
        for rep, j in enumerate(jitter):
            ac = limit + shift / d + j
            for a in ALPHAS:
                m = th | {"test_error": 1e-3 * np.exp(-(a - ac) / width)}
                par = {"alpha": a, "d": d, "rep": rep, "factorised": True, "level": 1e-3, "lam": 1e-4}
                rows.append(Row("x", par, "ok", m))
        rows.append(
            Row(
                "x",
                {"alpha": 0.23, "d": d, "rep": 0, "factorised": False, "level": 1e-3, "lam": 1e-4},
                "ok",
                th | {"test_error": unf_error},
            )
        )
    return rows


def test_holds_when_all_readings_agree():
    v = CLAIM.decide(_rows())
    assert v.status == "holds" and v.branch == "crossing gap" and v.parts == {"closed-form": "holds"}
    assert v.numbers["alpha_measured"] == pytest.approx(APR, rel=1e-9)
    # an exact quadratic vanishing: the fit returns the onset and the power to ~1e-7
    assert v.numbers["alpha_se"] == pytest.approx(APR, rel=1e-7)
    assert v.numbers["se_exponent"] == pytest.approx(2.0, rel=1e-5)
    assert v.numbers["alpha_cross_se"] == pytest.approx(APR, rel=1e-9)
    # the band: 2 √(se(a)² + se_SE²), se_SE = 0.0005/√3 over the three scrambles
    _, se_a = crossing_fit_by_hand({d: [APR + 0.1 / d + j for j in JITTER] for d in (20, 30, 40)})
    assert v.band == pytest.approx(2 * np.hypot(se_a, 0.0005 / np.sqrt(3)) / APR, rel=1e-9)
    assert v.numbers["side_by_side_ratio_min"] > 10 and v.numbers["no_recovery_below_bo"]
    assert "between the thresholds" in v.note
    assert FIGURES[CLAIM.id](_rows())["perfect_recovery"].axes[0].get_xlabel()
    # a 2.4% finite-size shift at d = 20 (0.1/d): every finite-size form's limit within its tolerance
    assert [f[3] for f in v.numbers["crossing_forms"].values()] == [True, True, True]


def test_a_form_dependent_crossing_decides_nothing_unless_another_reading_fails():
    # a 14% shift at d = 20 (0.6/d): a + b/√d and a + b/d² put the large-d recovery point 10% below and 5%
    # above the state evolution's, beyond their 2 standard errors, while a + b/d recovers it exactly
    v = CLAIM.decide(_rows(shift=0.6))
    assert v.status == "inconclusive" and "form-dependent" in v.regime
    assert [f[3] for f in v.numbers["crossing_forms"].values()] == [False, True, False]
    # the unfactorised student as good as the factorised one: that reading fails whatever the form
    v = CLAIM.decide(_rows(shift=0.6, unf_error=1e-3))
    assert v.status == "fails" and v.branch == "side by side"


def test_each_reading_can_fail_it():
    # the unfactorised student as good as the factorised one between the thresholds
    v = CLAIM.decide(_rows(unf_error=1e-3))
    assert v.status == "fails" and v.branch == "side by side"
    # a recovery point 10% below α_PR (at 0.19, still above α_BO): the crossing reading fails alone
    v = CLAIM.decide(_rows(shift=0.0, limit=0.19))
    assert v.status == "fails" and v.branch == "crossing gap" and v.numbers["no_recovery_below_bo"]
    # the state evolution's threshold 3% above the closed form: the numerics part fails, the verdict holds
    v = CLAIM.decide(_rows(onset=1.03 * APR))
    assert v.status == "holds" and v.parts == {"closed-form": "fails"}
    assert CLAIM.decide(_rows(onset=1.015 * APR)).parts == {"closed-form": "holds"}
    # without the theory row, with two seeds, with two d: inconclusive
    assert CLAIM.decide([r for r in _rows() if r.params.get("side") != "theory"]).status == "inconclusive"
    assert "seed" in CLAIM.decide(_rows(jitter=(-0.003, 0.003))).regime
    assert ">= 3" in CLAIM.decide(_rows(ds=(30, 40))).regime
    rows = _rows()
    rows[0] = Row("t", rows[0].params, "ok", {**rows[0].metrics, "se_unconverged_at_lam": [0.22]})
    assert "did not converge" in CLAIM.decide(rows).regime


def test_power_on_the_crossing_and_alpha_bo():
    pw = resolving_power(CLAIM, _rows())
    v = CLAIM.decide(_rows())
    # the estimate along a + b/d sits on the state evolution's crossing; a prediction moved by ε stops holding
    # at the first ε that leaves the band of one finite-size form (each form's limit and tolerance)
    first = first_flips(v.numbers["crossing_forms"], APR, v.numbers["alpha_cross_se_stderr"])
    assert pw.flips["alpha_cross_se"] == first and first["+"] <= min(e for e in STEPS if e > v.band)
    # a higher α_BO flips it once a recovered α (0.23 here) falls below the perturbed α_BO
    assert pw.flips["alpha_bo"]["+"] is not None and not pw.cannot_fail and "alpha_pr" not in pw.flips


def test_off_grid_is_outside_and_the_grids_straddle():
    v = CLAIM.decide(_rows(shift=3.0))
    assert v.status == "inconclusive" and "grid" in v.regime
    for prof in ("quick", "full"):
        pts = [p.p for p in CLAIM.points(prof) if p.p.side == "simulation"]
        (th,) = [p.p for p in CLAIM.points(prof) if p.p.side == "theory"]
        assert min(th.se_alphas) < ABO < APR < max(th.se_alphas) and th.noise == 0
        assert th.lam == pts[0].lam  # the state evolution's curve at the simulations' λ̃
        fac = sorted({p.alpha for p in pts if p.factorised})
        assert fac[0] < ABO and fac[-1] >= 1.15 * APR and len({p.d for p in pts}) >= 3
        assert {p.alpha for p in pts if not p.factorised} == {0.23} and APR < 0.23 < AUNF


def test_real_point_thresholds():
    from attnlab.highdim import perfect_recovery_threshold

    p = CLAIM.points("quick", overrides={"d": 8, "max_steps": 30})[0]
    m = CLAIM.run(p).metrics
    # ᾱ = α (T² + T − 2)/2 = 2α at T = 2
    assert m["alpha_pr"] == pytest.approx(perfect_recovery_threshold(0.5) / 2, rel=1e-12)
    assert (m["alpha_bo"], m["alpha_pr_unfactorised"]) == pytest.approx((0.375 / 2, 0.25), rel=1e-12)
