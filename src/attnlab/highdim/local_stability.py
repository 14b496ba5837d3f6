"""Local stability of a state-evolution fixed point (docs/highdim.md C3): the spectral radius of the
Jacobian of the undamped map at the point, by central finite differences on fixed quadrature nodes. It
stands in for the paper's replicon condition, which the project does not reproduce, under its own name."""

from __future__ import annotations

import numpy as np

from attnlab.core.validation import check_real
from attnlab.highdim.channel import OutputChannel
from attnlab.highdim.channel_nodes import default_fold
from attnlab.highdim.fixed_point import FixedPoint, Stability, prior_equations
from attnlab.highdim.setting import Setting

__all__ = ["stability"]


def stability(
    setting: Setting,
    fp: FixedPoint,
    *,
    damping: float = 0.5,
    nodes: int = 4096,
    seed: int = 0,
    step: float = 1e-5,
    channel: OutputChannel | None = None,
) -> Stability:
    """Local stability of the fixed point ``fp`` under the state-evolution map.

    The map is ``F(q, m, Σ)``: output equations then prior equations, undamped. Its Jacobian is taken by
    central finite differences (relative step ``step``) on the same quasi-random nodes (``channel``, or
    ``nodes`` nodes with scrambling ``seed``, folded at T = 2 as the default solve's). ``damping`` only sets
    ``radius_damped`` and ``stable``.
    """
    damping = check_real("damping", damping, min=0.0, max=1.0, max_open=True)
    step = check_real("step", step, min=0.0, min_open=True)
    ch = channel if channel is not None else OutputChannel(setting, nodes, seed, fold=default_fold(setting))

    def F(x: np.ndarray) -> np.ndarray:
        qh, mh, sh, _ = ch.hats(x[0], x[1], x[2], fp.alpha)
        q, m, s, _, _ = prior_equations(setting, qh, mh, sh)
        return np.array([q, m, s])

    x0 = np.array([fp.q, fp.m, fp.sigma])
    Jm = np.zeros((3, 3))
    for j in range(3):
        h = step * max(abs(x0[j]), 1e-8)
        e = np.zeros(3)
        e[j] = h
        Jm[:, j] = (F(x0 + e) - F(x0 - e)) / (2 * h)
    ev = np.linalg.eigvals(Jm)
    evd = damping + (1 - damping) * ev
    r_u = float(np.max(np.abs(ev)))
    r_d = float(np.max(np.abs(evd)))
    return Stability(r_u, r_d, tuple(complex(v) for v in ev), r_d < 1)
