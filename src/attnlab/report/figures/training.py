"""Figures of the training-diversity finding, from stored rows only.

Per configuration (all parameters but the seed, controls included): a grid of subspaces (rows Q, K, V,
OV) by forms (columns subspace, weight, data metric); each panel shows the HDI (mean over layers) of
every seed against the optimiser step, the null's mean ± 2 sd as a band, and the validation loss on a
second axis. Step 0 (the initialisation) is drawn at step 0.5 on the logarithmic axis.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from attnlab.engine.protocol import Row

__all__ = ["FIGURES", "training_diversity"]

_SUBSPACES = ("q", "k", "v", "ov")
_FORMS = ("subspace", "weight", "data")
_FORM_NAMES = {"subspace": "subspace form", "weight": "weight-aware form", "data": "data metric"}


def _label(params: dict[str, Any]) -> str:
    lam = params.get("ortho_penalty", 0.0)
    return (
        f"{params.get('task', 'text')}, H={params.get('n_heads')}, weight decay {params.get('weight_decay')}"
        + (f", orthogonality penalty λ={lam}" if lam else "")
    )


def _slug(params: dict[str, Any]) -> str:
    lam = params.get("ortho_penalty", 0.0)
    s = f"{params.get('task', 'text')}_h{params.get('n_heads')}_wd{params.get('weight_decay')}"
    return (s + (f"_lam{lam}" if lam else "")).replace(".", "p").replace("-", "m")


def _panel(ax, rows: Sequence[Row], s: str, form: str) -> None:
    twin = ax.twinx()
    for i, r in enumerate(rows):
        a = r.arrays
        step = np.maximum(np.asarray(a["step"], dtype=float), 0.5)
        hdi = np.asarray(a[f"hdi_{s}_{form}"]).mean(-1)  # (R,) mean over layers
        null = np.asarray(a[f"null_{s}_{form}"]).mean(-1)
        sd = np.asarray(a[f"null_sd_{s}_{form}"]).mean(-1)
        ax.plot(step, hdi, color=f"C{i}", lw=1.2, marker=".", label=f"seed {i}" if i < 5 else None)
        ax.fill_between(step, null - 2 * sd, null + 2 * sd, color="0.5", alpha=0.15, lw=0)
        ax.plot(step, null, color="0.3", lw=0.8, ls="--", label="null ± 2 sd" if i == 0 else None)
        twin.plot(step, a["val_loss"], color=f"C{i}", lw=0.8, ls=":", alpha=0.7)
    ax.set_xscale("log")
    ax.set_xlabel("optimiser step (init at 0.5)")
    ax.set_ylabel(f"HDI {s.upper()} (dimensionless)")
    twin.set_ylabel("validation loss (dotted; nats or MSE)", fontsize=7)
    ax.set_title(f"{s.upper()}, {_FORM_NAMES[form]}", fontsize=9)


def training_diversity(rows: Sequence[Row]) -> dict[str, Any]:
    """One figure per configuration: HDI against step with the null band, validation loss beside it."""
    from attnlab.report.figures import new_figure

    groups: dict[str, list[Row]] = defaultdict(list)
    params: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.ok and "step" in r.arrays:
            key = _slug(dict(r.params))
            groups[key].append(r)
            params[key] = dict(r.params)
    figs: dict[str, Any] = {}
    for key, rs in sorted(groups.items()):
        fig, axes = new_figure(len(_SUBSPACES), len(_FORMS), w=3.6, h=2.6)
        for i, s in enumerate(_SUBSPACES):
            for j, form in enumerate(_FORMS):
                _panel(axes[i][j], rs, s, form)
        axes[0][0].legend(fontsize=6, loc="lower left")
        fig.suptitle(f"Head diversity along training: {_label(params[key])} ({len(rs)} seeds)")
        figs[f"hdi_vs_step_{key}"] = fig
    return figs


FIGURES = {"models.training-diversity": training_diversity}
