"""``highdim.emergence``: with a power-law target the modes are recovered one after another as α grows,
and the test error drops as each one's outlier leaves the bulk (docs/highdim.md C6).

Per point (a dense α grid): the finite-d state evolution with the target's spectrum gives the predicted
outlier count (:func:`attnlab.highdim.predicted_outliers`) and the fixed point (δ, ε, η); the ERM on a
Haar-rotated target gives ``Ŝ``. The test error's drop is followed mode by mode: the error along each of
the ``modes`` strongest target directions, ``(u_kᵀ Ŝ u_k − s_k)²/s_k²``
(:func:`attnlab.highdim.outliers.mode_errors`; linearised, the excess test error is a sum over such
parts), for the ERM and for draws of the theory's ``η·ReLU(S0 + δZ − ε)``.

Deciding quantity, per mode k whose outlier leaves the bulk inside the grid: the share of the fall of the
mode's error over the grid that comes after its exit (:func:`attnlab.highdim.outliers.share_after`; near 1
when the error drops as the outlier leaves the bulk, near 0 when it fell before), for the theory and for the
ERM. The exit is the α at which the state evolution's noise width δ(α) falls to the mode's eigenvalue ``s_k``
(:func:`attnlab.highdim.outliers.spike_exit_alpha`, the prediction ``alpha_out``): the spectral transition
at which ``s_k`` leaves the semicircle bulk of ``S0 + δZ``. (The finite-d count of support pieces,
:func:`attnlab.highdim.predicted_outliers`, reported beside it, separates a mode only near ``s_k ≈ 2δ``,
when the mode is mostly learned already: at d = 40, γ = 1 the theory's shares after those later exits are
0.90, 0.36, 0.19.)

Regime: modes whose theory share is at least 1/2 ("isolated" modes); with fewer than two the verdict is
inconclusive, with the theory's shares. Verdict rule on the isolated modes: "holds" when, for every one, the
ERM's error falls over the grid by at least half the theory's fall and the ERM's share (seed mean of the
curves) is within ``z × the standard deviation of the share over single theory draws × √(1/seeds +
1/(seeds·draws))`` of the theory's (one draw at each α is a curve with the noise of one ERM run), "fails"
otherwise; ``z`` is the Bonferroni quantile of a :data:`FAMILY` family-wise rate over the isolated modes
(:func:`family_z`). Rows of several d are decided at the largest; the other sizes' offsets are reported.
Negative control ``early`` (``sim_alpha_scale = 2``): the ERM trains on twice the samples, 2α·d², while
the theory (the exit α and the draws) stays at α. Its modes are learned (their errors fall over the grid
as far as the theory's) but fall at half the α, before the theory's exits: the share after the exit drops,
so the verdict must fail through "share", the branch that decides the test (the earlier control, random
eigenvectors ``directions=scrambled``, still a parameter, fails through "learned": no mode is learned at all).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnlab.claims.highdim._common import (
    PAPER,
    SETTING_DOMAINS,
    device_name,
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


@dataclass(frozen=True)
class Params:
    alpha: float = 0.15  # sample ratio n/d²
    d: int = 40  # token dimension (the finite-d spectrum has d eigenvalues)
    gamma: float = 1.0  # power-law exponent of the target's eigenvalues s_i ∝ i^(−γ)
    tail: bool = True  # the whole power law, or only its ``modes`` strongest eigenvalues (the rest zero)
    directions: str = "learned"  # the ERM's eigenvectors, or "scrambled": random ones (a negative variant)
    sim_alpha_scale: float = 1.0  # the ERM trains on this times α·d² samples; the theory stays at α (control)
    modes: int = 4  # strongest target directions followed
    noise: float = 0.1  # label-noise variance Δ
    lam: float = 0.01  # λ̃
    kappa0: float = 0.5  # unused by a power-law target; kept for the Setting
    tokens: int = 2  # sequence length T
    nodes: int = 1024  # quadrature nodes of the state evolution
    scrambles: int = 1  # node sets of the state evolution (it sets δ, ε, η; its error bar is not used)
    draws: int = 8  # draws of η·ReLU(S0 + δZ − ε) averaged for the theory's mode errors
    optimizer: str = "lbfgs"  # "lbfgs" or "adam" (TrainConfig.optimizer)
    dtype: str = "float32"  # precision of the data and logits (sums in float64)
    max_steps: int = 3000  # optimiser step cap
    rtol: float = 1e-9  # stopping tolerance (TrainConfig.rtol)

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        **SETTING_DOMAINS,
        "gamma": In("(0, inf)"),
        "directions": OneOf("learned", "scrambled"),
        "sim_alpha_scale": In("(0, inf)", cap=1_000),
        "modes": In("[1, inf)"),
        "lam": In("[0, inf)"),
        "nodes": In("[2, inf)", cap=1_000_000),
        "scrambles": In("[1, inf)", cap=64),
        "draws": In("[1, inf)", cap=100_000),
        "optimizer": OneOf("lbfgs", "adam"),
        "dtype": OneOf("float32", "float64"),
    }


def run(point: Point) -> Result:
    from attnlab.core.seeding import derive_seed, generator
    from attnlab.highdim import (
        DiscreteSpectrum,
        TrainConfig,
        count_outliers,
        denoiser_sample,
        power_law_spectrum,
        power_law_target,
        predicted_outliers,
        predicted_spectrum,
        simulate,
        state_evolution,
    )
    from attnlab.highdim.outliers import keep_outliers, mode_errors

    p: Params = point.p
    vals = np.sort(power_law_spectrum(p.d, p.gamma).eigenvalues)[::-1].copy()
    S0 = power_law_target(p.d, p.gamma, generator(derive_seed(point.seed, "target")), device=point.device)
    if not p.tail:
        vals[p.modes :] = 0.0
        S0 = keep_outliers(S0, p.modes, 0.0)  # the strongest eigenvalues kept, the rest set to zero

    def theory():  # seed-independent (the spectrum, not S0's rotation): shared by the seeds and the control
        s = setting(p, target=DiscreteSpectrum(vals))
        fp = state_evolution(s, p.alpha, nodes=p.nodes, scrambles=p.scrambles)
        return fp, predicted_spectrum(s, fp)

    key = (__name__, p.d, p.gamma, p.modes, p.tail, p.kappa0, p.noise, p.tokens, p.lam, p.alpha, p.nodes)
    fp, ps = shared((*key, p.scrambles), theory)
    cfg = TrainConfig(max_steps=p.max_steps, rtol=p.rtol, optimizer=p.optimizer, dtype=p.dtype)
    r = simulate(
        p.d,
        p.alpha * p.sim_alpha_scale,
        noise=p.noise,
        tokens=p.tokens,
        lam=p.lam,
        target=S0,
        seed=point.seed,
        config=cfg,
    )
    S_hat = r.S
    if p.directions == "scrambled":  # every eigenvalue kept, along random orthonormal directions
        S_hat = keep_outliers(r.S, p.d, -1e300, generator(derive_seed(point.seed, "scramble")))
    draws = [
        denoiser_sample(S0, fp.delta, fp.eps, fp.eta, generator(derive_seed(point.seed, i)))
        for i in range(p.draws)
    ]
    return Result(
        metrics={
            "outliers_theory": predicted_outliers(ps, p.d),
            "outliers_sim": count_outliers(r.eigenvalues, ps),
            "edge": ps.outlier_edge,
            "delta": fp.delta,
            "test_error_theory": fp.test_error,
            "test_error_sim": r.test_error,
            "steps": r.steps,
            "device": device_name(point.device),  # the ERM's; the state evolution ran on CPU
        },
        arrays={
            "eigenvalues": np.asarray(r.eigenvalues),
            "mode_errors_sim": mode_errors(S_hat, S0, p.modes),  # (modes,)
            "s_modes": vals[: p.modes].copy(),  # (modes,) the strongest target eigenvalues
            "mode_errors_draws": np.array([mode_errors(D, S0, p.modes) for D in draws]),  # (draws, modes)
        },
    )


ISOLATED = 0.5  # a mode is isolated (regime) when at least this share of its theory drop follows its exit
LEARNED = 0.5  # the ERM's error along a mode must fall by at least this part of the theory's fall
#: family-wise error rate of the share test over the isolated modes: each mode is held at the Bonferroni
#: quantile z = Φ⁻¹(1 − FAMILY/(2m)) for m modes (2.24, 2.39, 2.50, 2.58 for m = 2…5), so that a claim whose
#: modes all agree fails by chance in about one run in twenty (measured on a synthetic null of three agreeing
#: modes, four seeds: 7.5% of 1,500 runs; each mode at z = 2, as until 2026-12-04: 14.9%, and about one root
#: seed in four at the full profile's five modes; docs/highdim.md C6).
FAMILY = 0.05
TOLERANCE = (
    f"on modes whose theory share of the drop after the exit is >= {ISOLATED}: the ERM's error falls by >= "
    f"{LEARNED} of the theory's fall, and its share is within z × its standard error of the theory's (at the "
    f"largest d of the run), z the Bonferroni quantile of a {FAMILY:g} family-wise rate over the modes; one "
    "share's error is the spread of one draw's share × √(1/seeds + 1/(seeds·draws))"
)


def family_z(modes: int) -> float:
    """The two-sided Bonferroni quantile for ``modes`` simultaneous tests at the family-wise rate
    :data:`FAMILY`."""
    from scipy.stats import norm

    return float(norm.ppf(1 - FAMILY / (2 * max(int(modes), 1))))


def _one_size(rows: Sequence[Row], pred: Predict) -> dict | None:
    """Per mode at one d (rows of one size): the exit, the theory's and the ERM's share of the drop after it,
    the share's standard error and the falls; None with fewer than three α."""
    from attnlab.highdim.outliers import share_after, spike_exit_alpha

    by = groups(rows, ("alpha",))
    if len(by) < 3:
        return None
    al = sorted(a for (a,) in by)

    def curves(key: str) -> np.ndarray:  # (α, modes): seed means
        return np.array([np.mean([np.asarray(r.arrays[key]) for r in by[(a,)]], axis=0) for a in al])

    e_sim = curves("mode_errors_sim")
    e_draws = curves("mode_errors_draws")  # (α, draws, modes): seed means of the draws
    e_th = e_draws.mean(axis=1)
    seeds = min(len(by[(a,)]) for a in al)
    # one matrix's curves (draw i of replicate r at every α): the spread of a single matrix's share
    one: dict = {}
    for a in al:
        for r in by[(a,)]:
            one.setdefault(r.params.get("rep", 0), []).append(np.asarray(r.arrays["mode_errors_draws"]))
    singles = [np.stack(v) for v in one.values() if len(v) == len(al)]  # each (α, draws, modes)
    deltas = [float(by[(a,)][0].metrics["delta"]) for a in al]
    s_modes = np.asarray(by[(al[0],)][0].arrays["s_modes"])
    modes: dict = {}
    for k in range(1, e_th.shape[1] + 1):
        exit_k = spike_exit_alpha(al, deltas, float(s_modes[k - 1]))
        if exit_k is None:
            continue  # the mode leaves the bulk outside the grid
        out = pred("alpha_out", exit_k)
        # one matrix's share fluctuates like one draw's of one seed (a draw averaged over the seeds fluctuates
        # √seeds less: read so until 2026-12-04, the tolerance was that much too tight), for the seed mean
        per_draw = [share_after(al, m[:, i, k - 1], out) for m in singles for i in range(m.shape[1])]
        se = float(np.nanstd(per_draw, ddof=1)) * math.sqrt(1 / seeds + 1 / (seeds * e_draws.shape[1]))
        fall_th, fall_sim = e_th[0, k - 1] - e_th[-1, k - 1], e_sim[0, k - 1] - e_sim[-1, k - 1]
        modes[k] = {
            "exit": out,
            "theory": share_after(al, e_th[:, k - 1], out),
            "sim": share_after(al, e_sim[:, k - 1], out),
            "se": se,
            "fall_theory": fall_th,
            "fall_sim": fall_sim,
            "learned": bool(fall_sim >= LEARNED * fall_th),  # the ERM learns the direction at all
        }
    return {
        "alphas": al,
        "seeds": seeds,
        "outliers_theory": [by[(a,)][0].metrics["outliers_theory"] for a in al],
        "modes": modes,
    }


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    sizes = {}
    for (d,), rs in sorted(groups(good, ("d",)).items()):
        one = _one_size(rs, pred)
        if one is not None:
            sizes[d] = one
    if not sizes:
        return Verdict("inconclusive", {}, "-", note + "needs at least three α")
    ds = sorted(sizes)
    top = sizes[ds[-1]]  # decided at the largest d; smaller ones are reported beside it (a map over d)
    nums: dict = {"alphas": top["alphas"], "outliers_theory": top["outliers_theory"], "seeds": top["seeds"]}
    nums["d"] = ds[-1]
    shares_th = []
    for k, m in top["modes"].items():
        nums[f"alpha_out_{k}"] = m["exit"]
        nums[f"share_theory_{k}"], nums[f"share_sim_{k}"] = m["theory"], m["sim"]
        shares_th.append(round(m["theory"], 2))
    iso = [k for k, m in top["modes"].items() if m["theory"] >= ISOLATED]
    nums.update(shares_theory=shares_th, isolated=len(iso))
    nums["shares_sim_isolated"] = [round(top["modes"][k]["sim"], 2) for k in iso]
    if len(iso) < 2:
        return Verdict.outside(
            f"fewer than two modes whose theory error falls mostly after their outlier leaves the bulk "
            f"(theory shares after the exit {shares_th}): the modes are not isolated outliers here",
            nums,
            TOLERANCE,
        )
    z = family_z(len(iso))
    nums["z_family"] = z
    worst, band, unlearned = 0.0, 0.0, 0
    for k in iso:
        m = top["modes"][k]
        tol = z * m["se"]
        nums[f"share_tol_{k}"] = tol
        nums[f"fall_theory_{k}"], nums[f"fall_sim_{k}"] = m["fall_theory"], m["fall_sim"]
        decidable = m["learned"] and math.isfinite(m["sim"]) and tol > 0
        miss = abs(m["sim"] - m["theory"]) / tol if decidable else math.inf
        worst, band = max(worst, miss), max(band, tol / m["theory"])
        unlearned += not m["learned"]
        if len(ds) > 1:  # beside the decision: [ERM − theory, tolerance] of this mode at every size
            at = {d: sizes[d]["modes"][k] for d in ds if k in sizes[d]["modes"]}
            nums[f"share_offset_by_d_{k}"] = {
                str(d): [o["sim"] - o["theory"], z * o["se"]] for d, o in at.items()
            }
    nums["worst"] = worst
    # two branches: a mode the ERM does not learn at all ("learned"), else the share after the exit against
    # the theory's ("share"); the band is the share's tolerance as a fraction of the theory's share
    branch = "learned" if unlearned else "share"
    return Verdict("holds" if worst <= 1 else "fails", nums, TOLERANCE, note, branch=branch, band=band)


