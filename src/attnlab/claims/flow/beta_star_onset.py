"""``flow.beta-star-onset`` (Thm 19, its reading): is β* where radial shadows make per-head energy fall?

Thm 19 gives β* = (1/(2λ)) ln(c*²(n−1)/(1−c*²)) as the threshold of Condition 8 (form 3 of radial
dominance, a sufficient condition for every per-head energy to rise). Its reading — "below β* each
head's energy rises; above it radial shadows win" — is a statement about the dynamics, decided here on
the system where shadows exist: H equally strong heads ``M_h = V_h = λP_h`` on mutually orthogonal blocks
of R^d (usa kind), states drawn at random (law: random orthonormal tokens, or uniform on the sphere, an
open knob), β on a grid of fixed ratios β/β* from 0.25 to 32. Per setting (H, n) the statistic is the
fraction of states where some ``dE_h/dt < −1e-12·E_h`` (:func:`attnlab.dynamics.radial_scan`); the onset
is the smallest grid β where it exceeds 1%, and ρ = onset/β*.

Positive control (statistic ``form3-scalar``): the same rule on the quantity β* was derived for — the
fraction of the same states where form 3 breaks for identical scalar heads λI — whose onset at orthogonal
tokens is β* by construction (first grid ratio above 1). Part ``implication`` (identity): under
orthogonal blocks form 3 ⇒ form 1 ⇔ dE_h/dt ≥ 0 is algebra; checked on states no symmetry settles
(random strengths λ_h ∈ [0.5, 2] per head, random symmetric matrices within the blocks, uniform tokens).

Verdict rule (stated before the numbers): holds when every setting's onset ratio lies within ``band``
(10%, the grid's spacing at β*) of the predicted β*, i.e. ρ ∈ [1/1.1, 1.1] (branch "onset ratio"); fails
when some setting's onset lies outside (an onset beyond the grid counts as ρ > 32); fails if the
identity part finds a state with form 3 and a falling per-head energy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import Heads, head_outputs, init, radial_dominance, radial_scan
from attnlab.dynamics import theory as T
from attnlab.engine.params import In
from attnlab.engine.protocol import (
    NO_PERTURBATION,
    Claim,
    Control,
    Grid,
    Knob,
    Part,
    Point,
    Predict,
    Result,
    Row,
    Verdict,
)

__all__ = ["CLAIM", "Params", "run", "verdict"]

RATIOS = [0.25, 0.5, 0.75, 0.9, 0.95, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0]
IMPLICATION_BETAS = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]


@dataclass(frozen=True)
class Params:
    part: Literal["onset", "implication"] = "onset"  # the onset against β*, or the identity form 3 ⇒ dE_h ≥ 0
    statistic: Literal["energy-fall", "form3-scalar"] = "energy-fall"  # what marks the onset
    heads: int = 2  # number of heads H
    n: int = 32  # tokens
    d: int = 64  # token dimension (≥ n for orthogonal tokens; blocks of d/H)
    strength: float = 1.0  # head strength λ
    law: Literal["orthogonal", "uniform"] = "orthogonal"  # token law
    draws: int = 256  # token states
    threshold: float = 0.01  # onset: the statistic's fraction first above this
    beta_ratios: list[float] = field(default_factory=lambda: list(RATIOS))  # β/β* grid (onset)
    betas: list[float] = field(default_factory=lambda: list(IMPLICATION_BETAS))  # β grid (implication)
    band: float = 0.1  # largest relative distance of the onset from β*

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "heads": In("[2, inf)", cap=256),
        "n": In("[2, inf)", cap=100_000),
        "d": In("[1, inf)", cap=100_000),
        "strength": In("(0, inf)"),
        "draws": In("[1, inf)", cap=100_000),
        "threshold": In("(0, 1)"),
        "beta_ratios": In("(0, inf)", length="[1, 200]"),
        "betas": In("(0, inf)", length="[1, 200]"),
        "band": In("(0, inf)"),
    }


def _form3_breaks(spec: Heads, x: torch.Tensor, betas: np.ndarray) -> np.ndarray:
    """Fraction of states where form 3 fails for some head, at each β (K,)."""
    out = []
    for b in betas:
        rd = radial_dominance(head_outputs(spec, x, float(b)), x)
        out.append(float((~rd.form3.all(-1)).double().mean()))
    return np.array(out)


def run(point: Point) -> Result:
    p: Params = point.p
    g = point.generator()
    make = init.orthogonal if p.law == "orthogonal" else init.uniform
    x = make(batch=p.draws, n=p.n, d=p.d, generator=g, device=point.device)
    if p.part == "implication":
        lam = (0.5 + 1.5 * torch.rand(p.heads, generator=g, dtype=torch.float64)).tolist()
        spec = Heads.orthogonal_subspaces(
            p.heads, p.d, strength=lam, generator=g, random_within=True, kind="usa", device=point.device
        )
        sc = radial_scan(spec, x, p.betas)
        return Result(
            metrics={
                "form3_and_fall": int(sc.form3_and_fall.sum()),
                "states": p.draws * len(p.betas),
                "form3_fraction": sc.form3.tolist(),
                "fall_fraction": sc.fall.tolist(),
                "device": device_name(point.device),
            },
            arrays={"beta": sc.betas, "form3": sc.form3, "fall": sc.fall},
        )
    bs = T.beta_star(p.heads, p.n, p.strength)
    if not bs.valid:
        raise ValueError(f"heads, n: expected a valid β* (> 0), got {bs.note}")
    betas = np.array(p.beta_ratios) * bs.beta_star
    spec = Heads.orthogonal_subspaces(p.heads, p.d, strength=p.strength, kind="usa", device=point.device)
    sc = radial_scan(spec, x, betas)
    if p.statistic == "energy-fall":
        stat = sc.fall
    else:
        scalar = Heads.scalar([p.strength] * p.heads, d=p.d, kind="usa", device=point.device)
        stat = _form3_breaks(scalar, x, betas)
    over = np.nonzero(stat > p.threshold)[0]
    return Result(
        metrics={
            "beta_star": bs.beta_star,
            "onset": float(betas[over[0]]) if over.size else None,
            "largest_ratio": float(max(p.beta_ratios)),
            "form3_and_fall": int(sc.form3_and_fall.sum()),
            "device": device_name(point.device),
        },
        arrays={"beta": betas, "statistic": stat, "form3": sc.form3, "fall": sc.fall},
    )


TOLERANCE = "onset of the statistic (> 1% of states) within band (10%) of β* in every setting"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    on = [r for r in good if r.params.get("part", "onset") == "onset"]
    imp = [r for r in good if r.params.get("part") == "implication"]
    if not on:
        return Verdict("inconclusive", {}, TOLERANCE, "no onset rows." + note)
    band = float(on[0].params.get("band", 0.1))
    ratio, form3 = {}, {}
    for r in on:
        key = f"H={r.params['heads']},n={r.params['n']}"
        bstar = pred("beta_star", r.metrics["beta_star"])
        onset = r.metrics["onset"]
        ratio[key] = onset / bstar if onset is not None else None
        f3 = r.arrays.get("form3")
        if f3 is not None:  # fraction of states with form 3 at the grid's β/β*
            form3[key] = {
                f"{b / r.metrics['beta_star']:.3g}": round(float(f), 3)
                for b, f in zip(r.arrays["beta"], f3, strict=True)
            }
    beyond = {k: f"> {max(r.metrics['largest_ratio'] for r in on):g}" for k, v in ratio.items() if v is None}
    nums = {
        "onset_over_beta_star": {k: (round(v, 3) if v is not None else beyond[k]) for k, v in ratio.items()},
        "beta_star": {f"H={r.params['heads']},n={r.params['n']}": r.metrics["beta_star"] for r in on},
        "form3_fraction_by_beta_over_beta_star": form3,
        "identity_form3_but_energy_falls": sum(r.metrics["form3_and_fall"] for r in good),
        "identity_states": sum(r.metrics.get("states", 0) for r in imp),
        "statistic": on[0].params.get("statistic", "energy-fall"),
        "band": band,
    }
    parts = {"implication": "fails" if nums["identity_form3_but_energy_falls"] else "holds"} if imp else {}
    if nums["identity_form3_but_energy_falls"]:
        return Verdict("fails", nums, TOLERANCE, "form 3 with a falling per-head energy." + note,
                       branch="implication", parts=parts)  # fmt: skip
    inside = [v is not None and 1 / (1 + band) <= v <= 1 + band for v in ratio.values()]
    nums["settings_within_band"] = int(sum(inside))
    status = "holds" if all(inside) else "fails"
    return Verdict(status, nums, TOLERANCE, note.strip(), branch="onset ratio", band=band, parts=parts)


_Q = {"part": "onset", "d": 64, "draws": 256}
_EXPLAIN = (
    "onset of '{statistic}' (first β with more than 1% of states) over β*: {onset_over_beta_star} "
    "(band {band:g}; β* = {beta_star}). Fraction of states where form 3 holds for every head, by β/β*: "
    "{form3_fraction_by_beta_over_beta_star}. Identity form 3 ⇒ dE_h/dt ≥ 0 under orthogonal blocks: "
    "{identity_form3_but_energy_falls} counterexamples in {identity_states} states with random strengths "
    "and random symmetric blocks."
)
CLAIM = Claim(
    id="flow.beta-star-onset",
    kind="theorem",
    grade="evidence",
    paper="B",
    statement="Reading of Thm 19: β* is where radial shadows win — below β* every head's energy rises, "
    "above it some head's energy falls (heads on mutually orthogonal subspaces, random token states).",
    version=1,
    params=Params,
    grids={
        "quick": Grid(
            {"heads": [2, 4], "n": [16, 32]},
            fixed=_Q,
            extra=[
                Grid({"heads": [2, 4]}, fixed={"part": "implication", "law": "uniform", "n": 32, "d": 64})
            ],
        ),
        "full": Grid(
            {"heads": [2, 3, 4, 8], "n": [16, 32, 64]},
            fixed=_Q | {"draws": 2048},
            extra=[
                Grid(
                    {"heads": [2, 4, 8], "n": [16, 64]},
                    fixed={"part": "implication", "law": "uniform", "d": 64, "draws": 2048},
                )
            ],
        ),
    },
    run=run,
    verdict=verdict,
    predictions={"beta_star": "the closed-form critical inverse temperature β* of Condition 8"},
    controls={
        "form3-scalar": Control(
            "holds",
            {"statistic": "form3-scalar"},
            "the break of form 3 for identical scalar heads λI at orthogonal tokens is the quantity β* "
            "was derived for: its onset is the first grid ratio above 1 by construction",
        )
    },
    knobs={
        "law": Knob(
            ["orthogonal", "uniform"],
            "the reading names no token law: random orthonormal frames (β*'s derivation) or uniform tokens",
        )
    },
    parts={"implication": Part("identity", "form 3 ⇒ dE_h/dt ≥ 0 under orthogonal blocks (algebra)")},
    regime="equally strong heads λP_h on mutually orthogonal blocks, usa kind, V = M, β/β* in [0.25, 32]",
    explain={"holds": _EXPLAIN, "fails": _EXPLAIN},
)
