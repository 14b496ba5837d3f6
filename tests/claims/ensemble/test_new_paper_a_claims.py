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


def _budget_row(
    n: int,
    rep: int,
    dk_star: float,
    D: int = 16,
    c: float = 2.0,
    best: int = 4,
    d: int = 16,
    control: str = "",
) -> Row:
    """A budget sweep whose MSE by split is a parabola in log d_k with its vertex at ``dk_star`` (the
    pooled curve of several such rows then has its vertex at the geometric mean of their d_k*)."""
    ks = [k for k in range(1, D + 1) if D % k == 0 and k < d]
    m = {"dk_star": dk_star, "dk_best": best, "dk_min": ks[0], "dk_max": ks[-1], "d_k": ks}
    m["mse_by_split"] = [0.5 + (math.log(k) - math.log(dk_star)) ** 2 for k in ks]
    return _row({"n": n, "rep": rep, "D": D, "d": d, "c": c}, m, control)


def _jitter(D: int, rep: int, size: float) -> float:
    """A reproducible multiplicative jitter of one (budget, seed): exp(size · z), z standard normal."""
    return math.exp(size * np.random.default_rng([D, rep]).standard_normal())


def test_budget_law_tells_log_growth_from_a_power_of_n_by_the_curvature():
    ns = [100, 300, 1000, 3000, 10_000]

    def rows(law, jitter: float) -> list[Row]:
        return [_budget_row(n, r, law(n) * (1 + jitter * (-1) ** r)) for n in ns for r in range(4)]

    # d_k* = 0.6 log n exactly (up to a tiny jitter): the log law's bend is seen, a power of n excluded
    log = rows(lambda n: 0.6 * math.log(n), 0.001)
    v = BUDGET_LAW.decide(log)
    g = v.numbers["D=16, d=16, c=2.0"]
    assert v.status == "holds" and v.branch == "curvature"
    assert g["log_exponent_p"] == pytest.approx(1.0, abs=0.01) and g["summary_reading"] == "excluded"
    # independent computation of the curvature: numpy's quadratic fit of log d_k* in centred log n
    x = np.log([r.params["n"] for r in log])
    y = np.log([r.metrics["dk_star"] for r in log])
    assert g["curvature"] == pytest.approx(np.polyfit(x - x.mean(), y, 2)[0], rel=1e-9)
    assert g["likelihood_ratio_log_over_power"] > 0
    # an exact power n^0.2 (its slope in log log n is about 1.2, as log growth's would be): fails
    vp = BUDGET_LAW.decide(rows(lambda n: 1.5 * n**0.2, 0.001))
    assert vp.status == "fails" and vp.branch == "curvature"
    assert vp.numbers["D=16, d=16, c=2.0"]["power_exponent_a"] == pytest.approx(0.2, abs=0.001)
    # the log law's predicted curvature moved by a few percent leaves the tight band: it could have failed
    power = resolving_power(BUDGET_LAW, log)
    assert min(e for e in power.flips["log_curvature"].values() if e) <= 0.1
    # a noisy group cannot tell them apart: inconclusive, with the n range a design like it would need
    noisy = BUDGET_LAW.decide(rows(lambda n: 0.6 * math.log(n), 0.15))
    gn = noisy.numbers["D=16, d=16, c=2.0"]
    assert noisy.status == "inconclusive" and gn["n_needed"] > 10_000 and "separate" in gn["reason"]
    # optima on the divisor grid's edge are set aside: only two interior n left -> inconclusive
    edge = [_budget_row(n, r, 1.0, best=1) for n in ns[:3] for r in range(3)] + log[12:]
    ve = BUDGET_LAW.decide(edge)
    assert ve.status == "inconclusive" and ve.numbers["D=16, d=16, c=2.0"]["n_on_grid_edge"] == ns[:3]


