"""``flow.value-perturbation`` (Thm 12): total-energy monotonicity under perturbed values ``V_h ≠ M_h``.

Statement: the monotonicity of Thm 11 is robust to small perturbations of the value alignment.
Heads: random symmetric ``M_h`` with ``V_h = M_h + size·‖M_h‖_op·G`` (usa kind, sphere); the violation
rate of ``dE_multi/dt < −1e-12 E`` along RK4 trajectories is measured per size, with the split of
``dE/dt`` into dissipation and perturbation terms (:func:`attnlab.dynamics.perturbation_split`).

Verdict rule: fails when size 0 violates (contradicting Thm 11) or when the smallest positive size
already violates; holds when violations start only above the smallest positive size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.core.stats import loglog_slope
from attnlab.dynamics import Heads, Record, init, perturbation_split, simulate
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    size: float = 0.01  # ||V_h - M_h||_op / ||M_h||_op
    heads: int = 2  # number of heads H
    n: int = 16  # tokens
    d: int = 4  # token dimension
    beta: float = 1.0  # inverse temperature
    t1: float = 6.0  # trajectory length (model time)
    states: int = 13  # recorded states per trajectory
    batch: int = 32  # token configurations per head draw
    head_draws: int = 6  # random heads (and perturbations) per point
    dt: float = 0.05  # RK4 step


def run(point: Point) -> Result:
    p: Params = point.p
    g = point.generator()
    viol, trials, worst, viol0, first = 0, 0, 0.0, 0, []
    over_diss, over_floor, diss_drop, rel_viol = [], [], [], []
    for _ in range(p.head_draws):
        base = Heads.random_symmetric(p.heads, p.d, generator=g, kind="usa")
        spec = base.perturb_values(p.size, generator=g)
        x0 = init.uniform(batch=p.batch, n=p.n, d=p.d, generator=g, device=point.device)
        rec = Record(every=p.t1 / (p.states - 1), observables=("energy_rate",), trajectory=True)
        sol = simulate(spec, x0, beta=p.beta, t1=p.t1, dt=p.dt, record=rec)
        rel = sol.observables["energy_rel_rate_total"].cpu()  # (T, B)
        bad = rel < -1e-12  # (T, B)
        viol += int(bad.any(0).sum())
        viol0 += int(bad[0].sum())
        trials += rel.shape[1]
        worst = min(worst, float(rel.min()))
        tt = sol.t[bad.double().argmax(0)]  # (B,) first recorded time with a violation
        first += tt[bad.any(0)].tolist()
        if bad.any():
            ti, bi = torch.nonzero(bad, as_tuple=True)
            xs = sol.trajectory[ti.to(sol.trajectory.device), bi.to(sol.trajectory.device)]
            sp = perturbation_split(spec.to(device=xs.device), xs, p.beta)
            d0 = perturbation_split(spec.to(device=xs.device), x0[bi.to(x0.device)], p.beta)
            rate = sp.rate.abs().cpu()
            over_diss += (rate / sp.dissipation.cpu().clamp_min(1e-300)).tolist()
            over_floor += (rate / sp.floor.cpu().clamp_min(1e-300)).tolist()
            diss_drop += (sp.dissipation / d0.dissipation.clamp_min(1e-300)).cpu().tolist()
            rel_viol += (-rel[ti, bi]).tolist()

    def q(v: list[float], level: float) -> float | None:
        return float(np.quantile(v, level)) if v else None

    return Result(
        metrics={
            "violations": viol,
            "trials": trials,
            "violation_rate": viol / trials,
            "min_rel_rate": worst,
            "violations_t0": viol0,
            "median_first_violation_time": float(np.median(first)) if first else None,
            "violating_states": len(rel_viol),
            "median_violation_over_dissipation": q(over_diss, 0.5),
            "max_violation_over_floor": max(over_floor) if over_floor else None,
            "median_dissipation_vs_start": q(diss_drop, 0.5),
            "max_rel_violation": max(rel_viol) if rel_viol else 0.0,
            "device": device_name(point.device),
        }
    )


TOLERANCE = "violation = dE_multi/dt < -1e-12 E_multi at a recorded state"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    agg: dict[float, list[int]] = {}
    for r in good:
        a = agg.setdefault(float(r.params["size"]), [0, 0])
        a[0] += r.metrics["violations"]
        a[1] += r.metrics["trials"]
    if 0.0 not in agg or len(agg) < 3:
        return Verdict("inconclusive", {}, TOLERANCE, "need size 0 and at least two sizes > 0." + note)
    sizes = sorted(agg)
    pos = [s for s in sizes if s > 0]
    onset = next((s for s in sizes if agg[s][0] > 0), None)
    rel_viol = {
        str(s): max(r.metrics.get("max_rel_violation") or 0.0 for r in good if r.params["size"] == s)
        for s in sizes
    }
    nums = {
        "violation_rate_by_size": {str(s): agg[s][0] / agg[s][1] for s in sizes},
        "smallest_violating_size": onset,
        "smallest_positive_size": pos[0],
        "trials_per_size": {str(s): agg[s][1] for s in sizes},
        "max_relative_violation_by_size": rel_viol,
        "relative_violation_exponent_in_size": loglog_slope(pos, [rel_viol[str(s)] for s in pos]),
    }
    if agg[0.0][0] > 0 or (onset is not None and onset <= pos[0]):
        return Verdict("fails", nums, TOLERANCE, note.strip())
    return Verdict("holds", nums, TOLERANCE, note.strip())


CLAIM = Claim(
    id="flow.value-perturbation",
    kind="theorem",
    paper="B",
    statement="Total-energy monotonicity is robust to small perturbations of the value alignment V_h = M_h "
    "(Thm 12).",
    version=2,
    params=Params,
    grids={
        "quick": Grid(
            {"size": [0.0, 0.001, 0.01, 0.1, 1.0]},
            fixed={
                "heads": 2,
                "n": 16,
                "d": 4,
                "beta": 1.0,
                "t1": 6.0,
                "states": 13,
                "batch": 32,
                "head_draws": 6,
            },
        ),
        "full": Grid(
            {"size": [0.0, 1e-4, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0], "beta": [1.0, 4.0]},
            fixed={"heads": 2, "n": 32, "d": 8, "t1": 10.0, "states": 41, "batch": 64, "head_draws": 16},
            seeds=4,
        ),
    },
    run=run,
    verdict=verdict,
    explain={
        "holds": "no violation below size {smallest_violating_size}; rates by size {violation_rate_by_size}.",
        "fails": "violations at the smallest size tested ({smallest_positive_size}); rates by size "
        "{violation_rate_by_size}.",
    },
)
