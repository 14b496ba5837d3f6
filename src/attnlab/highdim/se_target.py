"""The accuracy target of the state evolution: when a solve has reached ``rtol`` (docs/se-accuracy.md).

A solve asked for a relative accuracy ``rtol`` (:func:`~attnlab.highdim.state_evolution.state_evolution`)
adds independently scrambled node sets, in batches, to its average until :func:`target_met`: every quantity
of ``TARGETED`` has a relative standard error at most ``rtol / t``, with ``t`` the ``QUANTILE`` quantile of
Student's t with ``R − 1`` degrees of freedom (``R`` the scrambles averaged), on at least ``MIN_SCRAMBLES``
scrambles.

Why the quantile. The scramble points are independent draws about the fixed point of the exact integral (up
to the grid's and the linearisation's biases, docs/se-accuracy.md), so ``(mean − exact) / stderr`` is close
to a t variable with ``R − 1`` degrees of freedom: the standard error of a few scrambles is itself noisy
(``(R − 1) s²/σ²`` is χ² with ``R − 1`` degrees of freedom), and the t quantile covers that noise. With
``stderr ≤ rtol / t`` the event ``|mean − exact| ≤ t · stderr`` (probability 0.95 at a fixed ``R``) implies
``|mean − exact| ≤ rtol``. The rule is checked after every batch, which is optional stopping: a batch whose
spread happens to be small stops the solve early. Simulated on Gaussian scramble values (batches of four
from four, ``MIN_SCRAMBLES`` = 8, at most 64; 20000 solves per spread; ``tests/highdim/test_se_target.py``),
a solve stops with the target met and an error above ``rtol`` in 0.4%, 2.5%, 4.4%, 5.0%, 5.4%, 5.4% and 3.7%
of the solves at per-scramble spreads of 1, 1.5, 2, 2.5, 3, 3.5 and 4 times ``rtol`` (met in all of them up
to 3, in 95% at 3.5 and 54% at 4, where the budget runs out): about the nominal 5% for one quantity, a little
above it where the target needs some 30–50 scrambles. Among the solves reporting the target met, the error is
above ``rtol`` in at most 5.6% up to a spread of 3.5, 6.9% at 4 and 12% at 5 (where 1.3% of the solves meet
it). The minimum keeps a solve from stopping on the first batch, whose four-scramble standard error is too
rough to trust (three degrees of freedom; with a minimum of four the worst rate was 6.0%). With several
quantities the one that needs the most scrambles is the one at risk; the others stop with room to spare.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from attnlab.core.validation import check_int, check_real

__all__ = ["TARGETED", "MIN_SCRAMBLES", "MAX_SCRAMBLES", "QUANTILE", "bound", "relative_errors",
           "bound_ratio", "target_met", "check_target"]  # fmt: skip

#: the quantities whose relative standard error the target bounds
TARGETED = ("q", "m", "sigma", "test_error", "train_loss")
#: the fewest scrambles a solve may stop on (module docstring)
MIN_SCRAMBLES = 8
#: the default budget of scrambles of a targeted solve
MAX_SCRAMBLES = 64
#: the quantile of Student's t (two-sided 95%)
QUANTILE = 0.975


def bound(rtol: float, scrambles: int) -> float:
    """The largest relative standard error that meets ``rtol`` on ``scrambles`` scrambles: ``rtol / t``.

    ``t`` by ``scipy.special.stdtrit`` (the inverse of Student's t distribution function, the values of
    ``scipy.stats.t.ppf``), imported here: the state evolution's import loads no scipy (``scipy.stats``
    alone costs 1.4–1.7 CPU-s), so a solve without a target pays nothing for it."""
    from scipy.special import stdtrit

    return rtol / float(stdtrit(scrambles - 1, QUANTILE))


def relative_errors(values: Mapping[str, float], stderr: Mapping[str, float]) -> dict[str, float]:
    """The relative standard error of each quantity of ``TARGETED`` (a value of zero with a nonzero error:
    infinite)."""
    out = {}
    for k in TARGETED:
        v, e = abs(float(values[k])), float(stderr[k])
        out[k] = e / v if v > 0 else (0.0 if e == 0 else math.inf)
    return out


def bound_ratio(
    values: Mapping[str, float], stderr: Mapping[str, float], scrambles: int, rtol: float
) -> float:
    """The largest over ``TARGETED`` of the relative standard error over :func:`bound` (≤ 1: within it)."""
    b = bound(rtol, scrambles)
    rels = relative_errors(values, stderr).values()
    return max(rel / b if math.isfinite(rel) else math.inf for rel in rels)


def target_met(values: Mapping[str, float], stderr: Mapping[str, float], scrambles: int, rtol: float) -> bool:
    """Whether an average of ``scrambles`` scrambles with these values and standard errors meets ``rtol``."""
    return scrambles >= MIN_SCRAMBLES and bound_ratio(values, stderr, scrambles, rtol) <= 1.0


def check_target(rtol: float, max_scrambles: int | None, scrambles: int) -> tuple[float, int]:
    """``rtol`` in (0, 1) and the budget (default ``MAX_SCRAMBLES``, at least ``scrambles`` and
    ``MIN_SCRAMBLES``), checked: one line naming the argument otherwise."""
    rtol = check_real("rtol", rtol, min=0.0, max=1.0, min_open=True, max_open=True)
    if max_scrambles is None:
        max_scrambles = max(MAX_SCRAMBLES, scrambles)
    max_scrambles = check_int("max_scrambles", max_scrambles, min=max(scrambles, MIN_SCRAMBLES))
    return rtol, max_scrambles