def test_heads_linear_flips_with_its_exponent_and_is_inconclusive_when_unresolved():
    rows = [_budget_row(1000, r, 2.0 * (1 + 0.01 * r), D=D, d=32) for D in (8, 12, 16) for r in range(3)]
    v = HEADS_LINEAR.decide(rows)
    assert v.status == "holds" and v.numbers["slope"] == pytest.approx(1.0, abs=1e-9)
    assert resolving_power(HEADS_LINEAR, rows).label.startswith("±")
    noisy = [_budget_row(1000, r, 2.0 * _jitter(D, r, 0.5), D=D, d=32) for D in (8, 12, 16) for r in range(3)]
    assert HEADS_LINEAR.decide(noisy).status == "inconclusive"


def test_heads_linear_pools_the_seeds_curves_and_takes_the_jackknife_over_seeds():
    from attnlab.claims.ensemble.heads_linear_in_budget import pooled_h_star

    rows = [
        _budget_row(1000, r, 1.5 * D**0.3 * _jitter(D, r, 0.1), D=D, d=32)
        for D in (4, 8, 16, 32)
        for r in range(5)
    ]
    v = HEADS_LINEAR.decide(rows)
    # independent computation: the pooled curve of parabolas in log d_k has its vertex at the geometric
    # mean of the seeds' d_k*; H* = D/d_k*; the slope by numpy's straight-line fit
    gm = {
        D: math.exp(np.mean([math.log(r.metrics["dk_star"]) for r in rows if r.params["D"] == D]))
        for D in (4, 8, 16, 32)
    }
    for D in gm:
        assert v.numbers["h_star_by_D"][D] == pytest.approx(D / gm[D], rel=1e-9)
    slope = np.polyfit(np.log(list(gm)), np.log([D / gm[D] for D in gm]), 1)[0]
    assert v.numbers["slope"] == pytest.approx(slope, rel=1e-9) and v.numbers["slope"] == pytest.approx(
        0.7, abs=0.1
    )
    # the jackknife over seeds, computed here by leaving each seed out of every budget by hand
    loo = []
    for s in range(5):
        g = {
            D: math.exp(
                np.mean(
                    [
                        math.log(r.metrics["dk_star"])
                        for r in rows
                        if r.params["D"] == D and r.params["rep"] != s
                    ]
                )
            )
            for D in gm
        }
        loo.append(np.polyfit(np.log(list(g)), np.log([D / g[D] for D in g]), 1)[0])
    se = math.sqrt(4 / 5 * float(((np.array(loo) - np.mean(loo)) ** 2).sum()))
    assert v.numbers["slope_se"] == pytest.approx(se, rel=1e-9)
    assert v.numbers["band"] == pytest.approx(2 * max(se, 0.02), rel=1e-9)
    # a budget whose pooled best divisor is the grid's edge is set aside (the curves' vertex beyond d_k = 4)
    edge = [_budget_row(1000, r, 9.0, D=4, d=32) for r in range(5)]
    ve = HEADS_LINEAR.decide([r for r in rows if r.params["D"] != 4] + edge)
    assert ve.numbers["D_on_grid_edge"] == [4] and ve.numbers["D_range"] == [8, 32]
    h, on_edge = pooled_h_star({4: (np.array([1.0, 2.0, 4.0]), {0: np.array([1.0, 0.5, 0.2])})})
    assert on_edge == [4] and h[4] == pytest.approx(1.0)


def test_many_small_heads_against_the_square_root_threshold_at_the_largest_n():
    small = [_budget_row(3000, r, 2.0 * (1 + 0.05 * r)) for r in range(4)]
    v = MANY_SMALL.decide(small)
    assert v.status == "holds" and v.branch == "CI of log d_k*" and 0 < v.band < 0.2
    large = [_budget_row(3000, r, 7.0 * (1 + 0.05 * r)) for r in range(4)]
    assert MANY_SMALL.decide(large).status == "fails"
    assert resolving_power(MANY_SMALL, small).flips["threshold"]["-"] is not None
    # the smaller n are reported, not decided on: large heads at n = 300 do not change the verdict
    early = [_budget_row(300, r, 7.0) for r in range(4)]
    vs = MANY_SMALL.decide(small + early)
    assert vs.status == "holds" and vs.numbers["dk_star_by_n"][300] == pytest.approx(7.0)
    assert vs.numbers["averaging_floor_by_d_k"] == {1: 0.87890625, 2: 0.765625, 4: 0.5625, 8: 0.25}


