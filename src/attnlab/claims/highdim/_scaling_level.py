"""``highdim.scaling-law``: the ERM's level against the state evolution's, reported beside the exponent and
not deciding (docs/highdim.md C6, "The level")."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from attnlab.engine.protocol import Row

__all__ = ["level", "name_d_lam", "side_of"]


def side_of(r: Row) -> str:
    """Which side a row computes: ``"simulation"`` or ``"theory"`` (the default of ``Params.side``)."""
    return r.params.get("side", "theory")


def level(good: Sequence[Row], name: str, g: float, x: np.ndarray, y: np.ndarray, th) -> dict:
    """The ERM's level against the state evolution's, reported and not deciding (docs/highdim.md C6, "The
    level"): per simulated n/d the seed mean's excess over the theory's (``level_ratio``, None where the
    theory lacks the point), the mean error of the target itself on the simulation's test sets (``sim_e0``,
    its exact logit law) and the theory's Gaussian-equivalent one (``theory_e0``), and the share of the logit
    variance the strongest direction of the target the ERM learns carries (``top_share``, at γ times the
    rows' ``target_gamma_scale``: no d makes the logits Gaussian when it stays finite)."""
    from attnlab.highdim import power_law_spectrum, top_share

    d, lam = name_d_lam(name)
    mine = [r for r in good if r.params["gamma"] == g and r.params["d"] == d and r.params["lam"] == lam]
    scale = next((r.params.get("target_gamma_scale", 1.0) for r in mine if side_of(r) == "simulation"), 1.0)
    out: dict = {"top_share": top_share(power_law_spectrum(d, g * scale))}
    if th is not None:
        tx, ty = th[1], th[2]
        ratios: list = []
        for v, col in zip(x, y.T):
            col = col[np.isfinite(col)]
            at = np.flatnonzero(np.isclose(tx, v))
            ratios.append(round(float(col.mean() / ty[at[0]]), 4) if col.size and at.size else None)
        out["level_ratio"] = ratios
    for side, key in (("simulation", "sim_e0"), ("theory", "theory_e0")):
        e0 = [
            r.metrics["e0"] for r in mine if side_of(r) == side and np.isfinite(r.metrics.get("e0", np.nan))
        ]
        if e0:
            out[key] = float(np.mean(e0))
    return out


def name_d_lam(name: str) -> tuple[int, float]:
    """``d`` and ``λ̃`` from a curve's name ``g{γ}_d{d}_lam{λ̃}``."""
    m = re.fullmatch(r"g[^_]+_d(\d+)_lam(.+)", name)
    if m is None:
        raise ValueError(f"name: expected a curve name g<γ>_d<d>_lam<λ̃>, got {name!r}")
    return int(m.group(1)), float(m.group(2))
