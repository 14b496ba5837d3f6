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


def _train_row(
    setting: list, rep: int, init: float, trained: float, control: str = "", slope: float | None = None
) -> Row:
    """A trained point whose HDI path runs linearly from ``init`` to ``trained`` over 40 steps (slope per
    100 steps as the claim computes it, unless ``slope`` plants a path that disagrees with the ends)."""
    end = trained + 0.002 * rep
    m = {"hdi_init": init, "hdi_trained": end, "hdi_null": 0.75, "hdi_null_sd": 0.01, "z_trained": 1.0}
    m |= {"val_init": 1.0, "val_trained": 0.8, "best_step": 10}
    m["hdi_slope_per_100"] = (100 * (end - init) / 40 if slope is None else slope) + 0.001 * rep
    steps = np.arange(0, 41, 10, dtype=float)
    arrays = {"path_steps": steps, "hdi_path": init + (end - init) * steps / 40}
    p = {"setting": setting, "rep": rep}
    p = {**p, "control": control} if control else p
    return Row(f"{control}{sorted(p.items())}", p, "ok", m, arrays=arrays)


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
    # the ends rise but the path falls on average (a late jump after a long decline): the two
    # readings disagree, so the trajectory does not decide
    jump = [_train_row(rad, r, 0.7, 0.8, slope=-0.05) for r in range(4)]
    vj = TRAINING_ORTH.decide(jump)
    assert vj.status == "inconclusive"
    g = next(v for v in vj.numbers.values() if isinstance(v, dict))
    assert g["change_ci95"][0] > 0 and g["slope_per_100_ci95"][1] < 0


def test_training_path_slope_is_the_least_squares_slope_of_the_recorded_hdi():
    small = {"steps": 6, "checkpoint_every": 2, "setting": [[8, 3, 2, "radial", 0.5, 60, 1.5]]}
    p = TRAINING_ORTH.points("quick", overrides=small, controls=False)[0]
    res = TRAINING_ORTH.run(p)
    steps, path = res.arrays["path_steps"], res.arrays["hdi_path"]
    assert steps[0] == 0 and steps[-1] <= 6 and np.all(np.diff(steps) > 0)
    assert path[0] == pytest.approx(res.metrics["hdi_init"], abs=1e-12)
    # independent computation: the closed-form least-squares slope of (step, HDI) over the checkpoints
    # before the early-stopped step and that step's own HDI
    best = res.metrics["best_step"]
    x = np.append(steps[steps < best], best)
    y = np.append(path[steps < best], res.metrics["hdi_trained"])
    if best > 0:
        xc, yc = x - x.mean(), y - y.mean()
        assert res.metrics["hdi_slope_per_100"] == pytest.approx(100 * (xc @ yc) / (xc @ xc), rel=1e-9)
    else:
        assert np.isnan(res.metrics["hdi_slope_per_100"])
    assert res.metrics["hdi_null"] == pytest.approx(1 - 2 / 8)  # random-subspace null 1 − d_k/d


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
    assert resolving_power(SINGLE_HEAD, rows).label.startswith("±5%")
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


# ------------------------------------------------------------------------------- controls that decide
def test_budget_law_memory_capped_control_fails_by_the_claims_own_rule():
    ns = [100, 300, 1000, 3000]
    grow = [_budget_row(n, r, 0.5 * math.log(n) * (1 + 0.01 * (-1) ** r)) for n in ns for r in range(3)]
    # the capped memory: the same problem at every n, d_k* scattered around one value
    flat = [
        _row(
            {**r.params, "n_cap": 100},
            {**r.metrics, "dk_star": 2.5 * (1 + 0.05 * ((i % 3) - 1))},
            "memory-capped",
        )
        for i, r in enumerate(grow)
    ]
    assert BUDGET_LAW.decide_control("memory-capped", flat).status == "fails"
    power = resolving_power(BUDGET_LAW, grow + flat)
    assert power.controls["memory-capped"]["as_designed"] and not power.cannot_fail
    assert "controls 1/1" in power.label


def test_budget_law_caps_the_memory_of_a_real_point():
    small = {"reps": 2, "queries": 10, "n": 300, "D": 4, "max_d_k": 2}
    p = BUDGET_LAW.points("quick", overrides=small | {"c": 2.0}, controls=True)
    capped = [q for q in p if q.control == "memory-capped"][0]
    m = BUDGET_LAW.run(capped).metrics
    assert m["n_used"] == 100 and m["d_k"] == [1, 2]
    assert BUDGET_LAW.run([q for q in p if not q.control][0]).metrics["n_used"] == 300


