"""highdim.interpolation-threshold: the level crossing per d, its 1/d extrapolation, the prediction's
resolving power, the off-grid and one-d cases, and a real point."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.claims.highdim.interpolation_threshold import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim import FIGURES

A_INTERP = 0.15348210285908004
ALPHAS = (0.13, 0.145, 0.16, 0.175, 0.19, 0.205)


def _rows(shift=0.6, ds=(30, 50), seeds=2, lam=1e-5):
    # data loss = level · exp((α − α_c(d))/0.01): log-linear, so the crossing of the level is α_c(d)
    # exactly, with α_c(d) = α_interp + shift/d (a 1/d finite-size shift)
    level = 3 * lam
    rows = []
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
    # a threshold 10% above the prediction in the limit: fails
    high = [Row(r.point_id, r.params, "ok", {**r.metrics, "alpha_interp": A_INTERP / 1.1}) for r in _rows()]
    assert CLAIM.decide(high).status == "fails"
    assert FIGURES[CLAIM.id](_rows())["interpolation"].axes[0].get_xlabel()


def test_power_is_ten_percent():
    pw = resolving_power(CLAIM, _rows())
    # the gap is |measured/predicted − 1|: a prediction 5% low puts the measurement 5.3% above it (flips),
    # one 5% high puts it 4.8% below (holds)
    assert pw.flips["alpha_interp"] == {"+": 0.1, "-": 0.05}


def test_off_grid_and_single_d_are_outside():
    v = CLAIM.decide(_rows(shift=3.0))  # α_c(30) = 0.25: beyond the grid
    assert v.status == "inconclusive" and "grid" in v.regime
    v = CLAIM.decide(_rows(ds=(30,)))
    assert v.status == "inconclusive" and "one d" in v.regime


def test_grids_straddle_the_threshold():
    for prof in ("quick", "full"):
        pts = CLAIM.points(prof)
        al = sorted({p.p.alpha for p in pts})
        assert al[0] < 0.9 * A_INTERP and al[-1] > 1.3 * A_INTERP
        assert max(np.diff(al)) <= 0.1 * A_INTERP + 1e-12 and len({p.p.d for p in pts}) >= 2


def test_real_point_records_the_threshold():
    p = CLAIM.points("quick", overrides={"d": 8, "max_steps": 50})[0]
    m = CLAIM.run(p).metrics
    assert m["alpha_interp"] == pytest.approx(A_INTERP, rel=1e-6) and m["steps"] <= 50
    assert m["train_loss"] >= m["data_loss"] > 0
