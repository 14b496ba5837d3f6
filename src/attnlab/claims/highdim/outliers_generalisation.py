"""``highdim.outliers-generalisation``: more recovered outliers, better generalisation (docs/highdim.md C4,
C6): the outliers of the learned spectrum are target directions recovered, and each one lowers the test
error.

Per α, on a power-law target with outliers: the finite-d state evolution gives the fixed point (δ, ε, η),
the predicted bulk edge and the number ``k`` of outliers it recovers; the ERM gives ``Ŝ``. For
``j = 0 … k`` the test error of ``Ŝ`` keeping only its ``j`` largest outliers
(:func:`attnlab.highdim.outliers.keep_outliers`; the others' eigenvalues set to zero, the bulk untouched) is
measured on one fresh test set, for the ERM's ``Ŝ`` and for draws of the matrix the theory says ``Ŝ`` equals
in law, ``η·ReLU(S0 + δZ − ε)`` (:func:`attnlab.highdim.denoiser_sample`, same ``S0`` and test set): the
error as a function of the number of recovered outliers, simulated and predicted. Across α the count and the
error are reported beside it (both move with α; they are not the evidence).

Verdict rule, at every α where the theory recovers an outlier at every d (at least two such α, at least three
d and at least three ERM seeds at each (α, d), else inconclusive): per seed ``i`` the gain ratio ``r_i = (e(0)
− e(k))_ERM / gain_i``, the ERM's gain over the mean gain of that seed's own theory draws (same ``S0``, same
test set: the draws' finite-d fluctuation is inside the ratio's spread). Per α the seed means of ``r`` at the
sizes d are taken to d → ∞ along ``a + b/d`` by least squares weighted by their inverse squared standard
errors — from one spread between seeds pooled over the sizes (with three seeds a size's own spread is too
noisy to weight by: at root seed 2 the seeds at d = 60, α = 0.4 agreed to 4e-4 by chance, and the fit leaned
on that size alone, tolerance 0.6%) —, and the fit's χ² tests that trend
(:func:`attnlab.claims.highdim._common.large_d_estimate`, as ``highdim.temperature`` does for its gaps;
refuted at the 99% quantile: inconclusive). The extrapolated ``a`` must be within ``2 se(a)`` of 1 at every α
(branch "gain ratio"; the band is the largest ``2 se(a)``, from the seeds alone). The order of the finite-size
correction is an assumption, so each α is also taken to d → ∞ along ``a + b/d^p`` for p = 1/2 and 2
(:data:`~attnlab.claims.highdim._common.CORRECTIONS`, :func:`~attnlab.claims.highdim._common.along_forms`):
an α whose decision differs between the forms its seeds do not refute (χ² as above) is reported
(``form_dependent_alphas``, with each form's ``a``, ``se``, χ² and decision) and not decided — a map
over the form, not a verdict — and at least two α must be decided alike along every form, else
inconclusive; and the seed mean of the ERM's error, and the
theory's, must fall with every outlier kept at every (α, d) (branch "fall" when only this decides; one seed
whose last outlier stayed in the bulk leaves its error unchanged, not higher). The finite-d shortfall this
replaces an allowance for: where the theory's last outliers have just left the bulk (α = 0.06) the ERM's gain
sat below the law's at the same d by 10.6% at d = 40 (8 seeds) and 6.3% ± 2.2% at d = 60 (12 seeds), by 1% and
0.4% at α = 0.15 and 0.4; the earlier rule allowed 10% for it, a figure chosen after seeing those data, where
the extrapolation needs none. Negative control (``outliers=scrambled``): the ERM's kept outliers' eigenvectors
replaced by random directions (same eigenvalues, no information on the target; the theory's draws and so the
predicted gain unchanged): the error must not fall and the gain ratio is negative, so the verdict must fail
through the gain ratio."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from attnlab.claims.highdim._common import (
    CORRECTIONS,
    PAPER,
    SETTING_DOMAINS,
    along_forms,
    device_name,
    forms_numbers,
    groups,
    ok_rows,
    setting,
    shared,
)
from attnlab.engine.params import In, OneOf
from attnlab.engine.protocol import (
    NO_PERTURBATION,
    Claim,
    Control,
    Grid,
    Point,
    Predict,
    Result,
    Row,
    Verdict,
)

__all__ = ["CLAIM", "CLAIMS", "Params", "run", "verdict"]

# The finite-size forms (_common.CORRECTIONS). Near the bulk's edge the order of the correction is not known
# (an outlier's transition has a window of width d^(−1/3)), and there the large-d value moves with it: at
# α = 0.06 over 80 seeds per size (root seeds 0–3) 1.38 ± 0.08, 1.13 ± 0.04, 1.00 ± 0.02 for p = 1/2, 1, 2,
# no form refuted by its χ²; at α = 0.15 and 0.4 it stays within 0.998–0.984 and 1.006–1.000 (docs/highdim.md
# C4)
MIN_SEEDS = 3  # ERM seeds per (α, d): the band is the spread between seeds, which needs replicates to measure
EDGE_SEEDS = 20  # quick profile's seeds per d at α = 0.06, where the last outlier sits at the bulk's edge


@dataclass(frozen=True)
class Params:
    alpha: float = 0.15  # sample ratio n/d²
    d: int = 40  # token dimension
    gamma: float = 1.0  # power-law exponent of the target's eigenvalues s_i ∝ i^(−γ)
    noise: float = 0.1  # label-noise variance Δ
    lam: float = 0.01  # λ̃
    kappa0: float = 0.5  # unused by a power-law target; kept for the Setting
    tokens: int = 2  # sequence length T
    nodes: int = 1024  # quadrature nodes of the state evolution
    scrambles: int = 1  # node sets of the state evolution (it sets δ, ε, η; its error bar is not used)
    draws: int = 8  # draws of η·ReLU(S0 + δZ − ε) for the predicted errors
    n_test: int = 4000  # test sequences (one set for every truncation, so the differences are paired)
    outliers: Literal["learned", "scrambled"] = "learned"  # kept outliers as learned, or random directions
    optimizer: str = "lbfgs"  # "lbfgs" or "adam" (TrainConfig.optimizer)
    dtype: str = "float32"  # precision of the data and logits (sums in float64)
    max_steps: int = 3000  # optimiser step cap
    rtol: float = 1e-9  # stopping tolerance (TrainConfig.rtol)

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        **SETTING_DOMAINS,
        "gamma": In("(0, inf)"),
        "lam": In("[0, inf)"),
        "nodes": In("[2, inf)", cap=1_000_000),
        "scrambles": In("[1, inf)", cap=64),
        "draws": In("[1, inf)", cap=100_000),
        "n_test": In("[1, inf)", cap=1_000_000),
        "optimizer": OneOf("lbfgs", "adam"),
        "dtype": OneOf("float32", "float64"),
    }


def _errors(S, k: int, edge: float, test, gen) -> list[float]:
    from attnlab.highdim import evaluate
    from attnlab.highdim.outliers import keep_outliers

    return [evaluate(keep_outliers(S, j, edge, gen), test)[0] for j in range(k + 1)]


def run(point: Point) -> Result:
    from attnlab.core.seeding import derive_seed, generator
    from attnlab.highdim import (
        TrainConfig,
        count_outliers,
        denoiser_sample,
        power_law_spectrum,
        power_law_target,
        predicted_outliers,
        predicted_spectrum,
        sample,
        simulate,
        state_evolution,
    )

    p: Params = point.p

    def theory():  # seed-independent: shared by the seeds and the control at one (α, d)
        s = setting(p, target=power_law_spectrum(p.d, p.gamma))
        fp = state_evolution(s, p.alpha, nodes=p.nodes, scrambles=p.scrambles)
        return fp, predicted_spectrum(s, fp)

    key = (__name__, p.d, p.gamma, p.kappa0, p.noise, p.tokens, p.lam, p.alpha, p.nodes, p.scrambles)
    fp, ps = shared(key, theory)
    k = predicted_outliers(ps, p.d)
    S0 = power_law_target(p.d, p.gamma, generator(derive_seed(point.seed, "target")), device=point.device)
    cfg = TrainConfig(max_steps=p.max_steps, rtol=p.rtol, optimizer=p.optimizer, dtype=p.dtype)
    r = simulate(
        p.d, p.alpha, noise=p.noise, tokens=p.tokens, lam=p.lam, target=S0, seed=point.seed, config=cfg
    )
    test = sample(S0, p.n_test, p.tokens, p.noise, 1.0, "seq2lab", generator(derive_seed(point.seed, "test")))

    # the control scrambles the ERM's kept outliers only: the prediction stays the theory's gain
    scramble = generator(derive_seed(point.seed, "scramble-1")) if p.outliers == "scrambled" else None
    e_sim = _errors(r.S, k, ps.outlier_edge, test, scramble)
    e_th = [
        _errors(
            denoiser_sample(S0, fp.delta, fp.eps, fp.eta, generator(derive_seed(point.seed, i))),
            k,
            ps.outlier_edge,
            test,
            None,
        )
        for i in range(p.draws)
    ]
    return Result(
        metrics={
            "k": k,
            "outliers_sim": count_outliers(r.eigenvalues, ps),
            "test_error_theory": fp.test_error,
            "test_error_sim": r.test_error,
            "steps": r.steps,
            "device": device_name(point.device),  # the ERM's; the state evolution ran on CPU
        },
        arrays={"e_sim": np.array(e_sim), "e_theory_draws": np.array(e_th)},  # (k+1,), (draws, k+1)
    )


TOLERANCE = (
    "at every α with an outlier: the seed means of the gain ratio (ERM gain / predicted gain, per seed) at "
    ">= 3 d extrapolated along a χ²-tested a + b/d, a within 2 standard errors of 1 (an α decided otherwise "
    "along a + b/d^p for p = 1/2 or 2 is form-dependent, not decided; >= 2 α decided); and the seed-mean "
    "error falls with each outlier kept (ERM and theory) at every (α, d)"
)


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    from attnlab.claims.highdim._common import large_d_estimate

    good, note = ok_rows(rows)
    by_a = groups(good, ["alpha"])
    alphas = sorted(a for (a,) in by_a)
    nums: dict = {
        "alphas": alphas,
        "ds": sorted({r.params["d"] for r in good}),
        "outliers_theory": [max(r.metrics["k"] for r in by_a[(a,)]) for a in alphas],
        "test_error_sim": [float(np.mean([r.metrics["test_error_sim"] for r in by_a[(a,)]])) for a in alphas],
    }
    tested = [a for a in alphas if min(r.metrics["k"] for r in by_a[(a,)]) >= 1]
    if len(tested) < 2:
        return Verdict.outside("fewer than two α at which the theory recovers an outlier", nums, TOLERANCE)
    cells = {(a, d): rs for (a, d), rs in groups(good, ["alpha", "d"]).items() if a in tested}
    seeds = min(len(rs) for rs in cells.values())
    nums["seeds"] = seeds
    if seeds < MIN_SEEDS:
        return Verdict.outside(
            f"{seeds} ERM seed(s) at some (α, d); the band is the spread between seeds: >= {MIN_SEEDS} each",
            nums,
            TOLERANCE,
        )
    falls_sim, falls_th, ratios = True, True, {}
    for (a, d), rs in sorted(cells.items()):
        e_sims, e_ths, rr = [], [], []
        for r in rs:
            e_sim, draws = np.asarray(r.arrays["e_sim"]), np.asarray(r.arrays["e_theory_draws"])
            e_sims.append(e_sim)
            e_ths.append(draws.mean(axis=0))
            rr.append(float(e_sim[0] - e_sim[-1]) / pred("gain", float(np.mean(draws[:, 0] - draws[:, -1]))))
        # the seed means of the error curves (k is the theory's, the same for every seed at one (α, d))
        falls_sim &= bool(np.all(np.diff(np.mean(e_sims, axis=0)) < 0))
        falls_th &= bool(np.all(np.diff(np.mean(e_ths, axis=0)) < 0))
        ratios.setdefault(a, {})[d] = rr
    worst, band, why, form_dependent = 0.0, 0.0, [], []
    for a, per_d in ratios.items():
        # three seeds per size: one spread pooled over the sizes weights the fit (module docstring)
        est = large_d_estimate(per_d, pooled=True)
        for d, (m, se) in zip(sorted(per_d), zip(est["means"], est["ses"])):
            nums[f"gain_ratio_a{a}_d{d}"], nums[f"gain_ratio_se_a{a}_d{d}"] = m, se
        nums[f"trend_chi2_a{a}"] = est["chi2"]
        if not np.isfinite(est["estimate"]) or est["refuted"]:
            why.append(f"α = {a}: {est['why']}")
            continue
        tol = 2 * est["se"]
        nums[f"gain_ratio_a{a}"], nums[f"gain_ratio_tol_a{a}"] = est["estimate"], tol
        # the same data taken to d → ∞ along each finite-size form: an α whose decision moves with the form
        # is a map over it, not a verdict (module docstring)
        # [a, se(a), χ², holds] per form; a form the seeds refute (χ² above its limit) is not compared
        forms, form_why = along_forms(per_d, lambda f: abs(f["estimate"] - 1) <= 2 * f["se"], pooled=True)
        nums[f"gain_ratio_forms_a{a}"] = forms_numbers(forms)
        if form_why is not None:
            form_dependent.append(a)
            continue
        worst = max(worst, abs(est["estimate"] - 1) / tol if tol > 0 else float("inf"))
        band = max(band, tol)
    decided = [a for a in tested if f"gain_ratio_a{a}" in nums and a not in form_dependent]
    nums.update(
        falls_sim=falls_sim,
        falls_theory=falls_th,
        worst_gain_gap_over_tol=worst,
        alphas_tested=len(tested),
        alphas_decided=decided,
        form_dependent_alphas=form_dependent,
        band=band,
    )
    if why:
        return Verdict.outside("; ".join(why), nums, TOLERANCE)
    if len(decided) < 2:
        return Verdict.outside(
            f"{len(decided)} α decided alike along every finite-size form a + b/d^p, p in "
            f"{', '.join(f'{p:g}' for p in CORRECTIONS)} (needs >= 2; form-dependent: {form_dependent})",
            nums,
            TOLERANCE,
        )
    ratio_ok, fall_ok = worst <= 1, falls_sim and falls_th
    branch = "fall" if ratio_ok and not fall_ok else "gain ratio"
    status = "holds" if ratio_ok and fall_ok else "fails"
    return Verdict(status, nums, TOLERANCE, note, branch=branch, band=band)


CLAIM = Claim(
    id="highdim.outliers-generalisation",
    kind="theorem",
    grade="evidence",
    paper=PAPER,
    statement="More recovered outliers, better generalisation: keeping more of the learned outliers lowers "
    "the test error, by the gain the theory's η·ReLU(S0 + δZ − ε) predicts (the seed means of the gain ratio "
    "at three d, extrapolated along a tested a + b/d, within 2 standard errors of 1 at every α); outliers "
    "that carry no information on "
    "the target do not.",
    version=6,  # label nodes folded at T = 2 (channel_nodes.default_fold)
    params=Params,
    grids={
        # three d (the 1/d trend is tested, not only fitted); at α = 0.06 (the theory's last outlier at the
        # edge of the bulk) the ratio spreads by 0.08-0.13 between seeds, 4-15 times more than at 0.15 and
        # 0.4, and three seeds per size left its pooled spread (6 degrees of freedom) too uncertain to test
        # the trend with: at root seed 1 it came out at 0.045 and the χ² at 27 (docs/highdim.md C4); twenty
        # seeds there (six until the second look showed a heavy lower tail at d = 30: spread 0.19-0.30 over
        # 20 seeds against 0.04-0.07 at d = 60)
        "quick": Grid(
            {"alpha": [0.15, 0.4], "d": [30, 40, 60]},
            {"gamma": 1.0, "noise": 0.1, "lam": 0.01},
            seeds=MIN_SEEDS,
            extra=[
                Grid(
                    {"d": [30, 40, 60]},
                    {"alpha": 0.06, "gamma": 1.0, "noise": 0.1, "lam": 0.01, "rep": 0},
                    EDGE_SEEDS,
                )
            ],
        ),
        "full": Grid(
            {"alpha": [0.03, 0.06, 0.1, 0.15, 0.25, 0.4], "d": [60, 100, 150]},
            {"gamma": 1.0, "noise": 0.1, "lam": 0.01, "nodes": 2048},
            seeds=4,
        ),
    },
    run=run,
    verdict=verdict,
    predictions={"gain": "the fall of the predicted test error from no outlier kept to all k (per α)"},
    controls={
        "scrambled": Control(
            expect="fails",
            set={"outliers": "scrambled"},
            why="outliers along random directions carry no information on the target: keeping more of them "
            "cannot lower the test error",
        )
    },
    regime="finite d, a power-law target whose strongest directions stand out as outliers",
    explain={
        "holds": "At {alphas_tested} α the test error falls with every outlier kept (ERM and theory) and "
        "the large-d gain matches the prediction at α {alphas_decided} (worst {worst_gain_gap_over_tol:.2f} "
        "of the tolerance, band {band:.3f}; d = {ds}, {seeds} seeds; form-dependent: "
        "{form_dependent_alphas}); theory counts {outliers_theory} over α {alphas}.",
        "fails": "Error falls with each outlier: ERM {falls_sim}, theory {falls_theory}; worst large-d "
        "gain-ratio gap {worst_gain_gap_over_tol:.2f} of the tolerance (band {band:.3f}; d = {ds}, {seeds} "
        "seeds; theory counts {outliers_theory} over α {alphas}).",
        "inconclusive": "Theory counts {outliers_theory} over α {alphas}.",
    },
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
