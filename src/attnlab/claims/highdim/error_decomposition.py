"""``highdim.error-decomposition``: the error of the learned ``S`` splits into over-fitting (noise bulk),
under-fitting (hidden target directions), approximation (recovered outliers) and a rotation part, each as
the theory predicts it (docs/highdim.md C4, C6), on a power-law target with outliers.

Per point: a Haar-rotated power-law target at dimension d; the finite-d state evolution gives the fixed point
(δ, ε, η) and the number of outliers it recovers (:func:`attnlab.highdim.predicted_outliers`); the parts of
``‖Ŝ − S0‖²/d`` along those recovered directions and the rest (:func:`attnlab.highdim.decompose_by_recovered`)
are computed for Adam's ``Ŝ`` and, as the theory's prediction of each part, for draws of the matrix that
``Ŝ`` equals in law, ``η·ReLU(S0 + δZ − ε)`` (:func:`attnlab.highdim.denoiser_sample`, same ``S0``). The
paper's "mismatch" (a saturation value that misses the generalisation optimum) is not defined from the
matrices; the off-diagonal part between recovered and hidden directions takes its place as "rotation".
The parts are parts of ``‖Ŝ − S0‖²/d``; the paper writes the excess test error as
``e1 = c1·E_over + E_under + E_approx + c2·E_mismatch`` and calls it qualitative away from small error. Its
reading here: ``e0`` the test error of ``S0`` itself (the irreducible part) and ``e1 = e(Ŝ) − e0`` on one
test set, each part's share ``e1_part = e(S0 + part) − e0`` (:func:`attnlab.highdim.recovered_blocks`) and
its coefficient ``e1_part / E_part`` (the paper's c1, c2 for over-fitting and mismatch against the under-
fitting and approximation ones), with ``Σ e1_part / e1`` (1 where the error is small enough to be linear);
reported, not decided here (``highdim.error-coefficients`` holds each share against the theory's Gaussian
read-out). That the parts of ``‖Ŝ − S0‖²/d`` sum to the total holds by construction (orthogonal
blocks): a check of the code, reported as such, not evidence.

Regime: the parts are decided at the α where the seed mean of the ERM's total ``‖Ŝ − S0‖²/d`` is within 5%
of the state evolution's ``Q0 + q − 2m`` (else the finite-size offset of the whole error, which decays only
slowly with d — the over part sat 12%, 12% and 9% above the law at α = 0.1 for d = 100, 150, 200, the total
7%, 5% and 5% above — would swamp the parts); such α are reported, and with none the verdict is inconclusive.
That offset is the ordinary finite-d one, as large for a Marchenko–Pastur target, not the power law's
non-Gaussian logits (docs/highdim.md C6, "The other power-law claims"); those move the test errors
``e1`` (reported) through their read-out, not the parts.
Verdict rule: "holds" when, at every decided α, the seed mean of every part is within ``2 × the standard
deviation of the part over the theory's draws × √(1/seeds + 1/(seeds·draws))`` (the fluctuation of that mean
about the law's, if each ERM matrix fluctuates like a draw of the law) ``+ 0.05 × the predicted part`` (a
finite-d allowance, as large as the offset of the total the regime admits) of its prediction, "fails"
otherwise. The quick setting is d = 100 (at d = 50 the total sat 12–15% above the state evolution).
The ERM runs to a tight tolerance (L-BFGS in float32 with float64 sums by default): the theory describes the
minimiser.

Negative control ``scrambled_error`` (``error_frame = "scrambled"``, at α = 0.5 only, where the total sits
closest to the state evolution): the ERM's error ``E = Ŝ − S0`` turned by a Haar-random rotation ``Q``,
``S0 + Q E Qᵀ``, is decomposed instead of ``Ŝ``. Its total ``‖E‖²/d`` is unchanged, so the regime gate passes
as for the test, but the error no longer has the structure relative to the target's eigenbasis that the
theory predicts (how much each part moves is measured, not set): the verdict must fail through the same
"part gap".
"""

from __future__ import annotations

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

__all__ = ["CLAIM", "CLAIMS", "PARTS", "Params", "run", "verdict"]

PARTS = ("over", "under", "approx", "rotation")
REL = 0.05  # tolerance: 2 × the seed mean's expected spread + REL × the predicted part (finite-d allowance)
TOTAL_REL = 0.05  # parts decided only at α where the ERM's total is this close to the state evolution's


@dataclass(frozen=True)
class Params:
    alpha: float = 0.1  # sample ratio n/d²
    d: int = 100  # token dimension
    gamma: float = 1.0  # power-law exponent of the target's eigenvalues s_i ∝ i^(−γ)
    lam: float = 0.01  # λ̃
    noise: float = 0.1  # label-noise variance Δ
    kappa0: float = 0.5  # unused by a power-law target; kept for the Setting
    tokens: int = 2  # sequence length T
    nodes: int = 2048  # quadrature nodes of the state evolution
    draws: int = (
        8  # draws of η·ReLU(S0 + δZ − ε): their mean predicts each part, their spread sets its tolerance
    )
    n_test: int = 4000  # test sequences of the test-error reading (e0, e1 and each part's share)
    error_frame: str = "target"  # "scrambled": the ERM's error turned by a Haar rotation (the control)
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
        "error_frame": OneOf("target", "scrambled"),
    }


