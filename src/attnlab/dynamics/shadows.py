"""Counting per-head energy falls caused by radial shadows (docs/flow.md B3, Thm 16–17).

:func:`shadow_counts` draws heads with mutually orthogonal subspaces and uniform token
configurations, and counts the configurations where some per-head energy falls
(``dE_h/dt < −1e-12 E_h``), where head 1's does, and where each form of radial dominance holds for
every head. On the sphere form 1 is exactly ``dE_h/dt ≥ 0`` under orthogonality (usa kind, ``V = M``),
so ``agree`` counts the configurations where the two coincide (all of them, up to rounding).
:func:`radial_scan` evaluates the three forms and the per-head energy falls of given states over a
grid of β (docs/flow.md B4: the evidence for the critical β* of Condition 8).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.validation import check_choice, check_int, check_real, check_tensor
from attnlab.dynamics import init
from attnlab.dynamics.field import head_outputs, velocity
from attnlab.dynamics.model import Heads
from attnlab.dynamics.observables import energy_rates, radial_dominance

__all__ = [
    "RadialInvariance",
    "RadialScan",
    "ShadowCounts",
    "radial_invariance",
    "radial_scan",
    "shadow_counts",
]

#: Relative rate below which a per-head energy counts as falling (rounding slack).
FALL = 1e-12


@dataclass(frozen=True)
class ShadowCounts:
    """Counts over ``trials`` configurations (see the module docstring)."""

    trials: int
    viol: int  # some dE_h/dt < 0
    viol_head1: int  # dE_1/dt < 0
    f1: int  # form 1 holds for every head
    f2: int
    f3: int
    agree: int  # form 1 (all heads) coincides with "no head's energy falls" (sphere; all in flat space)


def shadow_counts(
    heads: int,
    d: int,
    n: int,
    beta: float,
    space: str,
    *,
    random_within: bool,
    draws: int,
    batch: int,
    generator: torch.Generator,
    device: str | torch.device = "cpu",
    orthogonal: bool = True,
) -> ShadowCounts:
    """Counts over ``draws`` head draws × ``batch`` uniform configurations (usa kind, ``V = M``).

    Heads: :meth:`Heads.orthogonal_subspaces` (random symmetric within blocks when
    ``random_within``, else scalar blocks); heads and tokens are drawn from ``generator`` in turn.
    ``orthogonal=False`` draws opposed heads ``M_h = (−1)^h M`` (random symmetric M) instead: the
    orthogonality hypothesis broken as far as it goes.
    """
    check_int("heads", heads, min=1)
    check_int("draws", draws, min=1)
    check_int("batch", batch, min=1)
    check_choice("space", space, ("sphere", "flat"))
    c = dict.fromkeys(("viol", "viol_head1", "trials", "f1", "f2", "f3", "agree"), 0)
    for _ in range(draws):
        if orthogonal:
            spec = Heads.orthogonal_subspaces(
                heads, d, generator=generator, random_within=random_within, kind="usa"
            )
        else:  # opposed heads M_h = ±M (h even/odd): M_h' M_h = ∓M² ≠ 0
            M = Heads.random_symmetric(1, d, generator=generator, kind="usa").M  # (1, d, d)
            sign = torch.tensor([(-1.0) ** h for h in range(heads)], dtype=M.dtype)[:, None, None]
            spec = Heads(sign * M, sign * M, kind="usa")
        spec = spec.to(device)
        x = init.uniform(batch=batch, n=n, d=d, generator=generator, device=device)
        f = head_outputs(spec, x, beta)  # (B, H, n, d)
        v = velocity(spec, x, beta, space, f=f)
        er = energy_rates(spec, x, beta, v)
        neg = (er.rel < -FALL).any(-1)  # (B,)
        rd = radial_dominance(f, x)
        c["viol"] += int(neg.sum())
        c["viol_head1"] += int((er.rel[:, 0] < -FALL).sum())
        c["trials"] += x.shape[0]
        c["f1"] += int(rd.form1.all(-1).sum())
        c["f2"] += int(rd.form2.all(-1).sum())
        c["f3"] += int(rd.form3.all(-1).sum())
        if space == "sphere":  # form 1 is exactly dE_h/dt >= 0 under orthogonality
            c["agree"] += int((rd.form1.all(-1) == ~neg).sum())
        else:
            c["agree"] += x.shape[0]
    return ShadowCounts(**c)


@dataclass(frozen=True)
class RadialScan:
    """Fractions of states over a β grid (each (K,) for K values of β).

    ``form1``/``form2``/``form3``: every head satisfies the form; ``fall``: some per-head energy falls
    (``dE_h/dt < −1e-12 E_h``); ``form3_and_fall``: count of states where form 3 holds for every head
    and yet some per-head energy falls (0 wherever form 3 ⇒ form 1 ⇔ ``dE_h/dt ≥ 0`` applies, i.e. under
    orthogonal subspaces with ``V = M``).
    """

    betas: np.ndarray
    form1: np.ndarray
    form2: np.ndarray
    form3: np.ndarray
    fall: np.ndarray
    form3_and_fall: np.ndarray


def radial_scan(spec: Heads, x: torch.Tensor, betas: Sequence[float], space: str = "sphere") -> RadialScan:
    """Radial dominance and per-head energy falls of the states ``x`` (B, n, d) at each β in ``betas``."""
    check_tensor("x", x, ndim=3)
    bs = np.array([check_real("betas", b, min=0.0, min_open=True) for b in betas], dtype=float)
    out: dict[str, list[float]] = {k: [] for k in ("form1", "form2", "form3", "fall", "form3_and_fall")}
    for b in bs:
        f = head_outputs(spec, x, float(b))  # (B, H, n, d)
        er = energy_rates(spec, x, float(b), velocity(spec, x, float(b), space, f=f))
        rd = radial_dominance(f, x)
        fall = (er.rel < -FALL).any(-1)  # (B,)
        f3 = rd.form3.all(-1)
        for k, v in (("form1", rd.form1.all(-1)), ("form2", rd.form2.all(-1)), ("form3", f3), ("fall", fall)):
            out[k].append(float(v.double().mean()))
        out["form3_and_fall"].append(float((f3 & fall).sum()))
    return RadialScan(bs, *(np.array(out[k]) for k in ("form1", "form2", "form3", "fall", "form3_and_fall")))


@dataclass(frozen=True)
class RadialInvariance:
    """Per form k = 1, 2, 3 (index k − 1): ``started[k]`` trajectories whose initial state satisfies form k
    for every head, ``left[k]`` of them that break it at some later recorded state, and ``entered[k]``
    trajectories that start outside it and satisfy it at the last record.

    Per trajectory (arrays of shape (B,)): ``form1_start`` whether form 1 holds for every head at t = 0;
    ``exit_time`` the first recorded time at which form 1 fails for some head (``inf`` if never within
    ``t1``; 0 for a trajectory that starts outside); ``cluster_time`` the first recorded time at which every
    pair of tokens has ``<x_i, x_j> > threshold`` (one cluster; ``inf`` if not within ``t1``);
    ``form1_share`` the fraction of records up to ``min(cluster_time, t1)`` at which form 1 holds.
    ``t1`` is the last recorded time.
    """

    started: tuple[int, int, int]
    left: tuple[int, int, int]
    entered: tuple[int, int, int]
    trajectories: int
    form1_start: np.ndarray
    exit_time: np.ndarray
    cluster_time: np.ndarray
    form1_share: np.ndarray
    t1: float


def radial_invariance(
    spec: Heads, x0: torch.Tensor, beta: float, t1: float, every: float, dt: float = 0.05,
    threshold: float = 0.999,
) -> RadialInvariance:  # fmt: skip
    """Is radial dominance preserved along RK4 trajectories on the sphere from ``x0`` (B, n, d), and does
    form 1 last until the tokens form one cluster (every pair above ``threshold``)?"""
    from attnlab.dynamics.integrate import Record, simulate

    check_tensor("x0", x0, ndim=3)
    sol = simulate(
        spec, x0, beta=beta, t1=t1, dt=dt,
        record=Record(every=every, observables=("clusters",), trajectory=True, threshold=threshold),
    )  # fmt: skip
    forms = []
    for x in sol.trajectory:  # (B, n, d) per record
        rd = radial_dominance(head_outputs(spec, x, beta), x)
        forms.append(torch.stack([rd.form1.all(-1), rd.form2.all(-1), rd.form3.all(-1)]))  # (3, B)
    F = torch.stack(forms)  # (T, 3, B)
    start, ever_out, end = F[0], (~F).any(0), F[-1]
    t = sol.t.numpy()
    out1 = (~F[:, 0]).numpy()  # (T, B): form 1 broken at that record
    one = (sol.observables["cluster_fraction"] >= 1.0).cpu().numpy()  # (T, B): a single cluster
    first = np.where(out1.any(0), t[out1.argmax(0)], np.inf)  # (B,)
    clus = np.where(one.any(0), t[one.argmax(0)], np.inf)  # (B,)
    upto = t[:, None] <= np.minimum(clus, t[-1])[None, :]  # (T, B): records up to clustering
    share = ((~out1) & upto).sum(0) / upto.sum(0)
    return RadialInvariance(
        tuple(int(v) for v in start.sum(-1)),
        tuple(int(v) for v in (start & ever_out).sum(-1)),
        tuple(int(v) for v in (~start & end).sum(-1)),
        int(x0.shape[0]),
        start[0].cpu().numpy(),
        first,
        clus,
        share,
        float(t[-1]),
    )
