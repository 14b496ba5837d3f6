"""Where the output channel's expectation is evaluated (docs/se-accuracy.md): the node layout.

At T = 2 the expectation is over two label coordinates ``v`` and two student coordinates ``w``; the product
rule takes scrambled-Sobol label nodes times an ``n × n`` Gauss–Hermite grid in ``w``, other token counts
scrambled-Sobol nodes in all coordinates. These functions fix how many of each a solve uses.
"""

from __future__ import annotations

import numpy as np
import torch

from attnlab.core.validation import check_int
from attnlab.highdim.setting import Setting

__all__ = [
    "w_nodes", "target_grid", "default_nodes", "target_nodes", "default_fold", "layout", "label_nodes",
    "hermite", "check_grid",
]  # fmt: skip

_PRODUCT_NODES = 9216  # "auto" takes the product rule from this many nodes on (256 label nodes × 6 × 6)
_LABELS = 2048  # label nodes of the default node count (:func:`default_nodes`)
#: the grids in ``w`` of a solve with an accuracy target for 1e-3 ≤ λ̃ < 1e-2, 1e-4 ≤ λ̃ < 1e-3 and below
#: (:func:`target_grid`)
_TARGET_GRIDS = (8, 16, 24)
MAX_GRID = 64  # the largest grid in ``w`` a channel takes (64² = 4096 nodes per label node)
#: a solve asked for an accuracy below this at λ̃ < 1e-3 takes 2048 label nodes instead of the default's 512
#: (:func:`target_nodes`)
FINE_TARGET = 2e-3
#: a solve asked for an accuracy of at least this at λ̃ ≥ 1e-2 takes 1024 label nodes instead of the default's
#: 2048 (:func:`target_nodes`)
COARSE_TARGET = 1e-3


def w_nodes(setting: Setting) -> int:
    """Gauss–Hermite nodes per dimension of ``w`` in the product rule (docs/se-accuracy.md).

    The integrand in ``w`` jumps where the two proximal minima tie, near the interpolation peak of the
    small-λ̃ curves: at λ̃ = 1e-4, α = 0.25 (Σ ≈ 61) six nodes leave a bias of 1.6e-4 on Σ̂ (5.7 standard
    errors of 8.4 million Sobol nodes on ``G_q``) and twelve none that those resolve; at λ̃ = 1e-3, α = 0.3
    four leave 3.4e-4 on Σ̂ and six none beyond 1e-4; at λ̃ = 1e-2 (α = 0.1 to 1, Σ = 0.8 to 19) five
    leave at most 1.6e-5 on any hat against sixteen (four: 3.8e-5 on Σ̂ at α = 0.2, about one standard
    error of the default solve)."""
    if setting.lam >= 1e-2:
        return 5
    return 6 if setting.lam >= 1e-3 else 12


def target_grid(setting: Setting) -> int:
    """The grid in ``w`` of a solve asked for an accuracy (``state_evolution(..., rtol=...)``): 5 × 5 at
    λ̃ ≥ 1e-2 (the default's), 8 × 8 for 1e-3 ≤ λ̃ < 1e-2, 16 × 16 for 1e-4 ≤ λ̃ < 1e-3 and 24 × 24 below.

    Measured against grid-free references (scrambled Sobol nodes in every coordinate, 64 scrambles of 262144
    nodes, docs/se-accuracy.md): the default grids move the fixed point by ``q`` −0.5e-3 (6 × 6 at λ̃ = 1e-3,
    α = 0.3), +0.7e-3 (12 × 12 at 1e-4, α = 0.25) and −1.0e-3 (12 × 12 at 1e-5, α = 0.2; Σ −2.5e-3), as
    large as a target of 1e-3 and outside its error bar; these grids leave at most 0.15e-3, 0.35e-3 (Σ) and
    0.5e-3 (Σ, within 0.7 of its standard error), and 5 × 5 at λ̃ = 1e-2, α = 0.5 at most 0.09e-3."""
    if setting.lam >= 1e-2:
        return w_nodes(setting)
    if setting.lam >= 1e-3:
        return _TARGET_GRIDS[0]
    return _TARGET_GRIDS[1] if setting.lam >= 1e-4 else _TARGET_GRIDS[2]


def check_grid(grid: int | None, setting: Setting) -> int:
    """``grid`` (None: :func:`w_nodes`'s) checked: an integer from 2 to ``MAX_GRID``."""
    if grid is None:
        return w_nodes(setting)
    return check_int("grid", grid, min=2, max=MAX_GRID)


