"""highdim.interpolation-threshold: the state evolution's onset and the level crossing per d with its 1/d
extrapolation, the prediction's resolving power, the off-grid and one-d cases, and a real point."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.claims.highdim.interpolation_threshold import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim import FIGURES

A_INTERP = 0.15348210285908004
ALPHAS = (0.13, 0.145, 0.16, 0.175, 0.19, 0.205)


SE_ALPHAS = (0.13, 0.14, 0.16, 0.17, 0.18, 0.19, 0.2, 0.21)
SE_LAMS = (1e-6, 1e-7)
SIM_ALPHAS = (0.13, 0.15, 0.16, 0.17, 0.18, 0.19, 0.2)


def _theory_row(onset=A_INTERP, cross=A_INTERP):
    # the state evolution's data loss: 0.7 (α − α_c)³ above the onset at both λ̃ (in the λ̃ → 0 limit), and
    # below it a residual proportional to λ̃ (not in the limit), so the fit sees only the points above
    # at the simulations' λ̃ = 1e-5: the same log-linear rise as theirs, crossing the level 3λ̃ at ``cross``
    data = [[0.7 * (a - onset) ** 3 if a > onset else 3e-3 * lam for a in SE_ALPHAS] for lam in SE_LAMS]
    at_lam = [3e-5 * np.exp((a - cross) / 0.01) for a in SIM_ALPHAS]
    params = {"side": "theory", "se_alphas": SE_ALPHAS, "se_lams": SE_LAMS, "se_rtol": 0.05, "lam": 1e-5}
    params["se_sim_alphas"] = SIM_ALPHAS
    m = {"alpha_interp": A_INTERP, "se_data_loss": data, "se_lam_sigma": data, "se_converged": True}
    return Row("t", params, "ok", m | {"se_data_at_lam": at_lam})


def _rows(shift=0.6, ds=(30, 50), seeds=2, lam=1e-5, onset=A_INTERP):
    # data loss = level · exp((α − α_c(d))/0.01): log-linear, so the crossing of the level is α_c(d)
    # exactly, with α_c(d) = α_interp + shift/d (a 1/d finite-size shift)
    level = 3 * lam
    rows = [_theory_row(onset)]
    for d in ds:
        for rep in range(seeds):
            ac = A_INTERP + shift / d
            for a in ALPHAS:
                m = {"alpha_interp": A_INTERP, "data_loss": level * np.exp((a - ac) / 0.01)}
                rows.append(Row("x", {"alpha": a, "d": d, "rep": rep, "lam": lam, "level": level}, "ok", m))
    return rows


def test_extrapolated_crossing_decides():
    v = CLAIM.decide(_rows())
    assert v.status == "holds"
    # exact 1/d shift: the extrapolation returns α_interp to rounding
    assert v.numbers["alpha_measured"] == pytest.approx(A_INTERP, rel=1e-9)
    assert v.numbers["mean_crossing_per_d"][0] == pytest.approx(A_INTERP + 0.02, rel=1e-9)
    assert "extrapolated" in v.note
    # the simulations' crossing 12% below the state evolution's at their λ̃: fails
    rows = [r for r in _rows() if r.params.get("side") != "theory"] + [_theory_row(cross=1.12 * A_INTERP)]
    assert CLAIM.decide(rows).status == "fails"
    assert FIGURES[CLAIM.id](_rows())["interpolation"].axes[0].get_xlabel()


def test_state_evolution_onset_decides():
    v = CLAIM.decide(_rows())
    # an exact cubic onset: the fit returns it and its power to ~1e-8
    assert v.numbers["alpha_se"] == pytest.approx(A_INTERP, rel=1e-7)
    assert v.numbers["se_exponent"] == pytest.approx(3.0, rel=1e-5)
    assert v.numbers["se_alphas_used"] == [a for a in SE_ALPHAS if a > A_INTERP]
    # the state evolution 3% away from the closed form: fails, though the simulation agrees
    assert CLAIM.decide(_rows(onset=1.03 * A_INTERP)).status == "fails"
    assert CLAIM.decide(_rows(onset=1.015 * A_INTERP)).status == "holds"
    # fewer than three points in the limit: outside
    few = [r for r in _rows() if r.params.get("side") != "theory"]
    t = _theory_row()
    few.append(
        Row(
            "t",
            {**t.params, "se_rtol": 1e-12},
            "ok",
            {
                **t.metrics,
                "se_data_loss": [
                    [v * 1.1 for v in t.metrics["se_data_loss"][0]],
                    t.metrics["se_data_loss"][1],
                ],
            },
        )
    )
    assert CLAIM.decide(few).status == "inconclusive"
    assert CLAIM.decide([r for r in _rows() if r.params.get("side") != "theory"]).status == "inconclusive"


def test_power_is_five_percent():
    pw = resolving_power(CLAIM, _rows())
    # the state evolution's onset equals α_interp: a prediction 2% low puts it 2.04% above (flips at the
    # 2% tolerance), one 2% high puts it 1.96% below (holds), 5% high 4.8% below (flips)
    assert pw.flips["alpha_interp"] == {"+": 0.05, "-": 0.02}
    # the simulations against the state evolution's crossing at 10%: 10% low gives 11.1% (flips), 10% high
    # 9.1% (holds), 25% high 20% (flips)
    assert pw.flips["alpha_cross_se"] == {"+": 0.25, "-": 0.1}


def test_off_grid_and_single_d_are_outside():
    v = CLAIM.decide(_rows(shift=3.0))  # α_c(30) = 0.25: beyond the grid
    assert v.status == "inconclusive" and "grid" in v.regime
    v = CLAIM.decide(_rows(ds=(30,)))
    assert v.status == "inconclusive" and "one d" in v.regime


def test_grids_straddle_the_threshold():
    for prof in ("quick", "full"):
        pts = [p for p in CLAIM.points(prof) if p.p.side == "simulation"]
        th = [p for p in CLAIM.points(prof) if p.p.side == "theory"]
        assert len(th) == 1 and min(th[0].p.se_alphas) < 0.9 * A_INTERP < 1.1 * A_INTERP < max(
            th[0].p.se_alphas
        )
        al = sorted({p.p.alpha for p in pts})
        assert al[0] < 0.9 * A_INTERP and al[-1] > 1.3 * A_INTERP
        assert max(np.diff(al)) <= 0.1 * A_INTERP + 1e-12 and len({p.p.d for p in pts}) >= 2


def test_real_point_records_the_threshold():
    p = CLAIM.points("quick", overrides={"d": 8, "max_steps": 50})[0]
    m = CLAIM.run(p).metrics
    assert m["alpha_interp"] == pytest.approx(A_INTERP, rel=1e-6) and m["steps"] <= 50
    assert m["train_loss"] >= m["data_loss"] > 0