def test_heads_linear_three_way_rule_against_linear_and_square_root_growth():
    def rows(expo: float, jitter: float, seeds: int = 4) -> list[Row]:
        # H* = D^expo exactly (d_k* = D^{1 − expo}), with a multiplicative jitter per seed
        return [
            _budget_row(1000, r, D ** (1 - expo) * (1 + jitter * (-1) ** (r + D)), D=D)
            for D in (6, 8, 12, 16)
            for r in range(seeds)
        ]

    lin = HEADS_LINEAR.decide(rows(1.0, 0.02))
    assert lin.status == "holds" and lin.numbers["slope"] == pytest.approx(1.0, abs=0.02)
    sqrt = HEADS_LINEAR.decide(rows(0.5, 0.02))
    assert sqrt.status == "fails"  # the band excludes 1
    wide = HEADS_LINEAR.decide(rows(0.75, 0.4))
    assert wide.status == "inconclusive" and "seeds" in wide.regime
    # seeds_needed: the band shrinks like 1/√seeds until it leaves the farther of 1 and 0.5
    n = wide.numbers
    far = max(abs(n["slope"] - 1), abs(n["slope"] - 0.5))
    assert n["seeds_needed"] == math.ceil(4 * (n["band"] / far) ** 2) and n["seeds_needed"] > 4
    # a tight band: the linear prediction moved by a few percent either way leaves it
    power = resolving_power(HEADS_LINEAR, rows(1.0, 0.02))
    assert all(power.flips["exponent"][s] is not None and power.flips["exponent"][s] <= 0.05 for s in "+-")


def test_many_small_heads_pure_noise_control_holds_so_the_failing_verdict_could_have_held():
    large = [_budget_row(3000, r, 7.0 * (1 + 0.05 * r)) for r in range(4)]
    noise = [
        _row({**r.params, "target": "zero"}, {**r.metrics, "dk_star": 1.0, "dk_best": 1}, "pure-noise")
        for r in large
    ]
    power = resolving_power(MANY_SMALL, large + noise)
    assert power.base == "fails" and power.controls["pure-noise"]["got"] == "holds"
    assert not power.cannot_fail and "controls 1/1" in power.label


def test_single_head_dot_kernel_control_fails_when_the_variance_stays_put():
    def rows(rate: float, control: str = "") -> list[Row]:
        out = []
        for c in (3.0, 6.0):
            h = 2**0.25 / c
            for n in (2000, 8000, 32000):
                for rep in range(2):
                    nh = n * h**2
                    V = 0.5 * nh**rate * (1 + 0.01 * (-1) ** rep)
                    m = {"variance": V, "n_h": nh, "variance_over_noise": V, "bandwidth": h, "bias2": 0.0}
                    params = {"n": n, "c": c, "rep": rep} | ({"kernel": "dot"} if control else {})
                    out.append(_row(params, m, control))
        return out

    # the dot kernel's variance barely moves with n (about n^-0.1, as a direct run shows)
    ctrl = rows(-0.1, "dot-kernel")
    assert SINGLE_HEAD.decide_control("dot-kernel", ctrl).status == "fails"
    power = resolving_power(SINGLE_HEAD, rows(-1.0) + ctrl)
    assert power.base == "holds" and power.controls["dot-kernel"]["as_designed"]
    assert "controls 1/1" in power.label


def test_heads_linear_shared_heads_control_holds_so_a_failing_verdict_could_have_held():
    # the test setting grows like √D; identical heads keep d_k* fixed, so H* = D/d_k* is linear in D
    sqrt = [
        _budget_row(1000, r, D**0.5 * (1 + 0.03 * (-1) ** (r + D)), D=D)
        for D in (6, 8, 12, 16)
        for r in range(4)
    ]
    shared = [
        _row(
            {**r.params, "layout": "shared"},
            {**r.metrics, "dk_star": 2.0 * (1 + 0.03 * (-1) ** i)},
            "shared-heads",
        )
        for i, r in enumerate(sqrt)
    ]
    assert HEADS_LINEAR.decide(sqrt).status == "fails"
    assert HEADS_LINEAR.decide_control("shared-heads", shared).status == "holds"
    power = resolving_power(HEADS_LINEAR, sqrt + shared)
    assert power.base == "fails" and power.controls["shared-heads"]["as_designed"]
    assert not power.cannot_fail and "controls 1/1" in power.label
