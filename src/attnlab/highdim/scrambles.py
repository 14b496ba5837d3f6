"""Independently scrambled node sets of the output expectation and the average of the fixed points solved
on them, with standard errors (docs/se-accuracy.md): what
:func:`~attnlab.highdim.state_evolution.state_evolution` solves on by default and how it combines them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from attnlab.core.validation import check_int
from attnlab.highdim.channel import OutputChannel
from attnlab.highdim.channel_nodes import default_nodes
from attnlab.highdim.fixed_point import FixedPoint
from attnlab.highdim.setting import Setting

__all__ = ["NODES", "SCRAMBLES", "PILOT", "channels", "average_fixed_points"]

#: the nodes per scramble (at T = 2 the default depends on λ̃:
#: :func:`~attnlab.highdim.channel_nodes.default_nodes`), scrambles and pilot nodes of
#: :func:`~attnlab.highdim.state_evolution.state_evolution`
NODES, SCRAMBLES, PILOT = 73728, 4, 4096


def channels(
    setting: Setting,
    nodes: int | None = None,
    seed: int = 0,
    scrambles: int = SCRAMBLES,
    grid: int | None = None,
    fold: bool = False,
) -> list[OutputChannel]:
    """``scrambles`` independently scrambled node sets (seeds ``seed``, ``seed + 1``, …) of ``nodes`` nodes
    each (default :func:`~attnlab.highdim.channel_nodes.default_nodes` for ``grid``): what
    :func:`~attnlab.highdim.state_evolution.state_evolution` solves on by default. ``grid``: the product
    rule's grid in ``w`` (:class:`~attnlab.highdim.channel.OutputChannel`; None: its default); ``fold``: label
    nodes folded into a quadrant of the channel's symmetries (``OutputChannel``, ``fold``)."""
    scrambles = check_int("scrambles", scrambles, min=1)
    if nodes is None:
        nodes = default_nodes(setting, grid)
    return [OutputChannel(setting, nodes, seed + i, grid=grid, fold=fold) for i in range(scrambles)]


#: the fields of a FixedPoint averaged over scrambles, and those given a standard error
_AVERAGED = (
    "q", "m", "sigma", "q_hat", "m_hat", "sigma_hat", "test_error", "train_loss", "s_error", "rank_fraction",
    "delta", "eps", "eta",
)  # fmt: skip
_WITH_ERROR = ("q", "m", "sigma", "test_error", "train_loss", "s_error")


def average_fixed_points(fps: Sequence[FixedPoint]) -> FixedPoint:
    """The average of fixed points solved on independent scrambles of the nodes, with standard errors.

    Each field of ``_AVERAGED`` is the mean over the ``R`` points; ``stderr`` holds the sample standard
    deviation over ``√R`` for ``q, m, Σ``, the test error, the training loss and ``s_error`` (the standard
    error of randomised quasi-Monte Carlo, unbiased for independent scrambles). Converged when every one
    is; ``iterations`` is the total; ``mixed_weight`` is NaN when some point has an unresolved cycle, the
    mean of the resolved weights when some point mixed, else None; ``stable`` and ``candidates`` come from
    the first point (where the multi-start choice was made).
    """
    fps = list(fps)
    if len(fps) < 2:
        raise ValueError(f"fps: expected at least two fixed points, got {len(fps)}")
    vals = {k: np.array([getattr(f, k) for f in fps], dtype=float) for k in _AVERAGED}
    r = len(fps)
    err = {k: float(np.std(vals[k], ddof=1) / math.sqrt(r)) for k in _WITH_ERROR}
    weights = [f.mixed_weight for f in fps if f.mixed_weight is not None]
    mixed = None
    if weights:
        mixed = math.nan if any(math.isnan(w) for w in weights) else float(np.mean(weights))
    return replace(
        fps[0],
        **{k: float(v.mean()) for k, v in vals.items()},
        iterations=int(sum(f.iterations for f in fps)),
        converged=all(f.converged for f in fps),
        max_rel_change=float(max(f.max_rel_change for f in fps)),
        mixed_weight=mixed,
        scrambles=r,
        stderr=err,
    )
