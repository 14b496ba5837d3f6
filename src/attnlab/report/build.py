"""The report: ``report.html`` (self-contained) and ``report.md``, from the store only.

Every claim's latest stored verdict (and each of its variants: runs with ``--set`` overrides) is
read from the store with the claim's metadata as it was when the run was decided; the figures are
drawn by ``attnlab.report.figures`` from the stored rows. No claim code is imported and nothing is
recomputed, so a store's report stays the same after the claims' code changes. A read-only store
(an archived results folder) is reported into another folder with ``dest``.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attnlab.engine.runner import DB_NAME, ClaimOutcome, outcomes_from_stored  # noqa: E402
from attnlab.engine.store import Store  # noqa: E402
from attnlab.report.figures import figure_function, legible  # noqa: E402
from attnlab.report.render import format_numbers, render_html, render_markdown  # noqa: E402

__all__ = ["build_report", "collect_outcomes", "Report", "FigureFile", "format_numbers"]


@dataclass
class FigureFile:
    claim_id: str
    name: str
    png: Path
    svg: Path
    png_bytes: bytes


@dataclass
class Report:
    html: Path
    markdown: Path
    outcomes: list[ClaimOutcome]
    variants: list[ClaimOutcome] = field(default_factory=list)
    figures: list[FigureFile] = field(default_factory=list)
    figure_errors: dict[str, str] = field(default_factory=dict)
    failed_points: dict[str, list] = field(default_factory=dict)


def _open(out: Path) -> Store:
    db = out / DB_NAME
    if not db.exists():
        raise ValueError(f"--out: expected a folder holding {DB_NAME}, got {str(out)!r} (nothing stored yet)")
    return Store(db, readonly=True)  # the report only reads


def collect_outcomes(out: str | Path, variants: bool = False) -> list[ClaimOutcome]:
    """Stored verdicts in ``<out>/attnlab.sqlite``: the profile's own, plus variants if asked."""
    with _open(Path(out)) as store:
        stored = store.latest_verdicts()
    own, var = outcomes_from_stored(stored)
    return own + var if variants else own


def _figures(
    outcome: ClaimOutcome, store: Store, fig_dir: Path, errors_of_points: dict[str, list]
) -> tuple[list[FigureFile], str | None]:
    fn = figure_function(outcome.id)
    rows = store.rows(list(outcome.point_ids), with_arrays=fn is not None)
    cells = [r for r in rows if r.cell]  # the map's cells are shown in the map table, not the figures
    rows = [r for r in rows if not r.cell]
    failed = [
        (dict(r.params), (r.error or "").splitlines()[0] if r.error else "") for r in rows + cells if not r.ok
    ]
    if failed:
        errors_of_points[outcome.id] = failed[:20]
    if fn is None or not any(r.ok for r in rows):
        return [], None
    try:
        figs = fn(rows)
    except Exception as e:  # noqa: BLE001 - a broken figure must not lose the report
        plt.close("all")
        return [], f"figure function raised {type(e).__name__}: {e}"
    files = []
    for name, fig in figs.items():
        stem = f"{outcome.id}__{name}".replace("/", "_")
        png, svg = fig_dir / f"{stem}.png", fig_dir / f"{stem}.svg"
        buf = io.BytesIO()
        legible(fig)  # no legend or label below MIN_FONT_PT, whatever the figure function chose
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        png.write_bytes(buf.getvalue())
        fig.savefig(svg, format="svg", bbox_inches="tight")
        plt.close(fig)
        files.append(FigureFile(outcome.id, name, png, svg, buf.getvalue()))
    return files, None


def build_report(
    out: str | Path,
    dest: str | Path | None = None,
    progress: Callable[[str, Any], None] | None = None,
) -> Report:
    """Write ``report.html``, ``report.md`` and ``figures/*.png|svg`` for the store in ``out``.

    ``dest`` (default ``out``) is where the report goes: a read-only store is reported elsewhere.
    ``progress`` is called with ``("start", n_claims)`` and ``("claim", claim_id)``.
    """
    out = Path(out)
    dest = Path(dest) if dest is not None else out
    store = _open(out)
    try:
        stored = store.latest_verdicts()
        not_testable = store.not_testable()
        outcomes, variants = outcomes_from_stored(stored)
        fig_dir = dest / "figures"
        fig_dir.mkdir(parents=True, exist_ok=True)
        rep = Report(dest / "report.html", dest / "report.md", outcomes, variants)
        per_claim: dict[str, list[FigureFile]] = {}
        if progress:
            progress("start", len(outcomes))
        for o in outcomes:
            files, err = _figures(o, store, fig_dir, rep.failed_points)
            per_claim[o.id] = files
            rep.figures.extend(files)
            if err:
                rep.figure_errors[o.id] = err
            if progress:
                progress("claim", o.id)
    finally:
        store.close()
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rep.html.write_text(
        render_html(outcomes, variants, per_claim, rep.figure_errors, stamp, rep.failed_points, not_testable),
        encoding="utf-8",
    )
    rep.markdown.write_text(
        render_markdown(outcomes, variants, per_claim, rep.figure_errors, stamp, dest, not_testable),
        encoding="utf-8",
    )
    return rep