def test_many_small_heads_maps_its_open_knobs_and_depends_where_cells_disagree():
    from attnlab.engine.protocol import CELL_KEY

    assert set(MANY_SMALL.knobs) == {"c", "weighting", "bandwidth"}
    cells = MANY_SMALL.map_cells("quick")
    assert ("weighting", "summed") in cells and ("bandwidth", "sd") in cells and ("c", 1.0) in cells
    test = [_budget_row(3000, r, 7.0 * (1 + 0.05 * r)) for r in range(4)]
    summed = [
        _row({**r.params, CELL_KEY: "weighting=summed", "weighting": "summed"}, {**r.metrics, "dk_star": 2.0})
        for r in test
    ]
    summed = [Row(r.point_id + "s" + str(i), r.params, "ok", {**r.metrics, "dk_star": 2.0 + 0.1 * i})
              for i, r in enumerate(summed)]  # fmt: skip
    final, vtest, cs = MANY_SMALL.decide_map(test + summed, "quick")
    assert vtest.status == "fails" and final.status == "depends"
    by = {c.name: c.verdict.status for c in cs}
    assert by["weighting=summed"] == "holds" and by["weighting=averaged"] == "fails"


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


def test_training_orthogonalises_three_outcomes_of_the_pooled_interval():
    rad, bump = [8, 3, 2, "radial", 0.5, 400, 1.5], [8, 3, 2, "bump", 0.5, 400, 1.5]
    up = [_train_row(rad, r, 0.7, 0.8) for r in range(4)]  # change +0.1 against a margin of 0.01
    v = TRAINING_ORTH.decide(up)
    assert v.status == "holds" and v.branch == "pooled CI"
    g = next(x for x in v.numbers.values() if isinstance(x, dict))
    assert g["region"] == "above" and g["margin"] == pytest.approx(0.01)
    down = [_train_row(rad, r, 0.7, 0.6) for r in range(4)]
    vd = TRAINING_ORTH.decide(down)
    assert (
        vd.status == "fails"
        and next(x for x in vd.numbers.values() if isinstance(x, dict))["region"] == "below"
    )
    # at the null: a change of about +0.003 whose interval lies inside ±0.01
    flat = [_train_row(rad, r, 0.7, 0.7) for r in range(4)]
    vf = TRAINING_ORTH.decide(flat)
    gf = next(x for x in vf.numbers.values() if isinstance(x, dict))
    assert vf.status == "fails" and gf["region"] == "at the null" and vf.branch == "pooled CI"
    # the margin shrunk below the interval's edge: no longer inside it, and not clear of 0 either
    power = resolving_power(TRAINING_ORTH, flat)
    assert power.flips["margin"]["-"] is not None
    # controls through the same pooled interval: penalised above (holds), the bump below (fails)
    ctrl = [_train_row(rad, r, 0.7, 0.95, "penalised") for r in range(4)]
    ctrl += [_train_row(bump, r, 0.7, 0.6, "bump-counter-case") for r in range(4)]
    pw = resolving_power(TRAINING_ORTH, flat + ctrl)
    assert pw.controls["penalised"]["got"] == "holds" and pw.controls["penalised"]["same_branch"]
    assert pw.controls["bump-counter-case"]["got"] == "fails" and not pw.cannot_fail
    # the ends rise but the path falls on average (a late jump after a long decline): the two
    # readings disagree, so the trajectory does not decide
    jump = [_train_row(rad, r, 0.7, 0.8, slope=-0.05) for r in range(4)]
    vj = TRAINING_ORTH.decide(jump)
    assert vj.status == "inconclusive"
    g = next(v for v in vj.numbers.values() if isinstance(v, dict))
    assert g["change_ci90"][0] > 0 and g["slope_per_100_ci90"][1] < 0 and g["seeds_needed"] >= 1


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
        _train_row(rad, 0, 1.0, 0.9, "bump-counter-case")
    ]
    for cid, rows in [
        (HEADS_LINEAR.id, budget),
        (MANY_SMALL.id, budget),
        (TRAINING_ORTH.id, train),
    ]:
        figs = FIGURES[cid](rows)
        assert figs and all(ax.get_ylabel() for f in figs.values() for ax in f.axes)


