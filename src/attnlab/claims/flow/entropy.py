"""``flow.entropy`` (finding, beside Thm 27): does attention entropy rise to log n from any start?

Thm 27 states ``dH_i/dt = −β² Cov_{p_i}(s, ṡ)`` (an identity, checked at states along trajectories
against the forward-mode derivative, :func:`attnlab.dynamics.entropy_identity`: part ``identity``) and
proves that the covariance is ≤ 0 in the scalar equiangular case, where entropy rises to log n (decided
by ``flow.entropy-equiangular``). The summary states it generally: "attention entropy rises during
clustering and settles at log n". That general reading is tested here from uniform random starts (one
scalar softmax head, n = 32, d = 3): a trajectory *rises to log n* when its mean entropy never falls
by more than ``drop_tol·log n`` below its running maximum and ends within ``gap_tol·log n`` of log n by
``t1``. Positive control: equiangular starts (the theorem's case).

Verdict rule (one branch, "rises to log n", for the test and its control): fails if the identity's error
exceeds 1e-8; otherwise holds when at least ``1 − max_fall_fraction`` (95%) of the trajectories rise to
log n, fails otherwise. Reported beside it: the fraction that falls, the largest fall, the final entropy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import Heads, Record, entropy, entropy_identity, init, simulate, trajectory_states
from attnlab.engine.params import Cost, In
from attnlab.engine.protocol import (
    NO_PERTURBATION,
    Claim,
    Control,
    Grid,
    Part,
    Point,
    Predict,
    Result,
    Row,
    Verdict,
)

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    part: Literal["identity", "trajectories"] = "trajectories"  # the identity, or entropy along trajectories
    start: Literal["uniform", "equiangular", "clusters"] = "uniform"  # initial tokens (equiangular: d ≥ n)
    jitter: float = 0.0  # Gaussian spread added to the start, then renormalised (near-equiangular)
    beta: float = 1.0  # inverse temperature
    heads: int = 2  # random symmetric softmax heads (identity)
    n: int = 32  # tokens
    d: int = 3  # dimension
    strength: float = 1.0  # scalar head strength (trajectories)
    spread: float = 0.3  # cluster spread (clusters start)
    t1: float = 30.0  # trajectory length
    every: float = 0.5  # time between recorded states (trajectories)
    dt: float = 0.05  # RK4 step
    states: int = 5  # recorded states (identity)
    batch: int = 16  # trajectories per point
    drop_tol: float = 1e-3  # a fall counts when the mean entropy drops by more than drop_tol·log n
    gap_tol: float = 0.05  # "reaches log n": final mean entropy ≥ (1 − gap_tol) log n
    max_fall_fraction: float = 0.05  # largest fraction of trajectories that may not rise to log n

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "beta": In("(0, inf)"),
        "heads": In("[1, inf)", cap=256),
        "n": In("[2, inf)", cap=100_000),
        "d": In("[1, inf)", cap=100_000),
        "strength": In("(0, inf)"),
        "spread": In("(0, inf)"),
        "jitter": In("[0, inf)"),
        "t1": In("(0, inf)", cap=1_000),
        "every": In("(0, inf)"),
        "dt": In("[0.0001, 1]", why="RK4 step; smaller steps cost more than one point may"),
        "states": In("[1, inf)", cap=100_000),
        "batch": In("[1, inf)", cap=100_000),
        "drop_tol": In("(0, 1)"),
        "gap_tol": In("(0, 1)"),
        "max_fall_fraction": In("[0, 1]"),
    }
    COSTS = (Cost("batch * heads * n * n * d * t1 / dt", 1e12, "scores computed"),)


def _start(p: Params, point: Point) -> tuple[torch.Tensor, int]:
    g = point.generator()
    if p.start == "equiangular":  # n equiangular unit vectors need d ≥ n
        d = max(p.d, p.n)
        x = init.equiangular(batch=p.batch, n=p.n, d=d, gamma=0.0, generator=g, device=point.device)
    elif p.start == "clusters":
        d = p.d
        x = init.clusters(batch=p.batch, n=p.n, d=d, spread=p.spread, generator=g, device=point.device)
    else:
        d = p.d
        x = init.uniform(batch=p.batch, n=p.n, d=d, generator=g, device=point.device)
    return (init.jittered(x, p.jitter, generator=g) if p.jitter > 0 else x), d


def run(point: Point) -> Result:
    p: Params = point.p
    if p.part == "identity":
        spec = Heads.random_symmetric(p.heads, p.d, generator=point.generator(), kind="softmax").to(
            point.device
        )
        x0 = init.uniform(batch=p.batch, n=p.n, d=p.d, generator=point.generator(1), device=point.device)
        _, X = trajectory_states(spec, x0, p.beta, p.t1, p.states, "sphere", p.dt)
        errs = [float(entropy_identity(spec, x, p.beta).max()) for x in X]
        return Result(
            metrics={
                "max_rel_err": max(errs),
                "states": len(X) * p.batch,
                "device": device_name(point.device),
            }
        )
    x0, d = _start(p, point)
    spec = Heads.scalar([p.strength], d=d, kind="softmax", device=point.device)
    sol = simulate(
        spec, x0, beta=p.beta, t1=p.t1, dt=p.dt, record=Record(every=p.every, observables=(), trajectory=True)
    )
    logn = math.log(p.n)
    Hs = (
        torch.stack([entropy(spec, x, p.beta).mean((-2, -1)) for x in sol.trajectory]).cpu().numpy() / logn
    )  # (T, B)
    drop = (np.maximum.accumulate(Hs, axis=0) - Hs).max(0)  # (B,) largest fall below the running maximum
    rises = (drop <= p.drop_tol) & (Hs[-1] >= 1 - p.gap_tol)  # (B,) rises to log n
    return Result(
        metrics={
            "rise_fraction": float(rises.mean()),
            "trajectories": int(rises.size),
            "fall_fraction": float((drop > p.drop_tol).mean()),
            "any_fall_fraction": float((drop > 1e-9).mean()),
            "max_drop": float(drop.max()),
            "final_min": float(Hs[-1].min()),
            "final_mean": float(Hs[-1].mean()),
            "start_mean": float(Hs[0].mean()),
            "device": device_name(point.device),
        },
        arrays={"t": sol.t.numpy(), "entropy_over_log_n": Hs.mean(1)},
    )


TOLERANCE = (
    "identity 1e-8; ≥ 95% of trajectories rise to log n (no fall > drop_tol·log n, end ≥ (1 − gap_tol) log n)"
)


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    ident = [r for r in good if r.params.get("part") == "identity"]
    traj = [
        r
        for r in good
        if r.params.get("part", "trajectories") == "trajectories" and "rise_fraction" in r.metrics
    ]
    if not traj:
        return Verdict("inconclusive", {}, TOLERANCE, "no trajectory rows." + note)
    p0 = traj[0].params
    w = np.array([r.metrics["trajectories"] for r in traj], dtype=float)
    by = {f"{r.params.get('start', 'uniform')},beta={r.params['beta']:g}": r.metrics for r in traj}
    nums = {
        "identity_max_rel_err": max((r.metrics["max_rel_err"] for r in ident), default=None),
        "trajectories": int(w.sum()),
        "rise_fraction": float(np.dot([r.metrics["rise_fraction"] for r in traj], w) / w.sum()),
        "fall_fraction": float(np.dot([r.metrics["fall_fraction"] for r in traj], w) / w.sum()),
        "any_fall_fraction": float(np.dot([r.metrics["any_fall_fraction"] for r in traj], w) / w.sum()),
        "max_drop_over_log_n": max(r.metrics["max_drop"] for r in traj),
        "final_min_over_log_n": min(r.metrics["final_min"] for r in traj),
        "rise_fraction_by_setting": {k: m["rise_fraction"] for k, m in by.items()},
        "fall_fraction_by_setting": {k: m["fall_fraction"] for k, m in by.items()},
        "final_mean_over_log_n_by_setting": {k: round(m["final_mean"], 4) for k, m in by.items()},
        "gap_tol": p0.get("gap_tol", 0.05),
        "max_fall_fraction": p0.get("max_fall_fraction", 0.05),
    }
    parts = {}
    if nums["identity_max_rel_err"] is not None:
        parts["identity"] = "holds" if nums["identity_max_rel_err"] < 1e-8 else "fails"
        if parts["identity"] == "fails":
            return Verdict("fails", nums, TOLERANCE, "the entropy-production identity failed." + note,
                           branch="identity", parts=parts)  # fmt: skip
    status = "holds" if nums["rise_fraction"] >= 1 - nums["max_fall_fraction"] else "fails"
    return Verdict(status, nums, TOLERANCE, note.strip(), branch="rises to log n", parts=parts)


_TRAJ = {"part": "trajectories", "n": 32, "d": 3, "t1": 30.0, "batch": 32}
_IDENT = {"part": "identity", "heads": 2, "n": 12, "d": 4, "t1": 3.0, "states": 5, "batch": 8}
_FAILS = (
    "from uniform random starts entropy does not simply rise to log n: {rise_fraction:.3f} of "
    "{trajectories} trajectories do (need ≥ 1 − {max_fall_fraction:g}); the mean entropy falls by more than "
    "0.1% of log n in {fall_fraction:.3f} ({any_fall_fraction:.3f} fall at all; largest fall "
    "{max_drop_over_log_n:.4f}·log n) and ends as low as {final_min_over_log_n:.3f}·log n (metastable "
    "clusters; by setting {final_mean_over_log_n_by_setting}). Identity dH/dt = −β² Cov: error "
    "{identity_max_rel_err:.1e}."
)
_HOLDS = (
    "{rise_fraction:.3f} of {trajectories} trajectories rise to log n (falls by more than 0.1% of log n in "
    "{fall_fraction:.3f}, largest {max_drop_over_log_n:.4f}·log n; final entropy ≥ "
    "{final_min_over_log_n:.3f}·log n). Identity error {identity_max_rel_err:.1e}."
)
CLAIM = Claim(
    id="flow.entropy",
    kind="finding",
    grade="evidence",
    paper="B",
    statement="The summary's general reading of Thm 27: attention entropy rises during clustering and "
    "settles at log n, from random starts.",
    version=3,
    params=Params,
    grids={
        "quick": Grid({"beta": [1.0, 4.0]}, fixed=_TRAJ, extra=[Grid({"beta": [1.0, 4.0]}, fixed=_IDENT)]),
        "full": Grid(
            {"beta": [1.0, 4.0, 9.0], "n": [16, 32, 64], "d": [3, 8]},
            fixed=_TRAJ | {"batch": 64, "t1": 60.0},
            extra=[
                Grid(
                    {"beta": [0.5, 1.0, 4.0, 9.0], "heads": [1, 2, 4]},
                    fixed={"part": "identity", "n": 32, "d": 8, "t1": 6.0, "states": 13, "batch": 32},
                )
            ],
        ),
    },
    run=run,
    verdict=verdict,
    controls={
        "equiangular-start": Control(
            "holds",
            {"start": "equiangular"},
            "scalar equiangular case of Thm 27: the covariance is ≤ 0, entropy never falls "
            "and rises to log n",
        ),
    },
    parts={"identity": Part("identity", "dH_i/dt = −β² Cov_{p_i}(s, ṡ) against forward mode, 1e-8")},
    regime="one scalar softmax head from uniform random starts, within the window t1",
    explain={"holds": _HOLDS, "fails": _FAILS},
)