def run(point: Point) -> Result:
    import torch

    from attnlab.core.seeding import derive_seed, generator
    from attnlab.highdim import (
        TrainConfig,
        decompose_by_recovered,
        denoiser_sample,
        evaluate,
        power_law_spectrum,
        power_law_target,
        predicted_outliers,
        predicted_spectrum,
        sample,
        simulate,
        state_evolution,
    )
    from attnlab.highdim.decomposition import recovered_blocks

    p: Params = point.p

    def theory():  # seed-independent: shared by the seeds and the control at one α
        s = setting(p, target=power_law_spectrum(p.d, p.gamma))
        fp = state_evolution(s, p.alpha, nodes=p.nodes)
        return fp, predicted_outliers(predicted_spectrum(s, fp), p.d)

    fp, k = shared((__name__, p.d, p.gamma, p.kappa0, p.noise, p.tokens, p.lam, p.alpha, p.nodes), theory)
    S0 = power_law_target(p.d, p.gamma, generator(derive_seed(point.seed, "target")), device=point.device)
    r = simulate(
        p.d,
        p.alpha,
        noise=p.noise,
        tokens=p.tokens,
        lam=p.lam,
        target=S0,
        seed=point.seed,
        config=TrainConfig(max_steps=p.max_steps, rtol=p.rtol, optimizer=p.optimizer, dtype=p.dtype),
    )
    S_hat = r.S
    if p.error_frame == "scrambled":  # S0 + Q (Ŝ − S0) Qᵀ, Q Haar-orthogonal: the same ‖Ŝ − S0‖, no frame
        G = torch.randn(p.d, p.d, generator=generator(derive_seed(point.seed, "frame")), dtype=torch.float64)
        Q, R = torch.linalg.qr(G)
        Q = (Q * torch.sign(torch.diagonal(R))).to(S0.device)
        S_hat = S0 + Q @ (r.S - S0) @ Q.T
    measured = decompose_by_recovered(S_hat, S0, k)
    test = sample(S0, p.n_test, p.tokens, p.noise, 1.0, "seq2lab", generator(derive_seed(point.seed, "test")))
    e0 = evaluate(S0, test)[0]
    e1 = {"e1": evaluate(S_hat, test)[0] - e0}
    for part, D in recovered_blocks(S_hat, S0, k).items():
        e1[f"e1_{part}"] = evaluate(S0 + D, test)[0] - e0
    draws = [
        decompose_by_recovered(
            denoiser_sample(S0, fp.delta, fp.eps, fp.eta, generator(derive_seed(point.seed, i))), S0, k
        )
        for i in range(p.draws)
    ]
    metrics = {f"{part}": getattr(measured, part) for part in (*PARTS, "total", "parts_sum")}
    for part in (*PARTS, "total"):
        metrics[f"pred_{part}"] = float(np.mean([getattr(x, part) for x in draws]))
        metrics[f"sd_{part}"] = float(np.std([getattr(x, part) for x in draws], ddof=1))
    metrics.update(e1, e0=e0, draws=p.draws, n_recovered=k, se_s_error=fp.s_error, steps=r.steps)
    metrics["device"] = device_name(point.device)
    return Result(metrics=metrics)


