"""Test helpers for the claims that decide along several finite-size forms (``_common.along_forms``)."""

from __future__ import annotations

import numpy as np

STEPS = (0.01, 0.02, 0.05, 0.10, 0.25, 0.50)  # the relative moves of a prediction the power machinery tries


def first_flips(forms: dict, centre: float, se_se: float) -> dict[str, float]:
    """The first move ε of a crossing's prediction ``centre`` (each way) at which some form's limit ``a``
    (``forms``: ``{p: [a, se, χ², holds]}``) misses it by more than ``2 √(se² + se_se²)``: where a verdict
    decided alike along every form stops holding."""

    def leaves(e: float) -> bool:
        c = centre * (1 + e)
        return any(abs(a - c) > 2 * np.hypot(se, se_se) for a, se, _, _ in forms.values())

    return {"+": min(e for e in STEPS if leaves(e)), "-": min(e for e in STEPS if leaves(-e))}


def crossing_fit_by_hand(per_d: dict, p: float = 1.0) -> tuple[float, float]:
    """``(a, se(a))`` of the thresholds' fit ``a + b/d^p`` computed independently of ``large_d_estimate``:
    one spread pooled over the sizes after scaling each size's residuals by d (a spread falling like 1/d),
    each size's standard error that spread over ``d √n``, and numpy's weighted polyfit (weights 1/σ) with
    its unscaled covariance."""
    ds = np.array(sorted(per_d), dtype=float)
    xs = [np.asarray(per_d[int(d)], dtype=float) for d in ds]
    dof = sum(x.size - 1 for x in xs)
    spread = np.sqrt(sum(float(np.sum(((x - x.mean()) * d) ** 2)) for x, d in zip(xs, ds, strict=True)) / dof)
    ses = np.array([spread / (d * np.sqrt(x.size)) for x, d in zip(xs, ds, strict=True)])
    means = np.array([x.mean() for x in xs])
    (_, a), cov = np.polyfit(ds**-p, means, 1, w=1 / ses, cov="unscaled")
    return float(a), float(np.sqrt(cov[1, 1]))
