"""Verdicts of the budget, head-count, training and single-head claims of paper A on constructed rows:
each decides (a perturbed prediction flips it, or a control comes out as designed), and is inconclusive
where its setting cannot resolve the statement."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.claims.ensemble.budget_law import CLAIM as BUDGET_LAW
from attnlab.claims.ensemble.heads_linear_in_budget import CLAIM as HEADS_LINEAR
from attnlab.claims.ensemble.many_small_heads import CLAIM as MANY_SMALL
from attnlab.claims.ensemble.single_head_smoother import CLAIM as SINGLE_HEAD
from attnlab.claims.ensemble.training_orthogonalises import CLAIM as TRAINING_ORTH
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row


def _row(params: dict, metrics: dict, control: str = "") -> Row:
    p = {**params, "control": control} if control else dict(params)
    return Row(f"{control}{sorted(p.items())}", p, "ok", metrics)


def _budget_row(n: int, rep: int, dk_star: float, D: int = 16, c: float = 2.0, best: int = 4) -> Row:
    m = {"dk_star": dk_star, "dk_best": best, "dk_min": 1, "dk_max": 8, "d_k": [1, 2, 4, 8]}
    m["mse_by_split"] = [1.0, 0.9, 0.8, 0.95]
    return _row({"n": n, "rep": rep, "D": D, "d": 16, "c": c}, m)


def test_budget_law_decides_logarithmic_growth_and_labels_the_summary_reading():
    p0 = 2 / (4 + 16)
    ns = [100, 1000, 10_000, 100_000]
    rows = [_budget_row(n, r, 0.5 * math.log(n) * (1 + 0.01 * (-1) ** r)) for n in ns for r in range(3)]
    v = BUDGET_LAW.decide(rows)
    g = v.numbers["D=16, d=16, c=2.0"]
    assert v.status == "holds" and g["fit_exponent"] == pytest.approx(1.0, abs=0.01)
    assert g["summary_reading"] == "excluded"
    power = resolving_power(BUDGET_LAW, rows)
    assert power.flips["log_exponent"]["+"] is not None and power.flips["log_exponent"]["+"] <= 0.1
    # d_k* following the summary's (log n)^0.1 instead: logarithmic growth is excluded
    slow = [
        _budget_row(n, r, 2.0 * math.log(n) ** p0 * (1 + 0.002 * (-1) ** r)) for n in ns for r in range(3)
    ]
    vs = BUDGET_LAW.decide(slow)
    assert vs.status == "fails" and vs.numbers["D=16, d=16, c=2.0"]["summary_reading"] == "consistent"
    # a noisy group cannot tell log n from (log n)^0.1: inconclusive with the reason
    noisy = [_budget_row(n, r, 0.5 * math.log(n) * (1 + 0.6 * (-1) ** (r + n))) for n in ns for r in range(3)]
    assert BUDGET_LAW.decide(noisy).status == "inconclusive"
    # optima on the divisor grid's edge are set aside: only two interior n left -> inconclusive
    edge = [_budget_row(n, r, 1.0, best=1) for n in ns[:2] for r in range(3)] + rows[6:]
    ve = BUDGET_LAW.decide(edge)
    assert ve.status == "inconclusive" and ve.numbers["D=16, d=16, c=2.0"]["n_on_grid_edge"] == [100, 1000]


def test_heads_linear_flips_with_its_exponent_and_is_inconclusive_when_unresolved():
    rows = [_budget_row(1000, r, 4.0 * (1 + 0.01 * r), D=D) for D in (8, 12, 16) for r in range(3)]
    v = HEADS_LINEAR.decide(rows)
    assert v.status == "holds" and v.numbers["slope"] == pytest.approx(1.0, abs=1e-9)
    assert resolving_power(HEADS_LINEAR, rows).label.startswith("±")
    noisy = [
        _budget_row(1000, r, 4.0 * (1 + 0.5 * (-1) ** (r + D)), D=D) for D in (8, 12, 16) for r in range(3)
    ]
    assert HEADS_LINEAR.decide(noisy).status == "inconclusive"


def test_many_small_heads_against_the_square_root_threshold():
    small = [_budget_row(3000, r, 2.0 * (1 + 0.05 * r)) for r in range(4)]
    assert MANY_SMALL.decide(small).status == "holds"
    large = [_budget_row(3000, r, 7.0 * (1 + 0.05 * r)) for r in range(4)]
    assert MANY_SMALL.decide(large).status == "fails"
    assert resolving_power(MANY_SMALL, small).flips["threshold"]["-"] is not None


def _train_row(setting: list, rep: int, init: float, trained: float, control: str = "") -> Row:
    m = {"hdi_init": init, "hdi_trained": trained + 0.002 * rep, "hdi_null": 0.75, "z_trained": 1.0}
    m |= {"val_init": 1.0, "val_trained": 0.8, "best_step": 10}
    return _row({"setting": setting, "rep": rep}, m, control)


def test_training_orthogonalises_per_target_and_its_controls():
    rad, bump = [8, 3, 2, "radial", 0.5, 400, 1.5], [8, 3, 2, "bump", 0.5, 400, 1.5]
    up = [_train_row(s, r, 0.7, 0.8) for s in (rad, bump) for r in range(4)]
    assert TRAINING_ORTH.decide(up).status == "holds"
    mixed = [_train_row(rad, r, 0.7, 0.8) for r in range(4)] + [
        _train_row(bump, r, 0.7, 0.6) for r in range(4)
    ]
    assert TRAINING_ORTH.decide(mixed).status == "fails"
    ctrl = [_train_row(rad, r, 0.7, 0.95, "penalised") for r in range(4)]
    ctrl += [_train_row(rad, r, 1.0, 0.9, "orthogonal-start") for r in range(4)]
    power = resolving_power(TRAINING_ORTH, mixed + ctrl)
    assert power.label == "controls 2/2" and not power.cannot_fail


def test_single_head_variance_rate_flips_with_a_perturbed_nw_rate():
    rows = []
    for c in (3.0, 6.0):
        h = 2**0.25 / c
        for n in (500, 2000, 8000):
            for rep in range(2):
                nh = n * h**2
                V = 0.5 / nh * (1 + 0.01 * (-1) ** rep)
                rows.append(
                    _row(
                        {"n": n, "c": c, "rep": rep},
                        {"variance": V, "n_h": nh, "variance_over_noise": V, "bandwidth": h, "bias2": 0.0},
                    )
                )
    v = SINGLE_HEAD.decide(rows)
    assert v.status == "holds" and v.numbers["rate"] == pytest.approx(-1.0, abs=0.01)
    assert resolving_power(SINGLE_HEAD, rows).label == "±5%"
    steep = [_row(r.params, {**r.metrics, "variance": r.metrics["variance"] ** 1.3}) for r in rows]
    assert SINGLE_HEAD.decide(steep).status == "fails"


def test_single_head_real_point_has_only_variance():
    p = SINGLE_HEAD.points("quick", overrides={"n": 200, "reps": 4, "queries": 20})[0]
    m = SINGLE_HEAD.run(p).metrics
    # f = 0: the bias is the Monte Carlo mean of the noise average, small against the variance
    assert 0 < m["variance"] < 0.1 and m["bias2"] < m["variance"]
    assert m["n_h"] == pytest.approx(200 * (2**0.25 / p["c"]) ** 2)
    assert np.isfinite(m["variance_over_noise"])


def test_figures_of_the_new_claims_draw_from_rows():
    import matplotlib

    matplotlib.use("Agg")
    from attnlab.report.figures.ensemble import FIGURES

    budget = [_budget_row(1000, r, 4.0, D=D) for D in (8, 16) for r in range(2)]
    rad = [8, 3, 2, "radial", 0.5, 400, 1.5]
    train = [_train_row(rad, r, 0.7, 0.8) for r in range(2)] + [
        _train_row(rad, 0, 1.0, 0.9, "orthogonal-start")
    ]
    for cid, rows in [
        (HEADS_LINEAR.id, budget),
        (MANY_SMALL.id, budget),
        (TRAINING_ORTH.id, train),
    ]:
        figs = FIGURES[cid](rows)
        assert figs and all(ax.get_ylabel() for f in figs.values() for ax in f.axes)
