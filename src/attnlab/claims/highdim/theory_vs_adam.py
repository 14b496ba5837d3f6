"""``highdim.theory-vs-adam``: the ERM minimiser's test error and training loss match the state evolution
(docs/highdim.md C3).

Two sides, as separate points of one grid (``side``): the state evolution once per (α, λ̃) (it does not
depend on d or on the seed) and ERM at dimension d with seed replicates per (α, λ̃). The ERM runs with two
optimisers (``optimizer``): L-BFGS in float32 with float64 sums
(``"lbfgs"``: it reaches the minimum the published full-batch Adam protocol reaches, to below 1e-6 of the
training loss, in a fraction of the time: docs/highdim.md C2), and the published Adam protocol itself
(``"published-adam"``: ``TrainConfig.published``, full batch, learning rate 0.1, ``W`` drawn ``N(0, 1)``,
the penalty in the loss, stopped at the first step after 100 whose relative change of the loss is below
1e-7; a grid of its own beside the L-BFGS one, so that the L-BFGS points keep the parameters and hence
the random draws they had before Adam was added). ``--set optimizer=adam`` runs the trainer's own Adam
settings instead (``rtol``, ``dtype``). Both
sides read the same problem from ``Params`` (κ0, Δ, T, λ̃), so ``--set kappa0=0.3`` moves the two together.

Verdict rule: per optimiser, per (α, λ̃) and for the test error and the training loss, the relative gap of
the ERM seed mean to the state evolution (the predictions ``se_test_error``, ``se_train_loss``), over a
tolerance ``3% + 2 × standard error of the gap`` (a finite-d bias allowance plus the noise of both sides:
the seed mean's standard error and the state evolution's quadrature standard error, from its four
independent scrambles, added in quadrature); "holds" when the worst ratio over both optimisers is at most
1, "fails" otherwise (branch "seed-mean gap"; the band is the largest tolerance as a fraction of its
prediction); each optimiser's worst ratio is reported (``worst_gap_over_tol_<optimiser>``);
"inconclusive" outside the regime (d < 100, fewer than three seeds, unconverged state evolution).

Negative control ``doubled_lam``: the ERM side (both optimisers) trains at 2λ̃ (``sim_lam_scale = 2``) while
the state evolution stays at λ̃; it must fail through the same seed-mean gap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from attnlab.claims.highdim._common import (
    PAPER,
    SETTING_DOMAINS,
    device_name,
    ok_rows,
    setting,
    simulate_point,
    train_config,
)
from attnlab.engine.params import In
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

FLOOR = 0.03  # relative gap always accepted: the finite-d bias at d = 100 (published Monte-Carlo noise ~1.5%)


@dataclass(frozen=True)
class Params:
    side: Literal["simulation", "theory"] = "simulation"  # which side this point computes
    alpha: float = 0.3016  # sample ratio n/d²
    lam: float = 0.01  # λ̃, the nuclear-norm coefficient (weight decay λ = λ̃/√κ)
    d: int = 100  # token dimension of the Adam side
    kappa0: float = 0.5  # target rank ratio p0/d (both sides)
    noise: float = 0.5  # label-noise variance Δ (both sides)
    tokens: int = 2  # sequence length T (both sides)
    task: Literal["seq2lab", "seq2seq"] = "seq2lab"  # Adam's task (one theory serves both tasks)
    beta: float = 1.0  # student inverse temperature β (both sides)
    beta0: float = 1.0  # target inverse temperature β0 (both sides)
    kappa: float = 1.0  # student width p/d (the theory holds for κ above the rank fraction)
    nodes: int = 2048  # quadrature nodes of the state evolution's output expectation
    # ERM optimiser: "lbfgs", "published-adam" (TrainConfig.published), "adam" (the trainer's Adam settings)
    optimizer: Literal["lbfgs", "adam", "published-adam"] = "lbfgs"
    dtype: Literal["float32", "float64"] = "float32"  # precision of data and logits (sums in float64)
    max_steps: int = 2000  # optimiser step cap
    init_scale: float = 1.0  # the factor W starts N(0, init_scale²) (published: 1)
    rtol: float | None = None  # stopping tolerance (None: the optimiser's default, TrainConfig.rtol)
    sim_lam_scale: float = 1.0  # the ERM side trains at this multiple of λ̃ (the control: 2)

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        **SETTING_DOMAINS,
        "lam": In("[0, inf)"),
        "beta": In("(0, inf)"),
        "beta0": In("(0, inf)"),
        "kappa": In("(0, inf)"),
        "nodes": In("[2, inf)", cap=1_000_000),
        "init_scale": In("(0, inf)"),
        "sim_lam_scale": In("(0, inf)", cap=1_000),
    }


def erm_config(p: Params):
    """The ERM optimiser of a point: ``"published-adam"`` is ``TrainConfig.published`` with the point's step
    cap, precision, start scale and tolerance (None: the protocol's 1e-7); the others as ``train_config``."""
    if p.optimizer != "published-adam":
        return train_config(p)
    from attnlab.highdim import TrainConfig

    kw = dict(max_steps=int(p.max_steps), dtype=p.dtype, init_scale=float(p.init_scale))
    if p.rtol is not None:
        kw["rtol"] = float(p.rtol)
    return TrainConfig.published(**kw)


def run(point: Point, p: Params | None = None) -> Result:
    """One point: the state evolution or one ERM run. ``p``: parameters to use instead of ``point.p``
    (a variant claim's planted change on one side), with ``point``'s seed and device."""
    from attnlab.highdim import state_evolution

    p = point.p if p is None else p
    if p.side == "simulation" and p.sim_lam_scale != 1.0:  # the control's planted mismatch, ERM side only
        p = dataclasses.replace(p, lam=p.lam * p.sim_lam_scale, sim_lam_scale=1.0)
    if p.side == "theory":
        fp = state_evolution(setting(p, beta=p.beta, beta0=p.beta0, kappa=p.kappa), p.alpha, nodes=p.nodes)
        return Result(
            metrics={
                "se_test_error": fp.test_error,
                "se_train_loss": fp.train_loss,
                # the quadrature's standard errors (independent scrambles of the nodes)
                "se_test_error_stderr": fp.stderr["test_error"],
                "se_train_loss_stderr": fp.stderr["train_loss"],
                "se_converged": fp.converged,
                "device": "cpu",  # state evolution: numpy/scipy
            }
        )
    r = simulate_point(point, p, erm_config(p), beta=p.beta, beta0=p.beta0, kappa=p.kappa, task=p.task)
    return Result(
        metrics={
            "sim_test_error": r.test_error,
            "sim_train_loss": r.train_loss,
            "converged": r.converged,
            "steps": r.steps,
            "device": device_name(point.device),
        }
    )


def sides(rows: Sequence[Row]) -> tuple[dict, dict]:
    """(theory, simulation): the state-evolution metrics per (α, λ̃) and the Adam rows per (α, λ̃)."""
    theory: dict = {}
    sim: dict = {}
    for r in rows:
        key = (r.params["alpha"], r.params["lam"])
        if "se_test_error" in r.metrics:
            theory.setdefault(key, r.metrics)
        if "sim_test_error" in r.metrics:
            sim.setdefault(key, []).append(r)
    return theory, sim


TOLERANCE = (
    "relative gap of the seed mean (or of its 1/d extrapolation when several d ran) <= 3% + 2 standard "
    "errors of the gap (that estimate's and the state evolution's quadrature error), test error and "
    "training loss"
)


def seed_estimate(rows: Sequence[Row], key: str, correction: float = 1.0) -> tuple[float, float, dict]:
    """The simulation's estimate of ``key`` and its standard error, with the seed means per d.

    One d: the seed mean and its standard error (the seeds' spread over √n). Several d: the seed means
    extrapolated to d → ∞ along ``a + b/d`` (the O(1/d) finite-size correction), by least squares weighted
    by the inverse squared standard errors; the standard error of ``a`` from the same fit. ``correction`` p
    fits ``a + b/d^p`` instead."""
    by_d: dict = {}
    for r in rows:
        by_d.setdefault(r.params["d"], []).append(r.metrics["sim_" + key])
    per = {}
    for d, vs in sorted(by_d.items()):
        v = np.asarray(vs, dtype=float)
        per[d] = (float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else 0.0)
    if len(per) == 1:
        ((m, se),) = per.values()
        return m, se, per
    ds = np.array(sorted(per), dtype=float)
    m = np.array([per[d][0] for d in sorted(per)])
    se = np.array([per[d][1] for d in sorted(per)])
    w = 1 / se**2 if np.all(se > 0) else np.ones_like(se)
    A = np.stack([np.ones_like(ds), ds**-correction], axis=1)  # (k, 2): a + b/d^p
    cov = np.linalg.inv(A.T @ (w[:, None] * A))  # (2, 2)
    coef = cov @ (A.T @ (w * m))
    # with weights 1/se² the covariance of the coefficients is (AᵀWA)⁻¹ (unit weights: that times σ², the
    # residual variance, which two points do not determine: then the se propagate as for an exact fit)
    if not np.all(se > 0):
        cov = np.zeros((2, 2))
    return float(coef[0]), float(np.sqrt(cov[0, 0])), per


def _optimisers(sim: dict) -> list[str]:
    """The optimisers the ERM rows ran with, the test setting's (L-BFGS) first."""
    names = {r.params.get("optimizer", "lbfgs") for rs in sim.values() for r in rs}
    return sorted(names, key=lambda o: (o != "lbfgs", o))


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION, correction: float = 1.0) -> Verdict:
    """The rule (module docstring); with several d the seed means are taken to d → ∞ along ``a + b/d^p``,
    p = ``correction``."""
    good, note = ok_rows(rows)
    theory, sim_all = sides(good)
    pairs = sorted(k for k in sim_all if k in theory)
    if not pairs:
        return Verdict("inconclusive", {}, "-", note + "needs a state-evolution and an ERM row per (α, λ̃)")
    ds = sorted({r.params["d"] for k in pairs for r in sim_all[k]})
    worst, d, band = 0.0, max(ds), 0.0  # one d: that d; several: the extrapolation rests on the largest
    nums: dict = {}
    optimisers = _optimisers({k: sim_all[k] for k in pairs})
    by_opt = {
        o: {k: [r for r in sim_all[k] if r.params.get("optimizer", "lbfgs") == o] for k in pairs}
        for o in optimisers
    }
    seeds = min(
        sum(1 for r in rs if r.params["d"] == dd)
        for sim in by_opt.values()
        for rs in sim.values()
        for dd in {r.params["d"] for r in rs} or {None}
    )
    unconverged = [k for k in pairs if theory[k].get("se_converged") is False]
    for opt, sim in by_opt.items():
        # the test setting's optimiser keeps the plain names; another's carry its name as a prefix
        tag = "" if opt == optimisers[0] else f"{opt}_"
        w_opt = _decide(sim, theory, pairs, pred, nums, tag, correction)
        nums[f"worst_gap_over_tol_{opt}"] = w_opt[0]
        worst, band = max(worst, w_opt[0]), max(band, w_opt[1])
    nums.update(worst_gap_over_tol=worst, d=d, seeds=seeds, points=len(pairs), band=band)
    nums["ds"] = ds
    nums["alphas"] = sorted({a for a, _ in pairs})
    nums["lams"] = sorted({lam for _, lam in pairs})
    nums["optimizers"] = optimisers
    if unconverged:
        return Verdict.outside(f"state evolution not converged at (α, λ̃) = {unconverged}", nums, TOLERANCE)
    if d < 100 or seeds < 3:
        # the 3% floor is the finite-d gap measured at d = 100 with several seeds; thinner data cannot tell
        # that gap from a wrong theory, and two seeds give no usable standard error (seed-to-seed spread
        # of the training loss at d = 100 is ~2.5%)
        return Verdict.outside(
            f"d = {d} with {seeds} seed(s) per point; the regime is d >= 100, >= 3 seeds", nums, TOLERANCE
        )
    status = "holds" if worst <= 1 else "fails"
    return Verdict(status, nums, TOLERANCE, note, branch="seed-mean gap", band=band)