# ------------------------------------------------------------------------------- controls that decide
def test_budget_law_caps_the_memory_of_a_real_point():
    small = {"reps": 2, "queries": 10, "n": 300, "D": 4, "max_d_k": 2}
    p = BUDGET_LAW.points("quick", overrides=small | {"c": 2.0}, controls=False)[0]
    m = BUDGET_LAW.run(
        BUDGET_LAW.points("quick", overrides=small | {"n_cap": 100}, controls=False)[0]
    ).metrics
    assert m["n_used"] == 100 and m["d_k"] == [1, 2]
    assert BUDGET_LAW.run(p).metrics["n_used"] == 300


def test_heads_linear_three_way_rule_against_linear_and_square_root_growth():
    def rows(expo: float, jitter: float, seeds: int = 4) -> list[Row]:
        # H* = D^expo / 1.5 exactly (d_k* = 1.5 D^{1 − expo}), with a multiplicative jitter per seed
        return [
            _budget_row(1000, r, 1.5 * D ** (1 - expo) * _jitter(D, r, jitter), D=D, d=32)
            for D in (6, 8, 12, 16)
            for r in range(seeds)
        ]

    lin = HEADS_LINEAR.decide(rows(1.0, 0.01))
    assert lin.status == "holds" and lin.numbers["slope"] == pytest.approx(1.0, abs=0.02)
    sqrt = HEADS_LINEAR.decide(rows(0.5, 0.01))
    assert sqrt.status == "fails"  # the band excludes 1
    wide = HEADS_LINEAR.decide(rows(0.75, 0.6))
    assert wide.status == "inconclusive" and "seeds" in wide.regime
    # seeds_needed: the band shrinks like 1/√seeds until it leaves the farther of 1 and 0.5
    n = wide.numbers
    far = max(abs(n["slope"] - 1), abs(n["slope"] - 0.5))
    assert n["seeds_needed"] == math.ceil(4 * (n["band"] / far) ** 2) and n["seeds_needed"] > 4
    # a tight band (the 0.02 floor): the linear prediction moved by at most 10% either way leaves it
    power = resolving_power(HEADS_LINEAR, rows(1.0, 0.01))
    assert all(power.flips["exponent"][s] is not None and power.flips["exponent"][s] <= 0.1 for s in "+-")


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
    Ds = (6, 8, 12, 16)
    sqrt = [_budget_row(1000, r, D**0.5 * _jitter(D, r, 0.03), D=D, d=32) for D in Ds for r in range(4)]
    shared = [
        _budget_row(1000, r, 2.0 * _jitter(D + 100, r, 0.03), D=D, d=32, control="shared-heads")
        for D in Ds
        for r in range(4)
    ]
    assert HEADS_LINEAR.decide(sqrt).status == "fails"
    assert HEADS_LINEAR.decide_control("shared-heads", shared).status == "holds"
    power = resolving_power(HEADS_LINEAR, sqrt + shared)
    assert power.base == "fails" and power.controls["shared-heads"]["as_designed"]
    assert not power.cannot_fail and "controls 1/1" in power.label
