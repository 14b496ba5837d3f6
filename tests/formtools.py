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
