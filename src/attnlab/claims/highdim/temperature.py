"""``highdim.temperature``: the theory holds at inverse temperatures β = β0 ≠ 1 (docs/highdim.md C1–C3):
the ERM student ``rowsoftmax(β Z(S))`` trained on a target at ``β0`` matches the state evolution at the
same (β, β0).

Runs :mod:`~attnlab.claims.highdim.theory_vs_adam`'s two sides at β = β0 = 2. At β = 2 the ERM's training
loss sits above the state evolution by a finite-size gap that falls with d (seed means, α = 0.5: 7.4%,
6.6%, 5.1% at d = 40, 60, 100; α = 0.3016: 6.6%, 4.3%, 2.2%), larger than the 3% that theory-vs-adam
allows at β = 1, and the seed-to-seed spread is 3–4% at d = 100: decided at d = 100 alone the verdict sat
on its tolerance and flipped with the root seed. So the rule extrapolates, and only where the trend it
assumes is tested: the ERM runs at three sizes (quick: d = 40, 60, 100 with 12, 8 and 6 seeds; full:
d = 100, 150, 200 with 16, 12 and 10, so that the two largest sizes decide nearly directly: seed standard
errors of about 1% against the 3% floor), the seed means are fitted by ``a + b/d`` weighted by their inverse
squared standard errors (:func:`theory_vs_adam.seed_estimate`), and

- the trend is tested first: the fit's χ² (one degree of freedom per size beyond two) must stay below its
  99% quantile for every (α, quantity), else the verdict is inconclusive (the sizes do not follow a + b/d);
- the extrapolated ``a`` is held against the state evolution with theory-vs-adam's rule: relative gap
  within 3% + 2 standard errors (``a``'s, from the fit, and the state evolution's quadrature error in
  quadrature) for the test error and the training loss (branch "extrapolated gap"); the state-evolution
  test error and training loss are the predictions.

The order of the finite-size correction is assumed, so the same verdict is also taken along
``a + b/d^p`` for p = 1/2 and 2 (``forms``: worst gap/tolerance, status, refuted per p): where a form the
seeds do not refute decides otherwise, the verdict is form-dependent (inconclusive).

Fewer than three sizes, fewer than three seeds at a size, or a largest d below 100: inconclusive. The gaps
at each d are reported beside the verdict. α is an open knob: the statement holds at every α, mapped over
0.3016 and 0.5 (quick) and over the published β = 2 range in full, 0.3016, 0.45, 0.5, 0.75 and 1.0 (the
published data cover 0.3 and α ≥ 0.45).

Measurement at β = 2 (each measured at α = 0.3016, λ̃ = 0.01, d = 100): the softmax is sharper, so
- the state evolution's output quadrature runs four scrambles of 4096 nodes (quick) and 8192 (full), in
  four (quick) and eight (full) independent solves on disjoint scrambles combined by :func:`solves_row` (the
  fixed point of lowest training loss that several solves find, its mean, and an error bar from the spread
  between the solves), and that standard error enters the tolerance;
- the training loss has several nearby local minima in W: from the published N(0, 1) start the
  saturated softmax leaves L-BFGS in a higher one (d = 60: 0.0097365 from four starts, against 0.0096781
  from a 0.1-scaled start or by Adam), so the factor starts at scale 0.1 (``init_scale``), which reached
  the lowest training loss of the three optimisers in two of three data sets;
- the training loss varies from data set to data set by 3–4% at d = 100 and by 6–11% at d = 40 and 60,
  hence more seeds at the smaller sizes (they cost a fraction of one d = 100 run).

Negative control ``beta_one_erm``: the ERM side at β = β0 = 1 (``sim_beta = 1``) held against the
state evolution at β = β0 = 2 must come out "fails", through the same extrapolated gap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from attnlab.claims.highdim import theory_vs_adam as tva
from attnlab.claims.highdim._common import CORRECTIONS, FORM_DEPENDENT, ok_rows, setting, shared_theory_row
from attnlab.engine.params import In
from attnlab.engine.protocol import (
    NO_PERTURBATION,
    Claim,
    Control,
    Grid,
    Knob,
    Point,
    Predict,
    Result,
    Row,
    Verdict,
)

__all__ = ["CLAIM", "CLAIMS", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params(tva.Params):
    beta: float = 2.0  # student inverse temperature β
    beta0: float = 2.0  # target inverse temperature β0
    init_scale: float = 0.1  # the factor starts N(0, 0.01): a lower local minimum at β = 2 (module docstring)
    sim_beta: float | None = None  # β = β0 of the ERM side only (None: beta, beta0); the control sets 1
    theory_solves: int = 1  # independent state-evolution solves combined into the theory row (solves_row)

    DOMAINS = {**tva.Params.DOMAINS, "theory_solves": In("[1, inf)", cap=256)}


def run(point: Point) -> Result:
    p: Params = point.p
    if p.side == "simulation" and p.sim_beta is not None:
        return tva.run(point, dataclasses.replace(p, beta=p.sim_beta, beta0=p.sim_beta))
    if p.side == "theory":  # beta_one_erm's theory row is the test's (it changes the ERM side only)
        return shared_theory_row(point, _theory)
    return tva.run(point)


#: solves whose q differ by more than this relative gap (sorted by q) sit on different fixed points: within
#: the small-q branch at α = 1 (8192 nodes, where q is worst conditioned) neighbouring solves lie up to 6.4%
#: apart and the six span 2.01-2.44; the two branches lie a factor 2.1-2.6 apart (docs/highdim.md,
#: temperature)
BRANCH_GAP = 0.25
MIN_BRANCH_SOLVES = 3  # solves needed on the selected fixed point for a spread between them
#: a solve whose own scrambles disagree on the training loss by more than this (relative standard error)
#: resolves no fixed point: straddling the branches, its linearised scramble points gave 0.065 ± 0.021 and
#: -3.8 ± 3.9 where the branches give 0.085 (docs/highdim.md, temperature); resolved solves stay below 0.003
UNRESOLVED_SOLVE = 0.10


def _theory(point: Point) -> Result:
    """The theory row: one solve (``theory_solves = 1``, theory-vs-adam's row) or :func:`solves_row` over
    ``theory_solves`` solves on disjoint scrambles (seeds 0, R, 2R, ... with R scrambles a solve)."""
    p: Params = point.p
    if p.theory_solves == 1:
        return tva.run(point)
    from attnlab.highdim import state_evolution
    from attnlab.highdim.scrambles import SCRAMBLES

    st = setting(p, beta=p.beta, beta0=p.beta0, kappa=p.kappa)
    fps = [state_evolution(st, p.alpha, nodes=p.nodes, seed=SCRAMBLES * k) for k in range(p.theory_solves)]
    return Result(metrics=solves_row(fps))


def solves_row(fps: Sequence) -> dict:
    """The theory row from independent state-evolution solves ``fps`` (FixedPoint-like: ``q``,
    ``test_error``, ``train_loss``, ``stderr``, ``converged``).

    Near the fold of the β = 2 branches (α = 0.75-1) one solve's error bar, from the spread of its own
    scrambles' linearised points, understates how far independent solves scatter (at α = 0.75 the training
    loss's by 2.3 times on the claim's 8192 nodes and 25 times on the default nodes), and at α = 1 two of
    eight solves on 8192 nodes land on the other branch (docs/highdim.md, temperature). So:
    the solves with finite values that resolve a fixed point (the training loss's relative standard error at
    most :data:`UNRESOLVED_SOLVE`) are grouped into fixed points (sorted by q, a new group past a relative gap
    of :data:`BRANCH_GAP`); among the groups of at least :data:`MIN_BRANCH_SOLVES` solves (else the largest)
    the one with the lowest mean training loss is taken (the rule for several fixed points, docs/highdim.md
    C3, without its stability check); its mean is the prediction and its standard error the larger of the
    spread between its solves over √n and the solves' own standard errors pooled (rms over √n). The row is
    converged when that group holds at least :data:`MIN_BRANCH_SOLVES` solves and at least half of them
    converged (an unconverged solve there stopped its rounds short of a fifth of its error bar: the spread
    between solves carries that). ``se_branches``, ``se_solves_used`` and ``se_solves_converged`` say how
    it came out."""
    vals = [
        fp
        for fp in fps
        if all(np.isfinite(v) for v in (fp.q, fp.test_error, fp.train_loss))
        and fp.stderr["train_loss"] <= UNRESOLVED_SOLVE * abs(fp.train_loss)
    ]
    groups: list[list] = []
    for fp in sorted(vals, key=lambda f: f.q):
        if groups and fp.q <= groups[-1][-1].q * (1 + BRANCH_GAP):
            groups[-1].append(fp)
        else:
            groups.append([fp])
    out: dict = {"se_solves": len(fps), "se_branches": len(groups), "device": "cpu"}
    if not groups:
        out.update(se_test_error=float("nan"), se_train_loss=float("nan"), se_converged=False)
        out.update(se_solves_used=0, se_solves_converged=0)
        return out
    # a fixed point is one several solves find: a lone solve that slips through the filter above must not
    # win the selection with a training loss the other solves do not share
    found = [g for g in groups if len(g) >= MIN_BRANCH_SOLVES] or [max(groups, key=len)]
    best = min(found, key=lambda g: float(np.mean([f.train_loss for f in g])))
    n = len(best)
    conv = sum(bool(f.converged) for f in best)
    for key, name in (("test_error", "se_test_error"), ("train_loss", "se_train_loss"), ("q", "se_q")):
        v = np.array([getattr(f, key) for f in best], dtype=float)
        own = np.array([f.stderr[key] for f in best], dtype=float)
        spread = float(v.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
        out[name] = float(v.mean())
        out[name + "_stderr"] = max(spread, float(np.sqrt(np.mean(own**2)) / np.sqrt(n)))
        out[name + "_spread_stderr"] = spread
    out.update(se_solves_used=n, se_solves_converged=conv)
    out["se_converged"] = n >= MIN_BRANCH_SOLVES and 2 * conv >= n
    return out


#: the trend a + b/d is refuted when its fit's χ² exceeds this quantile of the χ² law
TREND_QUANTILE = 0.99
MIN_SIZES = 3  # sizes needed to test the a + b/d trend (two determine it exactly)


def _grid(sizes: dict[int, int], max_steps: int, nodes: int, solves: int) -> Grid:
    # β = β0 = 2 (Params defaults); α is the knob (one value per cell); the ERM at each d with its own
    # number of seeds (a fixed ``rep`` makes an extra grid keep its own ``seeds``), the theory once, from
    # ``solves`` independent state-evolution solves (solves_row)
    sim = {"side": "simulation", "lam": 0.01, "max_steps": max_steps}
    (d0, n0), *rest = sorted(sizes.items(), reverse=True)
    extra = [Grid({}, {**sim, "d": d, "rep": 0}, n) for d, n in rest]
    theory = Grid({}, {"side": "theory", "lam": 0.01, "nodes": nodes, "theory_solves": solves, "rep": 0})
    return Grid({}, {**sim, "d": d0}, n0, extra=[*extra, theory])


def trend_chi2(per: dict, correction: float = 1.0) -> tuple[float, int]:
    """(χ², degrees of freedom) of the weighted fit ``a + b/d`` (``a + b/d^p``, p = ``correction``) to seed
    means ``per = {d: (mean, se)}``: the residuals over their standard errors, squared and summed;
    ``len(per) − 2`` degrees of freedom."""
    ds = np.array(sorted(per), dtype=float)
    m = np.array([per[d][0] for d in sorted(per)])
    se = np.array([per[d][1] for d in sorted(per)])
    A = np.stack([np.ones_like(ds), ds**-correction], axis=1)  # (k, 2)
    w = 1 / se**2
    coef = np.linalg.solve(A.T @ (w[:, None] * A), A.T @ (w * m))
    return float(np.sum(w * (m - A @ coef) ** 2)), len(per) - 2


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    """:func:`theory_vs_adam.verdict` on the seed means extrapolated in 1/d from at least three sizes,
    after a χ² test of that trend (module docstring)."""
    good, _ = ok_rows(rows)
    theory, sim = tva.sides(good)
    v = tva.verdict(rows, pred)
    nums = dict(v.numbers)
    sizes = {k: sorted({r.params["d"] for r in rs}) for k, rs in sim.items() if k in theory}
    for (a, lam), m in theory.items():
        if "se_solves" in m:
            nums[f"se_solves_a{a}_l{lam}"] = [
                m["se_solves"],
                m["se_branches"],
                m["se_solves_used"],
                m["se_solves_converged"],
            ]
    unresolved = [
        f"α = {a}: of {m['se_solves']} solves, {m['se_solves_used']} on the fixed point of lowest training "
        f"loss ({m['se_branches']} found), {m['se_solves_converged']} of them converged"
        for (a, lam), m in sorted(theory.items())
        if "se_solves" in m and not m["se_converged"] and (a, lam) in sim
    ]
    if unresolved:
        why = (
            f"state evolution unresolved (needs >= {MIN_BRANCH_SOLVES} solves on one fixed point, half of "
            "them converged): "
        )
        return Verdict.outside(why + "; ".join(unresolved), nums, tva.TOLERANCE)
    if v.status == "inconclusive" or not sizes:
        return dataclasses.replace(v, numbers=nums)
    few = min(len(ds) for ds in sizes.values())
    if few < MIN_SIZES:
        why = f"{few} size(s) of d; the 1/d trend needs >= {MIN_SIZES} to be tested, not only fitted"
        return Verdict.outside(why, nums, tva.TOLERANCE)
    refuted = []
    for (a, lam), rs in sim.items():
        if (a, lam) not in theory:
            continue
        for key in ("test_error", "train_loss"):
            _, _, per = tva.seed_estimate(rs, key)
            if any(se <= 0 for _, se in per.values()):
                return Verdict.outside("a size with no spread between seeds: no weights", nums, tva.TOLERANCE)
            c2, dof = trend_chi2(per)
            nums[f"trend_chi2_{key}_a{a}_l{lam}"] = c2
            if c2 > chi2.ppf(TREND_QUANTILE, dof):
                refuted.append(f"{key} at α = {a}: χ² {c2:.1f} on {dof} dof")
    nums["trend_chi2_limit"] = float(chi2.ppf(TREND_QUANTILE, few - 2))
    if refuted:
        why = "the seed means do not follow a + b/d: " + "; ".join(refuted)
        return Verdict.outside(why, nums, tva.TOLERANCE)
    why = _along_forms(rows, pred, sim, theory, v.status, nums)
    if why is not None:
        return Verdict.outside(why, nums, tva.TOLERANCE)
    return dataclasses.replace(v, numbers=nums, branch="extrapolated gap")


def _along_forms(rows, pred, sim: dict, theory: dict, status: str, nums: dict) -> str | None:
    """The same verdict with the seed means taken to d → ∞ along ``a + b/d^p`` for the other finite-size
    forms (:data:`~attnlab.claims.highdim._common.CORRECTIONS`); ``nums["forms"]``: per p the worst
    gap/tolerance, the status and whether the seeds refute that form (χ² as for ``a + b/d``). None when
    every unrefuted form decides as ``a + b/d`` did (``status``), else why the verdict is form-dependent."""
    forms: dict = {"1": [nums["worst_gap_over_tol"], status, False]}
    for p in CORRECTIONS:
        if p == 1:
            continue
        c2s = [
            trend_chi2(tva.seed_estimate(rs, key, p)[2], p)
            for (a, lam), rs in sim.items()
            if (a, lam) in theory
            for key in ("test_error", "train_loss")
        ]
        refuted = any(c2 > chi2.ppf(TREND_QUANTILE, dof) for c2, dof in c2s)
        vp = tva.verdict(rows, pred, correction=p)
        forms[f"{p:g}"] = [vp.numbers.get("worst_gap_over_tol", float("nan")), vp.status, refuted]
    nums["forms"] = forms
    decided = {p: st for p, (_, st, refuted) in forms.items() if not refuted}
    if len(set(decided.values())) <= 1:
        return None
    yes = ", ".join(p for p, st in decided.items() if st == "holds")
    no = ", ".join(p for p, st in decided.items() if st != "holds")
    return f"{FORM_DEPENDENT}: holds along a + b/d^p for p = {yes}, not for p = {no}"


CLAIM = Claim(
    id="highdim.temperature",
    kind="theorem",
    grade="evidence",
    paper=tva.PAPER,
    statement="At β = β0 ≠ 1 the ERM's test error and training loss match the state evolution at the same "
    "temperatures (β = β0 = 2; the seed means at three sizes extrapolated along a tested a + b/d, within "
    "3% + 2 standard errors; mapped over α).",
    version=10,  # the theory row from independent solves (solves_row)
    params=Params,
    grids={
        "quick": _grid({40: 12, 60: 8, 100: 6}, 1500, 4096, 4),
        "full": _grid({100: 16, 150: 12, 200: 10}, 3000, 8192, 8),
    },
    run=run,
    verdict=verdict,
    knobs={
        "alpha": Knob(
            {"quick": [0.3016, 0.5], "full": [0.3016, 0.45, 0.5, 0.75, 1.0]},
            "the statement holds at every sample ratio; the published β = 2 data cover 0.3 and α >= 0.45",
        )
    },
    predictions=tva.CLAIM.predictions,
    controls={
        "beta_one_erm": Control(
            expect="fails",
            set={"sim_beta": 1.0},
            why="the ERM at β = β0 = 1 against the state evolution at β = β0 = 2: the temperatures matter "
            "(the same sizes and the same extrapolation)",
        )
    },
    regime=tva.CLAIM.regime,
    explain=tva.CLAIM.explain,
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