def _decide(
    sim: dict, theory: dict, pairs: Sequence, pred: Predict, nums: dict, tag: str, correction: float = 1.0
) -> tuple[float, float]:
    """The worst gap/tolerance and the widest tolerance of one optimiser's ERM rows ``sim`` (per (α, λ̃)),
    its numbers written into ``nums`` with names prefixed by ``tag``."""
    worst, band = 0.0, 0.0
    for a, lam in pairs:
        rs, th_m = sim[(a, lam)], theory[(a, lam)]
        if not rs:
            continue
        for key in ("test_error", "train_loss"):
            est, se, per = seed_estimate(rs, key, correction)
            th = pred("se_" + key, th_m["se_" + key])
            gap = abs(est - th) / abs(th)
            # the estimate's standard error (the seed mean's, not one seed's spread) and the theory's own
            # (quadrature over independent scrambles; 0 for rows stored before it was recorded)
            sem = se / abs(th)
            th_se = float(th_m.get(f"se_{key}_stderr", 0.0)) / abs(th)
            nums[f"{tag}rel_gap_{key}_a{a}_l{lam}"] = gap
            nums[f"{tag}rel_sem_{key}_a{a}_l{lam}"] = sem
            nums[f"{tag}rel_se_stderr_{key}_a{a}_l{lam}"] = th_se
            if len(per) > 1:
                for dd, (mean, _) in per.items():
                    nums[f"{tag}rel_gap_{key}_a{a}_l{lam}_d{dd}"] = abs(mean - th) / abs(th)
            # a finite-d bias allowance plus the seed noise of the mean (a control designed to hold, seq2lab
            # in highdim.seq2seq, failed under max(sem, 3%): gaps of 4% occur between 3-seed means at d = 100)
            tol = FLOOR + 2 * float(np.hypot(sem, th_se))
            worst = max(worst, gap / tol)
            band = max(band, tol)
    return worst, band


