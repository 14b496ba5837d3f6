"""Figures of paper C's rates for n ≫ d² (``highdim.variance-rate``, ``highdim.bias-rate``), from stored
rows only: the fall of the test error along the ladder, ``e(α) − e(rα)`` against α on log-log axes, the
simulation's seed means ± their standard errors beside the finite-d state evolution's, one curve per setting
(the test's, each knob cell's, each control's)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from attnlab.engine.protocol import Row
from attnlab.report.figures import new_figure

__all__ = ["FIGURES"]

_SETTING = ("gamma", "d", "noise", "lam", "optimizer")


def rates(rows: Sequence[Row]) -> dict[str, Any]:
    from matplotlib.ticker import NullFormatter

    ok = [r for r in rows if r.ok and "test_errors" in r.metrics]
    curves: dict = {}
    for r in ok:
        key = (r.control or "",) + tuple(r.params.get(k) for k in _SETTING)
        curves.setdefault(key, []).append(r)
    fig, ax = new_figure()
    ax = ax[0][0]
    for key, rs in sorted(curves.items(), key=lambda kv: tuple(map(str, kv[0]))):
        ctrl, g, d, noise, lam, opt = key
        alphas = np.array(rs[0].metrics["alphas"], dtype=float)
        E = np.array([r.metrics["test_errors"] for r in rs], dtype=float)
        D = E[:, :-1] - E[:, 1:]
        mean = D.mean(axis=0)
        sem = D.std(axis=0, ddof=1) / math.sqrt(len(rs)) if len(rs) > 1 else np.zeros_like(mean)
        pos = mean > 0
        tag = f"γ={g}, d={d}, Δ={noise}, λ̃={lam}" + (f", {opt}" if opt not in (None, "lbfgs") else "")
        tag += f" ({ctrl})" if ctrl else ""
        line = ax.errorbar(
            alphas[:-1][pos], mean[pos], yerr=sem[pos], fmt="x" if ctrl else "o", capsize=2, label=tag
        ).lines
        # the state evolution rides on one row (replicate 0's); None where that point failed
        th = next((r.metrics for r in rs if r.metrics.get("se_test_errors") is not None), None)
        sd = None if th is None else -np.diff(np.array(th["se_test_errors"], dtype=float))
        if sd is not None and np.all(sd > 0):
            ax.plot(alphas[:-1], sd, "--" if ctrl else "-", color=line[0].get_color(), lw=0.9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    lows = sorted({a for rs in curves.values() for a in rs[0].metrics["alphas"][:-1]})
    ax.set_xticks(lows, [f"{a:g}" for a in lows])  # the ladder's rungs, plainly
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("α = n/d² (the ladder's lower end)")
    ax.set_ylabel("e(α) − e(rα)  (lines: state evolution)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return {"rates": fig}


FIGURES = {"highdim.variance-rate": rates, "highdim.bias-rate": rates}
