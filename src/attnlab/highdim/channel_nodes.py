"""Where the output channel's expectation is evaluated (docs/se-accuracy.md): the node layout.

At T = 2 the expectation is over two label coordinates ``v`` and two student coordinates ``w``; the product
rule takes scrambled-Sobol label nodes times an ``n × n`` Gauss–Hermite grid in ``w``, other token counts
scrambled-Sobol nodes in all coordinates. These functions fix how many of each a solve uses.
"""

from __future__ import annotations

import numpy as np
import torch

from attnlab.highdim.setting import Setting

__all__ = ["w_nodes", "default_nodes", "layout", "label_nodes", "hermite"]

_PRODUCT_NODES = 9216  # "auto" takes the product rule from this many nodes on (256 label nodes × 6 × 6)
_LABELS = 2048  # label nodes of the default node count (:func:`default_nodes`)


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


def default_nodes(setting: Setting) -> int:
    """The default nodes per scramble of :func:`~attnlab.highdim.state_evolution.state_evolution`: at
    T = 2 the product rule's 2048 label nodes times its grid, at most 73728 (51200 at λ̃ ≥ 1e-2, 73728 at
    1e-3 ≤ λ̃ < 1e-2 and 512 label nodes × 144 below); 73728 Sobol nodes at other T."""
    if setting.tokens != 2:
        return 73728
    return min(73728, _LABELS * w_nodes(setting) ** 2)


def layout(setting: Setting, nodes: int, rule: str = "auto") -> tuple[str, int]:
    """The rule (``"sobol"`` or ``"product"``) and the number of nodes :class:`OutputChannel` uses for
    ``nodes`` requested nodes."""
    if rule == "auto":  # the product rule needs enough label nodes to beat Sobol (docs/highdim.md C3)
        big = setting.tokens == 2 and nodes >= max(_PRODUCT_NODES, 256 * w_nodes(setting) ** 2)
        rule = "product" if big else "sobol"
    if rule == "product":
        k = w_nodes(setting) ** 2
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
