"""``flow.energy-monotone`` (Thm 11): the total energy is a Lyapunov function of the usa flow.

Statement: with symmetric ``M_h`` and ``V_h = M_h`` (usa kind), ``dE_multi/dt = (1/n) Σ_i ‖ẋ_i‖² ≥ 0``
on the sphere and in flat space. The identity is checked at states along RK4 trajectories with the
forward-mode derivative of ``E_multi`` at the state (:func:`attnlab.dynamics.energy_identity`).
Beside it, for the softmax kind (not covered by the theorem), the rate of trajectories along which
``dE_multi/dt < −thr·E`` somewhere, under several definitions, is reported.

Verdict rule: holds when the identity's largest relative error over all checked states is below
1e-8 (float64), fails otherwise; inconclusive without identity rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import Heads, Record, energy_identity, init, simulate, trajectory_states
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]

#: Relative thresholds on (dE/dt)/E below which a softmax-kind state counts as violating.
THRESHOLDS = (1e-12, 1e-8, 1e-4, 1e-2)
QUANTS = ("0", "0.01", "0.1", "0.5", "0.9")


@dataclass(frozen=True)
class Params:
    mode: Literal["identity", "softmax"] = "identity"  # the Thm 11 identity, or softmax violation rates
    space: Literal["sphere", "flat"] = "sphere"  # tokens on the sphere or in R^d
    heads: int = 3  # number of heads H
    n: int = 16  # tokens
    d: int = 6  # token dimension
    beta: float = 1.0  # inverse temperature
    t1: float = 2.0  # trajectory length (model time)
    states: int = 6  # recorded states per trajectory (identity checked / violations looked for there)
    batch: int = 8  # token configurations per head draw
    combine: Literal["sum", "mean"] = "sum"  # heads summed or averaged (identity mode)
    head_draws: int = 4  # fresh random symmetric heads per point (softmax mode)
    dt: float = 0.05  # RK4 step
    euler_dt: float = 0.0  # Euler+normalise step for the published-code statistic (0: skip it)


def run(point: Point) -> Result:
    p: Params = point.p
    g = point.generator()
    if p.mode == "identity":
        spec = Heads.random_symmetric(p.heads, p.d, generator=g, kind="usa", combine=p.combine)
        spec = spec.to(point.device)
        x0 = init.uniform(batch=p.batch, n=p.n, d=p.d, generator=point.generator(1), device=point.device)
        times, X = trajectory_states(spec, x0, p.beta, p.t1, p.states, p.space, p.dt)
        checks = [energy_identity(spec, x, p.beta, p.space) for x in X]
        errs = [float(err.max()) for err, _ in checks]
        return Result(
            metrics={
                "max_rel_err": max(errs),
                "min_rate": min(float(rate.min()) for _, rate in checks),
                "states": len(X) * p.batch,
                "device": device_name(point.device),
            },
            arrays={"t": times, "rel_err": np.array(errs)},
        )
    # softmax mode: (a) per trajectory, (dE/dt)/E < -threshold at some recorded state (RK4), several
    # thresholds; (b) per recorded state, and at t = 0; (c) E(t_{k+1}) < E(t_k) on Euler steps
    mins, per_state, at_t0, drops, drop_steps = [], [], [], [], []
    for _ in range(p.head_draws):
        spec = Heads.random_symmetric(p.heads, p.d, generator=g, kind="softmax")
        x0 = init.uniform(batch=p.batch, n=p.n, d=p.d, generator=g, device=point.device)
        rec = Record(every=p.t1 / (p.states - 1), observables=("energy_rate",))
        sol = simulate(spec, x0, beta=p.beta, t1=p.t1, dt=p.dt, space=p.space, record=rec)
        rel = sol.observables["energy_rel_rate_total"].cpu()  # (T, B): (dE/dt)/E
        mins.append(rel.min(0).values)
        per_state.append((rel < -THRESHOLDS[0]).flatten())
        at_t0.append(rel[0] < -THRESHOLDS[0])
        if p.euler_dt:
            rec = Record(every=p.euler_dt, observables=("energy",))
            eu = simulate(
                spec, x0, beta=p.beta, t1=p.t1, dt=p.euler_dt, method="euler", space=p.space, record=rec
            )
            E = eu.observables["log_energy_total"].cpu().exp()  # (steps + 1, B)
            fall = E[1:] < E[:-1]
            drops.append(fall.any(0))
            drop_steps.append(fall.flatten())
    m = torch.cat(mins).numpy()  # (trials,) most negative relative rate along each trajectory
    by_thr = {f"{t:g}": float((m < -t).mean()) for t in THRESHOLDS}
    return Result(
        metrics={
            "violations": int((m < -THRESHOLDS[0]).sum()),
            "trials": int(m.size),
            "violation_rate": by_thr[f"{THRESHOLDS[0]:g}"],
            "violation_rate_by_threshold": by_thr,
            "min_rel_rate": float(m.min()),
            "min_rel_rate_quantiles": dict(
                zip(QUANTS, np.quantile(m, [float(q) for q in QUANTS]).tolist(), strict=True)
            ),
            "state_violation_rate": float(torch.cat(per_state).double().mean()),
            "t0_violation_rate": float(torch.cat(at_t0).double().mean()),
            "euler_drop_rate": float(torch.cat(drops).double().mean()) if drops else None,
            "euler_step_drop_rate": float(torch.cat(drop_steps).double().mean()) if drops else None,
            "device": device_name(point.device),
        },
        arrays={"min_rel_rate": m},
    )


def softmax_table(soft: Sequence[Row]) -> dict[str, dict]:
    """Per setting (β, H, n, d): violation rates under each definition, trial-weighted over rows."""
    groups: dict[str, list[Row]] = {}
    for r in soft:
        pp = r.params
        groups.setdefault(f"beta={pp['beta']:g},H={pp['heads']},n={pp['n']},d={pp['d']}", []).append(r)
    table = {}
    for key in sorted(groups, key=lambda k: tuple(float(part.split("=")[1]) for part in k.split(","))):
        rs = groups[key]
        w = np.array([r.metrics["trials"] for r in rs], dtype=float)

        def avg(get, rs=rs, w=w):
            vals = [get(r) for r in rs]
            return None if any(x is None for x in vals) else float(np.dot(vals, w) / w.sum())

        row: dict = {"trials": int(w.sum())}
        for thr in THRESHOLDS:
            k = f"{thr:g}"
            row[f"traj_{k}"] = avg(
                lambda r, k=k: r.metrics.get("violation_rate_by_threshold", {k: None}).get(k)
            )
        row["traj_1e-12"] = avg(lambda r: r.metrics["violation_rate"])
        row["per_state"] = avg(lambda r: r.metrics.get("state_violation_rate"))
        row["at_t0"] = avg(lambda r: r.metrics.get("t0_violation_rate"))
        row["euler_E_drop"] = avg(lambda r: r.metrics.get("euler_drop_rate"))
        row["euler_E_drop_per_step"] = avg(lambda r: r.metrics.get("euler_step_drop_rate"))
        arr = [r.arrays["min_rel_rate"] for r in rs if "min_rel_rate" in r.arrays]
        if len(arr) == len(rs):  # quantiles of the most negative relative rate per trial, pooled
            pooled = np.concatenate(arr)
            row["min_rel_rate_quantiles"] = {q: float(np.quantile(pooled, float(q))) for q in QUANTS}
        table[key] = row
    return table


TOLERANCE = "relative 1e-8 (float64)"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    ident = [r for r in good if r.params.get("mode", "identity") == "identity"]
    soft = [r for r in good if r.params.get("mode") == "softmax"]
    if not ident:
        return Verdict("inconclusive", {}, TOLERANCE, "no identity rows." + note)
    err = max(r.metrics["max_rel_err"] for r in ident)
    v = sum(r.metrics["violations"] for r in soft)
    t = sum(r.metrics["trials"] for r in soft)
    nums = {
        "max_rel_err_identity": err,
        "states_checked": sum(r.metrics["states"] for r in ident),
        "softmax_violation_rate": v / t if t else None,
        "softmax_trials": t,
        "softmax_by_setting": softmax_table(soft),
    }
    return Verdict("holds" if err < pred("tolerance", 1e-8) else "fails", nums, TOLERANCE, note.strip())


_SOFTMAX_QUICK = {
    "mode": "softmax",
    "space": "sphere",
    "t1": 6.0,
    "states": 13,
    "batch": 32,
    "head_draws": 4,
    "dt": 0.1,
    "euler_dt": 0.1,
}
_IDENT = {"mode": "identity", "heads": 3, "n": 16, "d": 6, "beta": 1.0, "states": 6, "batch": 8}
QUICK = Grid(
    {"space": ["sphere"]},
    fixed=_IDENT | {"t1": 2.0},
    extra=[
        # flat usa dynamics blow up in finite time (scores grow with the norms): a short window
        Grid({"space": ["flat"]}, fixed=_IDENT | {"t1": 0.5}),
        # softmax kind: violation rates by (β, H, d) at n = 16, and n = 32 for H = 2
        Grid({"beta": [1.0, 4.0], "heads": [1, 2, 4], "d": [4, 16, 64]}, fixed=_SOFTMAX_QUICK | {"n": 16}),
        Grid({"beta": [1.0, 4.0], "d": [4, 16]}, fixed=_SOFTMAX_QUICK | {"n": 32, "heads": 2}),
    ],
)
_IDENT_F = {"mode": "identity", "heads": 4, "n": 32, "d": 8, "batch": 32}
FULL = Grid(
    {"space": ["sphere"], "beta": [0.5, 1.0, 4.0], "combine": ["sum", "mean"]},
    fixed=_IDENT_F | {"t1": 4.0, "states": 11},
    seeds=2,
    extra=[
        Grid(
            {"space": ["flat"], "beta": [0.5, 1.0], "combine": ["sum", "mean"]},
            fixed=_IDENT_F | {"t1": 0.25, "states": 6},
            seeds=2,
        ),
        Grid(
            {"beta": [0.5, 1.0, 2.0, 4.0, 9.0], "d": [2, 4, 16, 64], "heads": [1, 2, 4]},
            fixed={
                "mode": "softmax",
                "space": "sphere",
                "n": 32,
                "t1": 10.0,
                "states": 21,
                "batch": 64,
                "head_draws": 32,
                "dt": 0.05,
                "euler_dt": 0.1,
            },
        ),
    ],
)

CLAIM = Claim(
    id="flow.energy-monotone",
    kind="theorem",
    paper="B",
    statement="With symmetric M_h and V_h = M_h (usa kind), dE_multi/dt = (1/n) sum_i ||x_i'||^2 >= 0 on the "
    "sphere and in flat space (Thm 11); with the softmax kind monotonicity is not exact.",
    version=2,
    params=Params,
    grids={"quick": QUICK, "full": FULL},
    run=run,
    verdict=verdict,
    explain={
        "holds": "dE_multi/dt = (1/n) Σ‖ẋ_i‖² at {states_checked} states along RK4 "
        "trajectories (forward-mode derivative at the state): max relative error {max_rel_err_identity:.1e}.",
        "fails": "the identity misses by {max_rel_err_identity:.1e} (relative) at some state.",
    },
)
