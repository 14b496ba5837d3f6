"""``highdim.nuclear-norm``: weight decay on the factor is a nuclear-norm penalty on S (docs/highdim.md
C2), so factorised ERM reaches the same minimum as nuclear-norm-penalised ERM over PSD S.

Per point: one MP(κ0) target and training set; the factorised ERM on ``W`` (``S = WᵀW/√(pd)``, weight decay
``λ = λ̃/√κ``; L-BFGS by default, the published Adam protocol with ``--set optimizer=adam dtype=float64``)
and proximal gradient on ``S`` with eigenvalue soft-thresholding (:func:`attnlab.highdim.nuclear_psd_erm`),
both scored by the same objective ``F(S) = [data loss + d λ̃ Tr S]/d²``
(:func:`attnlab.highdim.nuclear_objective`). The loss is not convex in S (softmax): the claim compares the
minima reached and claims no certificate.

Verdict rule: "holds" when at every point and from every one of the ``inits`` random initialisations of
``W`` the relative gap ``|F(S_ERM) − F(S_prox)| / F(S_prox)`` is at most 1e-3 (the optimisers' stopping rules
leave ~1e-5), "fails" otherwise: the statement is that training the factorised model reaches the
nuclear-norm minimum, so an initialisation that stops at another minimum counts against it. The best
initialisation's gap is reported beside it (whether the lowest minimum found agrees). λ̃ is an open knob
(the statement covers every λ̃ > 0), mapped over 0.01 and 0.1 (quick) and 0.001, 0.01, 0.1 (full). Measured
at d = 60 over root seeds 0 and 1, eight initialisations per draw: at λ̃ ≥ 0.01 every initialisation of
every draw reached the proximal objective within 2.7e-6; at λ̃ = 0.001, α = 0.3 two draws of four had
further minima (8 of 8 and 3 of 8 initialisations 1e-3 … 1.4e-2 above, in float64 at rtol 1e-9 too), and at
α = 0.1 one initialisation went 7.2e-4 below the proximal gradient's own stopping point. Negative control
``wrong_penalty``: the ERM trained with 1.2 λ̃ (``adam_lam_scale = 1.2``), the minimiser of an objective
close to the one scored, must come out "fails" through the same objective gap. Near the minimum the gap
grows like the square of the penalty's error, so a small mismatch tests the 1e-3 band itself: 4 λ̃ left a
gap of 0.49 (nearly 500 times the band); measured on the quick points over root seeds 0–3, 1.1 λ̃ leaves a
largest gap of 1.5e-3–1.6e-3, 1.2 λ̃ 5.5e-3–5.9e-3 (2.2e-3–2.5e-3 at λ̃ = 0.01), 1.5 λ̃ 0.03.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from attnlab.claims.highdim._common import PAPER, SETTING_DOMAINS, device_name, ok_rows, train_config
from attnlab.engine.params import In
from attnlab.engine.protocol import Claim, Control, Grid, Knob, Point, Result, Row, Verdict

__all__ = ["CLAIM", "CLAIMS", "Params", "run", "verdict"]

TOL = 1e-3  # relative gap of the objectives reached


@dataclass(frozen=True)
class Params:
    alpha: float = 0.3  # sample ratio n/d²
    lam: float = 0.01  # λ̃ of the objective both methods are scored by
    d: int = 40  # token dimension
    kappa0: float = 0.5  # target rank ratio p0/d
    noise: float = 0.5  # label-noise variance Δ
    tokens: int = 2  # sequence length T
    adam_lam_scale: float = 1.0  # the factorised ERM trains with this times λ̃ (1.2: the control)
    prox_steps: int = 3000  # proximal-gradient step cap
    optimizer: Literal["lbfgs", "adam"] = "lbfgs"  # ERM optimiser ("adam": the published protocol)
    dtype: Literal["float32", "float64"] = "float32"  # precision of data and logits (sums in float64)
    max_steps: int = 3000  # optimiser step cap
    rtol: float | None = None  # stopping tolerance (None: the optimiser's default, TrainConfig.rtol)
    inits: int = 1  # random initialisations of W, each trained to its own minimum (the data drawn once)

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        **SETTING_DOMAINS,
        "lam": In("[0, inf)"),
        "adam_lam_scale": In("(0, inf)"),
        "prox_steps": In("[1, inf)", cap=1_000_000),
        "inits": In("[1, inf)", cap=256),
    }


def run(point: Point) -> Result:
    from attnlab.core.seeding import derive_seed, generator
    from attnlab.highdim import mp_target, nuclear_objective, nuclear_psd_erm, sample, train_erm

    p: Params = point.p
    g = generator(derive_seed(point.seed, "data"))
    S0 = mp_target(p.d, p.kappa0, g, device=point.device)  # drawn on CPU; samples and training follow S0
    tr = sample(S0, round(p.alpha * p.d * p.d), p.tokens, p.noise, 1.0, "seq2lab", g)
    prox = nuclear_psd_erm(tr, lam=p.lam, max_steps=p.prox_steps)
    ref = prox.objective
    fits = []  # (signed relative gap, ERM result, its objective) per initialisation
    for i in range(p.inits):  # the first initialisation is the single-start claim's (versions <= 3)
        adam = train_erm(
            tr,
            None,
            lam=p.lam * p.adam_lam_scale,
            config=train_config(p),
            generator=generator(derive_seed(point.seed, "init" if i == 0 else f"init{i}")),
        )
        f_adam = nuclear_objective(adam.S, tr, p.lam)
        fits.append(((f_adam - ref) / ref, adam, f_adam))
    gap, adam, f_adam = max(fits, key=lambda t: abs(t[0]))  # the initialisation farthest from the prox
    gaps = [t[0] for t in fits]
    return Result(
        metrics={
            "objective_adam": f_adam,
            "objective_prox": ref,
            "rel_gap": abs(gap),
            "rel_gaps": gaps,
            "rel_gap_best": min(abs(g) for g in gaps),
            "inits_off": sum(abs(g) > TOL for g in gaps),
            "rel_distance_S": float(((adam.S - prox.S) ** 2).sum() / (prox.S**2).sum()),
            "rank_adam": adam.rank,
            "rank_prox": prox.rank,
            "steps_adam": adam.steps,
            "steps_prox": prox.steps,
            "prox_converged": prox.converged,
            "device": device_name(point.device),
        }
    )


def verdict(rows: Sequence[Row]) -> Verdict:
    good, note = ok_rows(rows)
    if not good:
        return Verdict("inconclusive", {}, "-", note + "no rows")
    worst = max(good, key=lambda r: r.metrics["rel_gap"])
    m = worst.metrics
    nums = {
        "max_rel_gap": m["rel_gap"],
        "rel_distance_S_at_worst": m["rel_distance_S"],
        "ranks_at_worst": [m["rank_adam"], m["rank_prox"]],
        "points": len(good),
        # rows stored before initialisations were counted hold one
        "inits": min(len(r.metrics.get("rel_gaps", [0])) for r in good),
        "inits_off": sum(r.metrics.get("inits_off", int(r.metrics["rel_gap"] > TOL)) for r in good),
        "max_best_gap": max(r.metrics.get("rel_gap_best", r.metrics["rel_gap"]) for r in good),
    }
    status = "holds" if nums["max_rel_gap"] <= TOL else "fails"
    # one branch: the largest relative gap of the objectives against TOL (the band)
    return Verdict(status, nums, f"relative gap <= {TOL:g}", note, branch="objective gap", band=TOL)


CLAIM = Claim(
    id="highdim.nuclear-norm",
    kind="theorem",
    grade="evidence",
    paper=PAPER,
    statement="Factorised ERM (on W with weight decay, by L-BFGS or Adam) reaches the same minimum as "
    "nuclear-norm-penalised ERM over PSD S (proximal gradient with eigenvalue soft-thresholding), λ̃ = √κ λ, "
    "from every random initialisation.",
    version=4,  # several initialisations per draw; λ̃ a knob
    params=Params,
    grids={
        "quick": Grid({}, {"alpha": 0.3, "d": 40, "lam": 0.01, "inits": 4}),
        # 2 draws per α until 2026-12-04: the λ̃ = 0.001 cell then met a draw with further minima at one root
        # seed of three; with 4 draws of 8 initialisations at two of three (depends, holds, depends); with 12
        # at every one (12, 21, 12 initialisations of 288 beyond the band): depends, stable 3/3
        "full": Grid({"alpha": [0.1, 0.3, 1.0]}, {"d": 60, "lam": 0.01, "inits": 8}, seeds=12),
    },
    run=run,
    verdict=verdict,
    controls={
        "wrong_penalty": Control(
            expect="fails",
            set={"adam_lam_scale": 1.2},
            why="the ERM then minimises the objective with 1.2 λ̃, whose minimiser is not the λ̃ one; the "
            "mismatch is small enough that its objective gap lies a few times the band away",
        )
    },
    knobs={
        "lam": Knob(
            {"quick": [0.01, 0.1], "full": [0.001, 0.01, 0.1]},
            "the equivalence is stated for every penalty λ̃ > 0; a weak one leaves the factorised loss flat",
        )
    },
    regime="any (α, λ̃) with λ̃ > 0; a comparison of minima reached, not a certificate",
    explain={
        "holds": "ERM on W from each of {inits} initialisation(s) and proximal gradient on S reach the same "
        "objective to {max_rel_gap:.1e} (relative; S differ by {rel_distance_S_at_worst:.1e}, ranks "
        "{ranks_at_worst}) at {points} point(s).",
        "fails": "The objectives reached differ by {max_rel_gap:.1e} (relative) at the worst point and "
        "initialisation ({inits_off} initialisation(s) beyond the band in all; the best initialisation of "
        "each point within {max_best_gap:.1e}).",
    },
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
