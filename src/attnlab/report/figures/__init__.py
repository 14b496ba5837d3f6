"""Figures of the claims, one module per area, drawn from stored rows only.

Each area module (``ensemble``, ``flow``, ``highdim``, ``highdim_rates``, ``models``, ``training``) exports
``FIGURES``: a mapping claim id -> ``fn(rows) -> {name: matplotlib Figure}``. Figures read the stored
metrics and arrays of a run's rows; they never import claim code and never recompute. Further modules (a
user's own claims, test claims) are added with ``ATTNLAB_EXTRA_FIGURES`` (comma-separated module names).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from typing import Any

from attnlab.engine.protocol import Row

__all__ = ["AREA_FIGURE_MODULES", "MIN_FONT_PT", "FigureFn", "figure_function", "legible", "new_figure"]

#: Smallest font (points) of legends, tick and axis labels in a saved figure; the report shows figures
#: at ~110 dpi scaled to the column, where 5-7 pt legends could not be read.
MIN_FONT_PT = 8.0

FigureFn = Callable[[Sequence[Row]], "dict[str, Any]"]

AREA_FIGURE_MODULES = (
    "attnlab.report.figures.ensemble",
    "attnlab.report.figures.flow",
    "attnlab.report.figures.highdim",
    "attnlab.report.figures.highdim_rates",
    "attnlab.report.figures.models",
    "attnlab.report.figures.training",
)


def _modules() -> list[str]:
    extra = [m.strip() for m in os.environ.get("ATTNLAB_EXTRA_FIGURES", "").split(",") if m.strip()]
    return list(AREA_FIGURE_MODULES) + extra


def figure_function(claim_id: str) -> FigureFn | None:
    """The figure function registered for ``claim_id`` (None when the claim has no figures)."""
    for name in _modules():
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        fn = getattr(mod, "FIGURES", {}).get(claim_id)
        if fn is not None:
            return fn
    return None


def new_figure(nrows: int = 1, ncols: int = 1, w: float = 5.0, h: float = 3.6):
    """A matplotlib Figure (no pyplot state) with a grid of axes: ``(fig, axes[nrows][ncols])``."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w * ncols, h * nrows), constrained_layout=True)
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def legible(fig: Any, min_pt: float = MIN_FONT_PT) -> Any:
    """Raise every legend entry, legend title, tick label, axis label and title of ``fig`` to at least
    ``min_pt`` points (larger ones are kept); returns ``fig``."""
    texts = []
    legends = list(getattr(fig, "legends", []))
    for ax in fig.get_axes():
        if ax.get_legend() is not None:
            legends.append(ax.get_legend())
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label]
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            ticks = axis.get_major_ticks()  # their labels get their text only when drawn
            if ticks and ticks[0].label1.get_fontsize() < min_pt:
                ax.tick_params(axis=name, which="both", labelsize=min_pt)
    for leg in legends:
        texts += [*leg.get_texts(), leg.get_title()]
    for t in texts:
        if t is not None and t.get_text() and t.get_fontsize() < min_pt:
            t.set_fontsize(min_pt)
    return fig