TOLERANCE = (
    f"|seed mean of a part − predicted| <= 2 × the draws' spread × √(1/seeds + 1/(seeds·draws)) + {REL} × "
    "predicted part, every part and α"
)


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    if not good:
        return Verdict("inconclusive", {}, "-", note + "no rows")
    nums: dict = {}
    worst, where, n_decided, band = 0.0, "", 0, 0.0
    for (a,), rs in sorted(groups(good, ("alpha",)).items()):

        def mean(key: str, rs: Sequence[Row] = rs) -> float:
            return float(np.mean([r.metrics[key] for r in rs]))

        # the seed mean of one ERM matrix per seed against the mean of draws per seed: its spread about the
        # law's mean is the draws' spread × √(1/seeds + 1/(seeds·draws))
        spread = np.sqrt(1 / len(rs) + 1 / (len(rs) * rs[0].metrics["draws"]))
        offset = mean("total") / mean("se_s_error") - 1
        nums[f"total_vs_state_evolution_a{a}"] = offset
        decided = abs(offset) <= TOTAL_REL  # else finite-size offsets of the whole error swamp the parts
        n_decided += decided
        for part in PARTS:
            got, computed = mean(part), mean(f"pred_{part}")
            pv = pred(part, computed)
            # the tolerance is fixed by the computed prediction, so a perturbed one moves the centre only
            tol = 2 * mean(f"sd_{part}") * spread + REL * abs(computed)
            nums[f"{part}_a{a}"], nums[f"pred_{part}_a{a}"], nums[f"tol_{part}_a{a}"] = got, pv, tol
            # the paper's coefficients (c1 for over, c2 for the mismatch part): a reading, not decided
            nums[f"c_{part}_a{a}"] = mean(f"e1_{part}") / got if got > 0 else None
            if decided:
                band = max(band, tol / abs(computed)) if computed else band
            if decided and abs(got - pv) / tol > worst:
                worst, where = abs(got - pv) / tol, f"{part} at α = {a}"
        nums[f"seeds_a{a}"] = len(rs)
        nums[f"recovered_a{a}"] = rs[0].metrics["n_recovered"]
        nums[f"e1_a{a}"] = mean("e1")
        nums[f"e1_parts_over_e1_a{a}"] = sum(mean(f"e1_{p}") for p in PARTS) / mean("e1")
        nums[f"sum_residual_a{a}"] = max(abs(r.metrics["parts_sum"] / r.metrics["total"] - 1) for r in rs)
    first = min(good, key=lambda r: r.params["alpha"])
    a0 = first.params["alpha"]
    nums.update(
        worst_gap_over_tol=worst,
        worst_part=where,
        sum_residual_max=max(v for k, v in nums.items() if k.startswith("sum_residual_a")),
        reading_alpha=a0,
        e1_reading=nums[f"e1_a{a0}"],
        e1_parts_share=nums[f"e1_parts_over_e1_a{a0}"],
        **{f"c_{part}": nums[f"c_{part}_a{a0}"] for part in PARTS},
        alphas_decided=n_decided,
    )
    if not n_decided:
        return Verdict.outside(
            f"at every α the ERM's total ‖Ŝ − S0‖²/d is more than {TOTAL_REL:.0%} from the state "
            "evolution's: finite-size offsets exceed the resolution the parts need",
            nums,
            TOLERANCE,
        )
    # one branch: every part's gap against its tolerance; the band is the widest tolerance as a fraction of
    # its predicted part
    status = "holds" if worst <= 1 else "fails"
    return Verdict(status, nums, TOLERANCE, note, branch="part gap", band=band)


_READING = (
    " The parts sum to the total by construction (largest residual {sum_residual_max:.0e}). Test-error "
    "reading at α = {reading_alpha}: e1 = {e1_reading:.4f}, Σ e1_part / e1 = {e1_parts_share:.2f}, "
    "coefficients e1_part/E_part: over {c_over:.2f}, rotation {c_rotation:.2f}, under {c_under:.2f}, "
    "approx {c_approx:.2f}."
)

CLAIM = Claim(
    id="highdim.error-decomposition",
    kind="theorem",
    grade="evidence",
    paper=PAPER,
    statement="On a power-law target, the error of the learned S splits into over-fitting (noise bulk), "
    "under-fitting (hidden target directions), approximation (recovered outliers) and rotation parts, each "
    "as the theory's η·ReLU(S0 + δZ − ε) predicts it.",
    version=6,  # label nodes folded at T = 2 (channel_nodes.default_fold)
    params=Params,
    grids={
        "quick": Grid(
            {"alpha": [0.1, 0.3, 0.5]}, {"d": 100, "gamma": 1.0, "noise": 0.1, "lam": 0.01}, seeds=3
        ),
        "full": Grid(
            {"alpha": [0.05, 0.1, 0.2, 0.3, 0.5, 1.0]},
            {"d": 150, "gamma": 1.0, "noise": 0.1, "lam": 0.01, "draws": 16},
            # 4 seeds until 2026-12-04 (fails, holds, fails over root seeds 0-2 through different parts); at 8
            # the under part at α = 0.2-0.3 sits 7-14% below the law at every root seed: fails 3/3
            seeds=8,
        ),
    },
    run=run,
    verdict=verdict,
    predictions={f"{part}": f"the {part} part of η·ReLU(S0 + δZ − ε) at the fixed point" for part in PARTS},
    controls={
        "scrambled_error": Control(
            expect="fails",
            set={"error_frame": "scrambled", "alpha": 0.5},
            why="the ERM's error turned by a random rotation keeps its size (the regime gate passes) but "
            "loses "
            "its structure relative to the target's eigenbasis, so the parts must miss the theory's (run at "
            "α = 0.5 only, to keep the quick profile's cost)",
        )
    },
    regime="finite d, a power-law target whose strongest directions stand out as outliers",
    explain={
        "holds": "Every part within tolerance of its prediction (worst: {worst_part}, "
        "{worst_gap_over_tol:.2f} of the tolerance)." + _READING,
        "fails": "{worst_part} misses its prediction by {worst_gap_over_tol:.2f}× the tolerance." + _READING,
    },
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
