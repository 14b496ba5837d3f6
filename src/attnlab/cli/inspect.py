"""``attnlab inspect [PATH | minilm]``: a real model's heads through the three theories.

Loads the checkpoint offline, computes the weights-only diagnostics (subspace diversity with its
null, spectra of ``W_Q W_Kᵀ``, paper B's ``M_h, V_h`` defects) and, when the folder has a tokenizer,
the token-level ones on a few bundled sentences (radial dominance on hidden states, attention
entropy). Prints a per-layer table, or one JSON object with ``--json``; ``--csv`` writes the
per-head table and ``--figures`` the figures (PNG and SVG).
"""

from __future__ import annotations

import contextlib
import csv
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from attnlab.cli.common import JsonOpt, UsageError, emit_json, err_console, out_console

__all__ = ["inspect_command", "run_inspect"]

_GEOMETRY_COLUMNS = (
    ("layer", "layer", "{:d}"),
    ("hdi_k", "HDI K", "{:.4f}"),
    ("hdi_k_z", "z K", "{:.1f}"),
    ("hdi_q", "HDI Q", "{:.4f}"),
    ("hdi_v", "HDI V", "{:.4f}"),
    ("hdi_ov", "HDI OV", "{:.4f}"),
    ("hdi_null", "null", "{:.4f}"),
    ("mean_angle_k_deg", "angle K (°)", "{:.1f}"),
    ("null_median_angle_deg", "null median (°)", "{:.1f}"),
)
_DYNAMICS_COLUMNS = (
    ("layer", "layer", "{:d}"),
    ("qk_rank90", "QK rank90", "{:.1f}"),
    ("qk_outliers", "QK outliers", "{:.1f}"),
    ("sym_defect", "asym M", "{:.2f}"),
    ("value_cos", "cos(V,M)", "{:.2f}"),
    ("mm_cross_mean", "‖M'M‖ rel", "{:.2f}"),
    ("radial_form1", "radial 1", "{:.2f}"),
    ("radial_form2", "radial 2", "{:.2f}"),
    ("radial_form3", "radial 3", "{:.2f}"),
    ("entropy_ratio", "H/log n", "{:.2f}"),
)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Many small batched factorisations: one torch thread is fastest (and steady on shared cores)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_inspect(source: str = "minilm", *, text: bool = True, dtype: str = "float64") -> Any:
    """Load ``source`` and diagnose it; returns the :class:`~attnlab.diagnose.Diagnosis`."""
    import torch

    from attnlab import diagnose as dg
    from attnlab import models

    if dtype not in ("float32", "float64"):
        raise UsageError("--dtype", "float32 or float64", dtype)
    with _one_thread():
        heads = models.load(source, dtype=torch.float64 if dtype == "float64" else torch.float32)
        traces, note = None, None
        if text:
            from attnlab.models.trace import trace_text

            try:
                traces = trace_text(source, dg.SENTENCES)
            except (ValueError, OSError) as exc:
                note = f"token-level diagnostics skipped: {' '.join(str(exc).split())}"
        diag = dg.diagnose(heads, traces)
    if note:
        import dataclasses

        diag = dataclasses.replace(diag, notes=(*diag.notes, note))
    return diag


def _write_csv(path: Path, rows: tuple[dict[str, Any], ...]) -> None:
    if path.parent and not path.parent.exists():
        raise UsageError("--csv", "a file in an existing folder", str(path))
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow(
                {k: ("" if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
            )


def _write_figures(folder: Path, diag: Any) -> list[str]:
    from attnlab.report.figures.models import draw_figures

    if folder.exists() and not folder.is_dir():
        raise UsageError("--figures", "a folder", str(folder))
    folder.mkdir(parents=True, exist_ok=True)
    metrics = {k: [r.get(k, math.nan) for r in diag.layers] for k in diag.layers[0]}
    metrics["model"] = diag.meta.get("model")
    written = []
    for name, fig in draw_figures(diag.arrays, metrics).items():
        for ext in ("png", "svg"):
            p = folder / f"{name}.{ext}"
            fig.savefig(p, dpi=110, bbox_inches="tight")
            written.append(str(p))
    return written


def _fmt(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if spec == "{:d}":
        return str(int(value))
    return spec.format(value)


def inspect_command(
    path: str = typer.Argument(
        "minilm", help="A local Hugging Face checkpoint folder, or 'minilm' (the bundled all-MiniLM-L6-v2)."
    ),
    json_out: bool = JsonOpt,
    csv_path: Path | None = typer.Option(None, "--csv", help="Write the per-head table to this CSV file."),
    figures: Path | None = typer.Option(
        None, "--figures", help="Write figures (overlap heatmaps, angle histograms, spectra) to this folder."
    ),
    text: bool = typer.Option(
        True, "--text/--no-text", help="Token-level diagnostics on bundled sentences (needs a tokenizer)."
    ),
    dtype: str = typer.Option("float64", "--dtype", help="Arithmetic precision: float64 or float32."),
) -> None:
    """Inspect a real model's attention heads: diversity vs the null, QK spectra, flow defects, entropy."""
    diag = run_inspect(path, text=text, dtype=dtype)
    if csv_path is not None:
        _write_csv(csv_path, diag.heads)
    files = _write_figures(figures, diag) if figures is not None else []
    if json_out:
        out = diag.to_dict()
        if csv_path is not None:
            out["csv"] = str(csv_path)
        if files:
            out["figures"] = files
        emit_json(out)
        return
    m = diag.meta
    out_console.print(
        f"[bold]{m['model']}[/bold] ({m['architecture']}): {m['n_layers']} layers × {m['n_heads']} heads, "
        f"d_model {m['d_model']}, d_head {m['d_head']} (per-layer means over heads)"
    )
    for title, columns in (
        ("paper A: subspace diversity (HDI) against random subspaces", _GEOMETRY_COLUMNS),
        ("paper C: spectra of W_Q W_Kᵀ; paper B: M_h, V_h and radial dominance; entropy", _DYNAMICS_COLUMNS),
    ):
        table = Table(title=title)
        cols = [c for c in columns if c[0] in diag.layers[0]]
        for _, label, _ in cols:
            table.add_column(label, justify="right")
        for r in diag.layers:
            table.add_row(*(_fmt(r.get(key), spec) for key, _, spec in cols))
        out_console.print(table)
    r0 = diag.layers[0]
    out_console.print(
        f"null: random {m['d_head']}-dim subspaces of R^{m['d_model']} give HDI {r0['hdi_null']:.4f} "
        f"± {r0['hdi_null_sd']:.2g} and a median principal angle of {r0['null_median_angle_deg']:.1f}°; "
        "z < −3 means heads share directions more than chance."
    )
    for note in diag.notes:
        err_console.print(f"note: {note}")
    if csv_path is not None:
        err_console.print(f"per-head table: {csv_path}")
    if files:
        err_console.print(f"figures: {len(files)} files in {figures}")