def default_nodes(setting: Setting, grid: int | None = None) -> int:
    """The default nodes per scramble of :func:`~attnlab.highdim.state_evolution.state_evolution`: at
    T = 2 the product rule's 2048 label nodes times its grid, at most 73728 (51200 at λ̃ ≥ 1e-2, 73728 at
    1e-3 ≤ λ̃ < 1e-2 and 512 label nodes × 144 below); 73728 Sobol nodes at other T. ``grid``: another
    grid in ``w`` on the same label nodes (:func:`target_grid`'s: 2048 × 64 = 131072 for 1e-3 ≤ λ̃ < 1e-2,
    512 × 256 = 131072 for 1e-4 ≤ λ̃ < 1e-3, 512 × 576 = 294912 below)."""
    if setting.tokens != 2:
        return 73728
    n = w_nodes(setting)
    labels = min(73728, _LABELS * n * n) // (n * n)
    g = check_grid(grid, setting)
    return labels * g * g


def target_nodes(setting: Setting, rtol: float, grid: int | None = None) -> int:
    """The default nodes per scramble of a solve asked for an accuracy ``rtol``: :func:`default_nodes` with
    ``grid`` (:func:`target_grid`'s), except at T = 2 where the label nodes are sized for the target:
    below λ̃ = 1e-3 with ``rtol`` < :data:`FINE_TARGET` the default's 512 label nodes become 2048 (2048 × 256
    = 524288 nodes for 1e-4 ≤ λ̃ < 1e-3, 2048 × 576 = 1179648 below), and at λ̃ ≥ 1e-2 with ``rtol`` ≥
    :data:`COARSE_TARGET` the default's 2048 become 1024 (1024 × 25 = 25600 nodes on the default grid).

    Why (docs/se-accuracy.md, "What 1e-3 costs"; folded label nodes): on 512 label nodes one scramble's
    relative standard error of Σ is about 5.7e-3 at λ̃ = 1e-4, α = 0.25 and 5.2e-3 at λ̃ = 1e-5, α = 0.2, so
    the rule's ``R ≥ (t·s/rtol)²`` asks for about 130 scrambles at ``rtol`` = 1e-3, twice the default budget
    (64 scrambles did not meet it at any of three seeds); on 2048 it is about 1.8e-3, and 16–20 scrambles met
    it at every seed (55–81 CPU-s at λ̃ = 1e-4). A scramble of 2048 label nodes costs four of 512, so it is the
    cheaper way from about ``R`` = 32 scrambles of 512 on, ``rtol`` ≈ 2e-3; above that, 512 label nodes meet
    the target at fewer than 32 scrambles (at 4e-3 on the minimum of eight).

    At λ̃ ≥ 1e-2 the rule's minimum of eight scrambles is what a target of 1e-3 costs on the default's label
    nodes: their folded single-scramble spread (about 3e-4 relative at λ̃ = 1e-2, α = 0.5) is a quarter of
    what eight scrambles may have (``rtol · √8 / t`` = 1.2e-3), so half the label nodes, whose spread is
    about 1.5 times larger, still meet it on eight, at about half the cost (docs/se-accuracy.md, "What 1e-3
    costs")."""
    nodes = default_nodes(setting, grid)
    if setting.tokens != 2:
        return nodes
    g = check_grid(grid, setting)
    if setting.lam < 1e-3 and rtol < FINE_TARGET:
        return _LABELS * g * g
    if setting.lam >= 1e-2 and rtol >= COARSE_TARGET:
        return _LABELS // 2 * g * g
    return nodes


def default_fold(setting: Setting) -> bool:
    """Whether a solve folds its label nodes into one quadrant of the output channel's symmetries unless told
    (:class:`~attnlab.highdim.channel.OutputChannel`, ``fold``): at T = 2, where the channel has them. The
    expectation is the same; its single-scramble spread is a half to a quarter of the whole plane's at
    λ̃ = 1e-2 and 1e-4 (docs/se-accuracy.md, "Folded label nodes")."""
    return setting.tokens == 2


def layout(setting: Setting, nodes: int, rule: str = "auto", grid: int | None = None) -> tuple[str, int]:
    """The rule (``"sobol"`` or ``"product"``) and the number of nodes :class:`OutputChannel` uses for
    ``nodes`` requested nodes (``grid``: the product rule's grid in ``w``, default :func:`w_nodes`)."""
    k = check_grid(grid, setting) ** 2
    if rule == "auto":  # the product rule needs enough label nodes to beat Sobol (docs/highdim.md C3)
        big = setting.tokens == 2 and nodes >= max(_PRODUCT_NODES, 256 * k)
        rule = "product" if big else "sobol"
    if rule == "product":
        return rule, label_nodes(nodes // k) * k
    return rule, nodes


def label_nodes(n: int) -> int:
    """The product rule's label nodes for room for ``n``: the largest power of 2 not above it, at least 2. A
    scrambled Sobol set is balanced at powers of 2 only: at λ̃ = 1e-2, α = 0.3016, four scrambles of 2949
    label nodes gave a standard error of the training loss 3.4 times that of 2048 (docs/se-accuracy.md)."""
    return 1 << max(1, int(n).bit_length() - 1)


def hermite(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gauss–Hermite nodes and weights for the standard normal law (weights sum to 1)."""
    x, w = np.polynomial.hermite_e.hermegauss(n)
    return torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(w / w.sum(), dtype=torch.float64)