CLAIM = Claim(
    id="highdim.theory-vs-adam",
    kind="theorem",
    grade="evidence",
    paper=PAPER,
    statement="The ERM minimiser's test error and training loss, found by L-BFGS and by the published Adam "
    "protocol, match the state-evolution prediction (within 3% + 2 standard errors of the seed mean "
    "at d = 100).",
    version=10,  # the Adam kernel's two products by OpenBLAS (objective._matmul: other last-bit roundings)
    params=Params,
    # the simulation grid carries the seed replicates; the state evolution (deterministic, independent of
    # d) is an extra grid with its one replicate fixed (rep = 0)
    grids={
        "quick": Grid(
            {"alpha": [0.3016, 0.5], "lam": [0.01, 0.1]},
            {"side": "simulation", "d": 100, "max_steps": 1500},
            seeds=3,
            extra=[
                Grid({"alpha": [0.3016, 0.5], "lam": [0.01, 0.1]}, {"side": "theory", "rep": 0}),
                Grid(
                    {"alpha": [0.3016, 0.5], "lam": [0.01, 0.1]},
                    {"side": "simulation", "d": 100, "max_steps": 1500, "optimizer": "published-adam"},
                    seeds=3,
                ),
            ],
        ),
        "full": Grid(
            {"alpha": [0.15, 0.3016, 0.5, 1.0], "lam": [0.01, 0.1]},
            {"side": "simulation", "d": 100},
            seeds=5,
            extra=[
                Grid(
                    {"alpha": [0.15, 0.3016, 0.5, 1.0], "lam": [0.01, 0.1]},
                    {"side": "theory", "nodes": 8192, "rep": 0},
                ),
                Grid(
                    {"alpha": [0.15, 0.3016, 0.5, 1.0], "lam": [0.01, 0.1]},
                    {"side": "simulation", "d": 100, "optimizer": "published-adam"},
                    seeds=5,
                ),
            ],
        ),
    },
    run=run,
    verdict=verdict,
    predictions={
        "se_test_error": "state-evolution test error at each (α, λ̃)",
        "se_train_loss": "state-evolution training loss per d² at each (α, λ̃)",
    },
    controls={
        "doubled_lam": Control(
            expect="fails",
            set={"sim_lam_scale": 2.0},
            why="the ERM (both optimisers) trained at 2λ̃ against the state evolution at λ̃: the "
            "regularisation the theory is solved at matters, and the seed-mean gap must see it",
        )
    },
    regime="d >= 100 with at least three seeds per (α, λ̃), converged state evolution",
    explain={
        "holds": "The ERM's seed means sit within tolerance of the state evolution at {points} (α, λ̃) "
        "points (worst gap/tolerance {worst_gap_over_tol:.2f}, optimisers {optimizers}; d = {ds}, {seeds} "
        "seeds).",
        "fails": "The ERM's seed mean misses the state evolution by {worst_gap_over_tol:.2f}× the tolerance "
        "at its worst (α, λ̃) point (optimisers {optimizers}; d = {ds}, {seeds} seeds).",
        "inconclusive": "Worst gap/tolerance {worst_gap_over_tol:.2f}, but outside the calibrated regime.",
    },
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
