"""Controlled-overlap sweeps (docs/ensemble.md A2, A4): how the ensemble's MSE moves with the heads' overlap.

:func:`controlled_overlap_sweep` builds, for each pairwise principal angle ``φ``, the ``controlled``
layout (every pair of heads at angle ``φ``, subspace HDI ``sin² φ`` by construction) and estimates
the integrated MSE decomposition of the uniform ensemble by Monte Carlo over training samples.
Common random numbers: the same frames ``(U_0, V_h)``, the same integration queries and the same
training samples at every angle (each re-drawn from its own seed), so differences between angles
are not sampling noise of the data or the frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.geometry import diversity
from attnlab.core.seeding import generator
from attnlab.core.validation import check_int, check_real
from attnlab.ensemble.data import RegressionTask
from attnlab.ensemble.decomposition import decompose_predictions, monte_carlo_predictions
from attnlab.ensemble.layouts import projection_layout

__all__ = ["OverlapSweep", "controlled_overlap_sweep"]


@dataclass(frozen=True)
class OverlapSweep:
    """Per angle (A angles): the quantities of the uniform ensemble's MSE decomposition."""

    angle_deg: np.ndarray  # (A,) pairwise principal angle φ
    hdi: np.ndarray  # (A,) subspace HDI of the layout (sin² φ up to rounding)
    mse: np.ndarray  # (A,) integrated MSE
    bias2: np.ndarray  # (A,) integrated (Σ α b)²
    var_part: np.ndarray  # (A,) integrated variance + covariance terms
    mean_var: np.ndarray  # (A,) mean head variance V over heads and queries
    mean_corr: np.ndarray  # (A,) mean correlation between distinct heads
    closed_form: np.ndarray  # (A,) V(q)(ρ(q) + (1−ρ(q))/H) at each query's own V and ρ, integrated
    rep_err: np.ndarray  # (A, R) integrated squared error of each replication's ensemble


def _reflection_to_axis(d: int, H: int, d_k: int, frame_seed: int) -> torch.Tensor:
    """The Householder reflection (d, d) that maps the first column of the frame's shared part
    ``U_0`` (the φ = 0 layout drawn from ``frame_seed``) to ``e_1``."""
    u = projection_layout("controlled", H, d, d_k, 1.0, 0.0, generator=generator(frame_seed))[0, :, 0]  # (d,)
    v = u.clone()
    v[0] -= 1.0
    nv = float(v.square().sum())
    if nv < 1e-24:  # already on the axis
        return torch.eye(d, dtype=torch.float64)
    return torch.eye(d, dtype=torch.float64) - 2.0 * torch.outer(v, v) / nv


def controlled_overlap_sweep(
    task: RegressionTask,
    H: int,
    d_k: int,
    n_train: int,
    c: float,
    angles: Sequence[float],
    reps: int,
    queries: int,
    seeds: tuple[int, int, int],
    device: str | torch.device = "cpu",
    align: bool = False,
    at_origin: bool = False,
) -> OverlapSweep:
    """Integrated MSE decomposition of the uniform ensemble of ``controlled`` heads at each angle.

    Parameters
    ----------
    task : RegressionTask
    H, d_k : int
        Heads and per-head dimension (the layout needs ``(H + 1) d_k <= task.d``).
    n_train : int
        Training-sample size.
    c : float
        Projection scale (``W_h = c U_h``); Gaussian kernel at the default scale ``1/√d_k``.
    angles : sequence of float
        Pairwise principal angles in degrees, in ``[0, 90]``.
    reps, queries : int
        Monte Carlo replications of the training sample; integration points.
    seeds : (int, int, int)
        Seeds of the query draw, the frame draw and the training-sample draws (CPU generators,
        re-seeded at every angle: common random numbers).
    device
        Where the kernel sums run.
    align : bool
        Reflect every frame (the same reflection at every angle) so that the shared part ``U_0``
        contains the first coordinate axis, the direction the ``sine``, ``linear``, ``ridge`` and
        ``bump`` targets read first: identical heads then see the target, orthogonal ones do not
        (a planted setting where diversity must hurt). Rotation-invariant targets (``radial``,
        ``zero``) have the same law of errors either way.
    at_origin : bool
        Decompose at the one query ``q = 0`` instead of ``queries`` draws. With a rotation-invariant
        target and Gaussian inputs the heads are then exchangeable (an orthogonal map fixing ``U_0``
        permutes the ``V_h``): one variance and one correlation for all, where ``V(ρ + (1−ρ)/H)`` is exact
        up to Monte Carlo error.

    Returns
    -------
    OverlapSweep
    """
    H = check_int("H", H, min=1)
    reps = check_int("reps", reps, min=1)
    m = check_int("queries", queries, min=1)
    if len(angles) == 0:
        raise ValueError("angles: expected at least one angle in degrees, got none")
    for a in angles:
        check_real("angles", a, min=0.0, max=90.0)
    if len(seeds) != 3:
        raise ValueError(f"seeds: expected three seeds (queries, frames, samples), got {seeds!r}")
    q_seed, frame_seed, sample_seed = (int(s) for s in seeds)
    Q = task.sample_x(m, generator(q_seed)).to(device)  # (m, d) integration points
    if at_origin:
        Q = torch.zeros(1, task.d, dtype=Q.dtype, device=device)  # (1, d) the one query q = 0
    fQ = task.f(Q)  # (m,)
    alpha = torch.full((H,), 1.0 / H, dtype=torch.float64, device=device)
    out: dict[str, list] = {
        k: [] for k in ("hdi", "mse", "bias2", "var_part", "mean_var", "mean_corr", "closed_form", "rep_err")
    }
    refl = _reflection_to_axis(task.d, H, d_k, frame_seed) if align else None  # (d, d)
    for a in angles:  # a handful of angles; each is one vectorised Monte Carlo decomposition
        W = projection_layout("controlled", H, task.d, d_k, c, float(a), generator=generator(frame_seed))
        if refl is not None:
            W = refl @ W  # (H, d, d_k) the same orthogonal map at every angle
        W = W.to(device)  # (H, d, d_k)
        preds = monte_carlo_predictions(task, W, n_train, Q, reps, generator(sample_seed))  # (R, H, m)
        dec = decompose_predictions(preds, fQ, alpha)
        it = dec.integrated()
        out["hdi"].append(diversity(W).hdi)
        out["mse"].append(it["mse"])
        out["bias2"].append(it["bias2"])
        out["var_part"].append(it["variance"] + it["covariance"])
        out["mean_var"].append(dec.mean_variance)
        out["mean_corr"].append(dec.mean_correlation)
        out["closed_form"].append(float(dec.equicorrelated_form().mean()))
        out["rep_err"].append(((preds.mean(dim=1) - fQ).square().mean(dim=1)).cpu().numpy())  # (R,)
    arr = {k: np.asarray(v) for k, v in out.items()}
    return OverlapSweep(angle_deg=np.asarray([float(a) for a in angles]), **arr)
