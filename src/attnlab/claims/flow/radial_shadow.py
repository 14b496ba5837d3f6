"""``flow.radial-shadow`` (Thm 16–17): radial shadows make per-head energy fall on the sphere.

Statement: with mutually orthogonal head subspaces (usa kind, ``V = M``) per-head energy is monotone
in flat space but can decrease on the sphere through the radial shadows ``a_i^h = ⟨f_i^h, x_i⟩``.
Counts come from :func:`attnlab.dynamics.shadow_counts`; a scan over (n, d, head construction, β)
records how often ``dE_1/dt < 0``.

Verdict rule: fails (branch "flat vs sphere") when some flat-space configuration has a falling per-head
energy or no sphere configuration does; then fails (branch "form 1 ⇔ sign") when form 1 of radial
dominance and ``dE_h/dt ≥ 0`` disagree on some sphere configuration (they coincide by algebra under
orthogonality); holds otherwise (branch "flat vs sphere"). Negative control through "flat vs sphere":
opposed heads ``M_2 = −M_1``, where the orthogonality hypothesis is broken and flat-space per-head energy
falls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import shadow_counts
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

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    mode: Literal["main", "scan"] = "main"  # one setting in both spaces, or a scan over n, d (sphere)
    space: Literal["sphere", "flat"] = "sphere"  # tokens on the sphere or in R^d
    beta: float = 1.0  # inverse temperature
    heads: int = 2  # number of heads H (mutually orthogonal subspaces of dimension d/H)
    d: int = 8  # token dimension (main mode)
    n: int = 16  # tokens (main mode)
    batch: int = 256  # uniform configurations per head draw
    head_draws: int = 4  # head draws per setting
    construction: Literal["random", "scalar"] = "random"  # random symmetric or scalar blocks (scan mode)
    ns: list[int] = field(default_factory=lambda: [8, 16, 64])  # token counts of the scan
    ds: list[int] = field(default_factory=lambda: [2, 4, 8, 32])  # dimensions of the scan
    orthogonal: bool = True  # heads on mutually orthogonal subspaces (False: opposed heads M_h = ±M)

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "beta": In("(0, inf)"),
        "heads": In("[1, inf)", cap=256),
        "d": In("[1, inf)", cap=100_000),
        "n": In("[2, inf)", cap=100_000),
        "batch": In("[1, inf)", cap=100_000),
        "head_draws": In("[1, inf)", cap=10_000),
        "ns": In("[2, inf)", cap=100_000),
        "ds": In("[1, inf)", cap=100_000),
    }


def run(point: Point) -> Result:
    p: Params = point.p
    g = point.generator()
    if p.mode == "scan":
        within = p.construction == "random"
        table, agree = {}, 1.0
        for n in p.ns:
            for d in p.ds:
                if d < p.heads:
                    continue
                c = shadow_counts(
                    p.heads, d, n, p.beta, p.space, random_within=within, draws=p.head_draws,
                    batch=p.batch, generator=g, device=point.device, orthogonal=p.orthogonal,
                )  # fmt: skip
                table[f"n={n},d={d}"] = [c.viol_head1 / c.trials, c.viol / c.trials]
                agree = min(agree, c.agree / c.trials)
        return Result(
            metrics={
                "rates": table,  # setting -> [fraction with dE_1/dt < 0, with some dE_h/dt < 0]
                "form1_agrees": agree,
                "trials_per_setting": p.head_draws * p.batch,
                "device": device_name(point.device),
            }
        )
    c = shadow_counts(
        p.heads, p.d, p.n, p.beta, p.space, random_within=True, draws=p.head_draws, batch=p.batch,
        generator=g, device=point.device, orthogonal=p.orthogonal,
    )  # fmt: skip
    t = c.trials
    return Result(
        metrics={
            "violations": c.viol,
            "violations_head1": c.viol_head1,
            "trials": t,
            "violation_rate": c.viol / t,
            "form1": c.f1 / t,
            "form2": c.f2 / t,
            "form3": c.f3 / t,
            "form1_agrees": c.agree / t,
            "device": device_name(point.device),
        }
    )


TOLERANCE = "flat: zero violations; sphere: some; form 1 <=> sign"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    scan = [r for r in good if r.params.get("mode") == "scan"]
    main = [r for r in good if r.params.get("mode", "main") == "main"]
    flat = [r for r in main if r.params["space"] == "flat"]
    sph = [r for r in main if r.params["space"] == "sphere"]
    if not flat or not sph:
        return Verdict("inconclusive", {}, TOLERANCE, "need both spaces." + note)
    fv, ft = sum(r.metrics["violations"] for r in flat), sum(r.metrics["trials"] for r in flat)
    sv, st = sum(r.metrics["violations"] for r in sph), sum(r.metrics["trials"] for r in sph)
    agree = min(r.metrics["form1_agrees"] for r in sph + scan)
    h1 = sum(r.metrics.get("violations_head1", 0) for r in sph)
    ranked = []
    for r in scan:
        pp = r.params
        for setting, (r1, rany) in r.metrics["rates"].items():
            key = f"{pp['construction']},H={pp['heads']},beta={pp['beta']:g},{setting}"
            ranked.append({"setting": key, "dE1_negative": r1, "some_dEh_negative": rany})
    ranked.sort(key=lambda z: -z["dE1_negative"])
    nums = {
        "flat_violation_rate": fv / ft,
        "flat_violations": fv,
        "flat_trials": ft,
        "sphere_violation_rate": sv / st,
        "sphere_violations": sv,
        "sphere_trials": st,
        "sphere_rate_by_beta": {str(r.params["beta"]): r.metrics["violation_rate"] for r in sph},
        "sphere_forms_1_2_3": {
            str(r.params["beta"]): [r.metrics["form1"], r.metrics["form2"], r.metrics["form3"]] for r in sph
        },
        "form1_equals_sign_fraction": agree,
        "sphere_head1_rate": h1 / st,
        "scan_largest_dE1_rates": ranked[:5],
        "scan_settings": len(ranked),
    }
    if fv > 0 or sv == 0:  # the statement itself: monotone in flat space, falls on the sphere
        return Verdict("fails", nums, TOLERANCE, note.strip(), branch="flat vs sphere")
    if agree < 1.0:  # form 1 must coincide with dE_h/dt ≥ 0 on the sphere (algebra under orthogonality)
        return Verdict("fails", nums, TOLERANCE, note.strip(), branch="form 1 ⇔ sign")
    return Verdict("holds", nums, TOLERANCE, note.strip(), branch="flat vs sphere")


_SCAN_Q = {"mode": "scan", "space": "sphere", "heads": 2, "ns": [8, 16, 64], "ds": [2, 4, 8, 32]}
CLAIM = Claim(
    id="flow.radial-shadow",
    kind="theorem",
    grade="evidence",
    paper="B",
    statement="With mutually orthogonal head subspaces, per-head energy is monotone in flat space but can "
    "decrease on the sphere through radial shadows a_i^h = <f_i^h, x_i> (Thm 16-17).",
    version=4,
    params=Params,
    grids={
        "quick": Grid(
            {"space": ["sphere", "flat"], "beta": [1.0, 4.0]},
            fixed={"heads": 2, "d": 8, "n": 16, "batch": 256, "head_draws": 4},
            extra=[
                Grid(
                    {"construction": ["random", "scalar"], "beta": [0.5, 1.0, 2.0, 4.0, 8.0]},
                    fixed=_SCAN_Q | {"batch": 256, "head_draws": 1},
                )
            ],
        ),
        "full": Grid(
            {"space": ["sphere", "flat"], "beta": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0], "heads": [2, 4]},
            fixed={"d": 16, "n": 32, "batch": 1024, "head_draws": 16},
            seeds=2,
            extra=[
                Grid(
                    {
                        "construction": ["random", "scalar"],
                        "beta": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
                        "heads": [2, 4],
                    },
                    fixed={
                        "mode": "scan",
                        "space": "sphere",
                        "ns": [4, 8, 16, 32, 64, 128],
                        "ds": [2, 4, 8, 16, 32, 64],
                        "batch": 1024,
                        "head_draws": 8,
                    },
                )
            ],
        ),
    },
    run=run,
    verdict=verdict,
    controls={
        "opposed-heads": Control(
            "fails",
            {"orthogonal": False},
            "opposed heads M_2 = −M_1 (far from orthogonal): f^2 ≈ −f^1, so the cross term <f^1, f^2> makes "
            "per-head energy fall in flat space too",
        )
    },
    regime="heads on mutually orthogonal subspaces, usa kind, V_h = M_h, uniform tokens",
    explain={
        "holds": "orthogonal head subspaces (usa, V = M): per-head dE_h/dt < 0 in "
        "{flat_violations}/{flat_trials} flat-space configurations and "
        "{sphere_violations}/{sphere_trials} on the sphere; form 1 coincides "
        "with dE_h/dt ≥ 0 in a fraction {form1_equals_sign_fraction:.4f} of configurations.",
        "fails": "flat {flat_violations}/{flat_trials}, sphere "
        "{sphere_violations}/{sphere_trials} configurations with a falling per-head energy; "
        "form 1 ⇔ sign in a fraction {form1_equals_sign_fraction:.4f}.",
    },
)
