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

Verdict rule, at every α where the theory recovers an outlier (at least two such α, else inconclusive):
- the ERM's error falls with every outlier added (``e(j) < e(j − 1)`` for ``j = 1 … k``), and so does the
  theory's;
- the gain ``e(0) − e(k)`` is within ``2 × the standard deviation of the gain over the theory's draws``
  (the finite-d fluctuation of the law itself) plus ``0.05 × the gain`` of the predicted gain ``gain``.
Negative control (``outliers=scrambled``): the kept outliers' eigenvectors replaced by random directions
(same eigenvalues, no information on the target): the error must not fall, so the verdict must fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from attnlab.claims.highdim._common import PAPER, SETTING_DOMAINS, device_name, ok_rows, setting
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

REL = 0.05  # the part of the tolerance relative to the predicted gain (the draws' spread is the rest)


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
    s = setting(p, target=power_law_spectrum(p.d, p.gamma))
    fp = state_evolution(s, p.alpha, nodes=p.nodes)
    ps = predicted_spectrum(s, fp)
    k = predicted_outliers(ps, p.d)
    S0 = power_law_target(p.d, p.gamma, generator(derive_seed(point.seed, "target")), device=point.device)
    cfg = TrainConfig(max_steps=p.max_steps, rtol=p.rtol, optimizer=p.optimizer, dtype=p.dtype)
    r = simulate(
        p.d, p.alpha, noise=p.noise, tokens=p.tokens, lam=p.lam, target=S0, seed=point.seed, config=cfg
    )
    test = sample(S0, p.n_test, p.tokens, p.noise, 1.0, "seq2lab", generator(derive_seed(point.seed, "test")))

    def scramble(i: int):  # a fresh stream of random directions per matrix, or none
        return generator(derive_seed(point.seed, f"scramble{i}")) if p.outliers == "scrambled" else None

    e_sim = _errors(r.S, k, ps.outlier_edge, test, scramble(-1))
    e_th = [
        _errors(
            denoiser_sample(S0, fp.delta, fp.eps, fp.eta, generator(derive_seed(point.seed, i))),
            k,
            ps.outlier_edge,
            test,
            scramble(i),
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
    f"at every α with an outlier: the error falls with each outlier kept (ERM and theory), and |gain − "
    f"predicted gain| <= 2 × the spread of the gain over the theory's draws + {REL} × the predicted gain"
)


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    rs = sorted((r for r in good if r.metrics["k"] >= 1), key=lambda r: r.params["alpha"])
    every = sorted(good, key=lambda r: r.params["alpha"])
    nums: dict = {
        "alphas": [r.params["alpha"] for r in every],
        "outliers_theory": [r.metrics["k"] for r in every],
        "test_error_sim": [r.metrics["test_error_sim"] for r in every],
    }
    if len(rs) < 2:
        return Verdict.outside("fewer than two α at which the theory recovers an outlier", nums, TOLERANCE)
    worst, falls_sim, falls_th = 0.0, True, True
    for r in rs:
        a, e_sim, draws = (
            r.params["alpha"],
            np.asarray(r.arrays["e_sim"]),
            np.asarray(r.arrays["e_theory_draws"]),
        )
        e_th = draws.mean(axis=0)
        falls_sim &= bool(np.all(np.diff(e_sim) < 0))
        falls_th &= bool(np.all(np.diff(e_th) < 0))
        gains = draws[:, 0] - draws[:, -1]
        g_pred = pred("gain", float(gains.mean()))
        tol = 2 * float(gains.std(ddof=1)) + REL * abs(float(gains.mean()))
        g_sim = float(e_sim[0] - e_sim[-1])
        nums[f"gain_sim_a{a}"], nums[f"gain_theory_a{a}"], nums[f"gain_tol_a{a}"] = g_sim, g_pred, tol
        worst = max(worst, abs(g_sim - g_pred) / tol)
    nums.update(
        falls_sim=falls_sim, falls_theory=falls_th, worst_gain_gap_over_tol=worst, alphas_tested=len(rs)
    )
    ok = falls_sim and falls_th and worst <= 1
    return Verdict("holds" if ok else "fails", nums, TOLERANCE, note)


CLAIM = Claim(
    id="highdim.outliers-generalisation",
    kind="theorem",
    grade="evidence",
    paper=PAPER,
    statement="More recovered outliers, better generalisation: keeping more of the learned outliers lowers "
    "the test error, by the gain the theory's η·ReLU(S0 + δZ − ε) predicts; outliers that carry no "
    "information on the target do not.",
    version=2,
    params=Params,
    grids={
        "quick": Grid({"alpha": [0.06, 0.15, 0.4]}, {"d": 40, "gamma": 1.0, "noise": 0.1, "lam": 0.01}),
        "full": Grid(
            {"alpha": [0.03, 0.06, 0.1, 0.15, 0.25, 0.4]},
            {"d": 100, "gamma": 1.0, "noise": 0.1, "lam": 0.01, "nodes": 2048},
            seeds=2,
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
        "holds": "At {alphas_tested} α the test error falls with every outlier kept (ERM and theory) and the "
        "gain matches the prediction (worst {worst_gain_gap_over_tol:.2f} of the tolerance); theory counts "
        "{outliers_theory} over α {alphas}.",
        "fails": "Error falls with each outlier: ERM {falls_sim}, theory {falls_theory}; worst gain gap "
        "{worst_gain_gap_over_tol:.2f} of the tolerance (theory counts {outliers_theory} over α {alphas}).",
        "inconclusive": "Theory counts {outliers_theory} over α {alphas}.",
    },
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