#: the full profile's size, the largest run: the share offsets between the ERM and the theory (largest of five
#: modes over 72 seeds: 0.059 at d = 50, 0.024 at 70, 0.032 at 100, 0.020 at 141, 0.032 at 200) do not shrink
#: past d = 100, and 24 seeds put the tolerance at about their size (the verdict then turns with the root
#: seed at every d); 72 resolve them (docs/highdim.md C6)
FULL_D = 200

CLAIM = Claim(
    id="highdim.emergence",
    kind="theorem",
    grade="evidence",
    paper=PAPER,
    statement="With a power-law target the modes are recovered one after another as α grows, and the "
    "error along each target direction drops fastest where its outlier leaves the bulk, in theory and for "
    "the ERM.",
    version=9,  # label nodes folded at T = 2 (channel_nodes.default_fold)
    params=Params,
    grids={
        "quick": Grid(
            {
                "alpha": [
                    0.02,
                    0.027,
                    0.036,
                    0.048,
                    0.064,
                    0.085,
                    0.11,
                    0.15,
                    0.2,
                    0.27,
                    0.36,
                ]
            },
            {"d": 40, "gamma": 1.0, "noise": 0.1, "lam": 0.01},
            seeds=8,  # 2 until 2026-12-04: with the tolerance read per matrix, its control failed 3 of 4
        ),
        "full": Grid(  # the exits sit at about the same n/d at every d: the grid is 21 values of n/d
            {"alpha": [round(1.2**i / FULL_D, 5) for i in range(21)]},
            {"d": FULL_D, "gamma": 1.0, "noise": 0.1, "lam": 0.01, "modes": 6, "nodes": 2048},
            seeds=72,  # d = 100 and 3 seeds until 2026-12-04 (docs/highdim.md C6, "a second look")
        ),
    },
    run=run,
    verdict=verdict,
    predictions={"alpha_out": "the α at which the k-th target eigenvalue leaves the noise bulk, δ(α) = s_k"},
    controls={
        "early": Control(
            expect="fails",
            set={"sim_alpha_scale": 2.0},
            why="the ERM on twice the samples against the theory at α: its modes are learned but fall before "
            "the theory's exits, so the share after the exit must miss the theory's",
        )
    },
    regime="two or more isolated modes: the theory's own error along them falls mostly after they leave the "
    "noise bulk",
    explain={
        "holds": "{isolated} isolated modes: the ERM's error along each falls after it leaves the noise "
        "bulk as the theory's does (shares after the exit: ERM {shares_sim_isolated}, theory "
        "{shares_theory}; worst {worst:.2f} of the tolerance).",
        "fails": "{isolated} isolated modes: the ERM's shares of the drop after the exit "
        "{shares_sim_isolated} against the theory's {shares_theory} (worst {worst:.2f} of the tolerance, "
        "infinite where the ERM does not learn the mode).",
        "inconclusive": "Theory counts {outliers_theory} over α {alphas}; theory shares of each mode's drop "
        "after its exit {shares_theory}.",
    },
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
