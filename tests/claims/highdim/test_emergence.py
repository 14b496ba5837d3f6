"""highdim.emergence: the share of each mode's error drop after its outlier leaves the bulk, theory and ERM;
modes the theory does not isolate left undecided (inconclusive), the exit α as a prediction, the figure, and
a real point."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.claims.highdim.emergence import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.highdim.outliers import share_after
from attnlab.report.figures.highdim import FIGURES

ALPHAS = (0.02, 0.03, 0.045, 0.07, 0.1, 0.15, 0.22, 0.33)
COUNTS = (0, 1, 1, 2, 2, 3, 3, 3)  # mode k leaves the bulk between ALPHAS[i−1] and ALPHAS[i]


def _curve(start: int, late: int = 0) -> np.ndarray:
    # error 1 up to grid index ``start`` (+ ``late``), then halving at every step
    i = np.arange(len(ALPHAS))
    return np.where(i < start + late, 1.0, 0.5 ** (i - start - late + 1))


def _rows(theory_starts=(1, 3, 5), sim_shift=0):
    rows = []
    th = np.stack([_curve(s) for s in theory_starts], axis=1)  # (α, modes)
    sim = np.stack([_curve(s, sim_shift) for s in theory_starts], axis=1)
    for j, (a, k) in enumerate(zip(ALPHAS, COUNTS)):
        m = {"outliers_theory": k, "outliers_sim": k, "edge": 2.0, "test_error_theory": 0.3 / (1 + 3 * a)}
        m["test_error_sim"] = m["test_error_theory"]
        arrays = {"mode_errors_theory": th[j], "mode_errors_sim": sim[j], "eigenvalues": np.zeros(3)}
        rows.append(Row("x", {"alpha": a, "d": 40, "rep": 0}, "ok", m, None, 0.0, arrays))
    return rows


def test_drops_after_the_exits_hold_and_early_drops_fail():
    v = CLAIM.decide(_rows())
    assert v.status == "holds" and v.numbers["isolated"] == 3
    # the exit sits half way (in ln α) between the first two α, where the curve is at (1 + 0.5)/2; the
    # curve ends at 0.5^7
    last = 0.5**7
    assert v.numbers["share_theory_1"] == pytest.approx((0.75 - last) / (1 - last))
    # the ERM's modes dropping two grid steps before the theory's: the share after the exit collapses
    assert CLAIM.decide(_rows(sim_shift=-2)).status == "fails"
    assert FIGURES[CLAIM.id](_rows())["emergence"].axes[0].get_ylabel()


def test_modes_the_theory_recovers_inside_the_bulk_are_inconclusive():
    # the theory's modes 2 and 3 fall two steps before their outliers leave the bulk
    v = CLAIM.decide(_rows(theory_starts=(1, 1, 3)))
    assert v.status == "inconclusive" and "not isolated" in v.regime
    assert v.numbers["shares_theory"][1] < 0.5


def test_the_exit_prediction_can_flip_it():
    # exits placed two grid steps later (×2.2 in α) leave the drops before them: the verdict flips by 50%
    pw = resolving_power(CLAIM, _rows())
    assert pw.flips["alpha_out"]["+"] is not None and not pw.cannot_fail


def test_share_after_by_hand():
    # values 1, 0.6, 0.2 on α = 1, 2, 4: at α = 2 the fall still to come is 0.4 of 0.8; at √2 (half way in
    # ln α) the interpolated value is 0.8, so 0.6 of the fall remains
    assert share_after([1.0, 2.0, 4.0], [1.0, 0.6, 0.2], 2.0) == pytest.approx(0.5)
    assert share_after([1.0, 2.0, 4.0], [1.0, 0.6, 0.2], math.sqrt(2)) == pytest.approx(0.75)
    assert math.isnan(share_after([1.0, 2.0], [1.0, 1.0], 1.5))
    with pytest.raises(ValueError, match="alphas"):
        share_after([2.0, 1.0], [1.0, 0.5], 1.5)


def test_real_point():
    ov = {"d": 20, "max_steps": 30, "draws": 2, "nodes": 256, "alpha": 0.2}
    p = CLAIM.points("quick", overrides=ov)[0]
    res = CLAIM.run(p)
    ev = res.arrays["eigenvalues"]
    assert res.metrics["outliers_sim"] == int(np.sum(ev > res.metrics["edge"]))
    assert res.metrics["outliers_theory"] >= 1
    e = res.arrays["mode_errors_sim"]
    assert e.shape == (3,) and np.all(e >= 0) and res.arrays["mode_errors_theory"].shape == (3,)
