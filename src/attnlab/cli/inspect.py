"""``attnlab inspect [PATH | minilm] ...``: real models' heads through the three theories.

Loads each checkpoint offline and streams it one layer at a time (safetensors, sharded or not, in
the checkpoint's dtype; ``.bin`` with ``weights_only=True``), computes the weights-only diagnostics
(subspace diversity with its null, spectra of ``W_Q W_Kᵀ``, paper B's ``M_h, V_h`` defects) and,
when the folder holds the model's own tokenizer, the token-level ones on a few bundled sentences
(radial dominance on hidden states, attention entropy, and the key HDI in the metric of the hidden
states entering each layer, ``hdi_k_data`` with its null and z). Prints a per-layer table, or one JSON
object with ``--json``; ``--csv`` writes the per-head table and ``--figures`` the figures (PNG and
SVG). Several models: one comparison table and figure, and ``--json`` holds one entry per model
under ``models``. ``--list-architectures`` prints what is supported and what is refused, and why.
"""

from __future__ import annotations

import contextlib
import csv
import math
from collections.abc import Callable, Iterator
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
    ("hdi_k_data", "HDI K data", "{:.4f}"),
    ("hdi_k_data_null", "data null", "{:.4f}"),
    ("hdi_k_data_z", "z data", "{:.1f}"),
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
    """Many small batched factorisations (per-head SVD/QR of k × k blocks): one torch thread is fastest,
    and steady on shared cores (threaded batched LAPACK calls were 4× slower in wall time there)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _allocator_for(stack_bytes: int) -> Callable[[], Any] | None:
    """Set glibc's allocator for a model whose float64 ``(H, d, k)`` stack takes ``stack_bytes``; returns
    a function to call after each layer (``malloc_trim(0)``) for large models, None otherwise. Elsewhere
    than glibc nothing is changed.

    Small models (stack at most 64 MB): freed blocks of up to 64 MB stay in the heap for reuse. glibc
    serves each block above its mmap threshold (at most 32 MB by default) with a fresh mapping and unmaps
    it when freed, so the next block of the same size is faulted in and zeroed page by page again. A
    layer's float64 stacks are 32 MB at d = 2048 and the diagnosis allocates dozens per layer: on the
    TinyLlama shape this was 8 of 54 CPU s in the kernel, and more in zeroing. Blocks up to 64 MB then
    come from the heap, whose top is returned to the kernel only past 256 MB of free space.

    Large models: every block of 4 MB or more is a mapping of its own, returned when freed, and the heap
    is trimmed after each layer. Their work per layer grows as d³ against d² for the faults, and a heap
    that holds their blocks fragments and grows layer after layer: on the Llama-2-7B shape the memory
    left between layers grew from 285 MB to 700 MB over six layers with glibc's default thresholds (and
    to a 2.17 GB peak over 32 layers with every block in the heap), the peak moving by 100 MB from one
    run to another; with these settings it stays at 300 MB, and three full-depth runs of the 7B shape
    peaked at 938–939 MiB.
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        mallopt, trim = libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return None
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    if stack_bytes <= 64 << 20:
        mallopt(m_mmap_threshold, 64 << 20)
        mallopt(m_trim_threshold, 256 << 20)
        return None
    mallopt(m_mmap_threshold, 4 << 20)  # a fixed threshold also stops glibc from raising it
    return lambda: trim(0)


def run_inspect(
    source: str = "minilm", *, text: bool = True, dtype: str = "float64", progress: Any = None
) -> Any:
    """Load ``source`` (streamed) and diagnose it; returns the :class:`~attnlab.diagnose.Diagnosis`."""
    import torch

    from attnlab import diagnose as dg
    from attnlab import models

    if dtype not in ("float32", "float64"):
        raise UsageError("--dtype", "float32 or float64", dtype)
    heads = models.load(source, dtype=None, stream=True)  # checkpoint dtype, one layer at a time
    stack_bytes = 8 * heads.n_heads * heads.d_model * heads.d_head
    trim = _allocator_for(stack_bytes)
    after_layer = progress
    if trim is not None:

        def after_layer(done: int, total: int) -> None:
            trim()
            if progress is not None:
                progress(done, total)

    with _one_thread():
        if dtype == "float32":  # round the weights to float32 first (the arithmetic stays float64)
            heads = heads.to(dtype=torch.float32)
        traces, note = None, None
        if text:
            from attnlab.models.gguf_file import is_gguf
            from attnlab.models.trace import gguf_has_tokenizer, has_tokenizer, trace_text

            folder, _ = models.resolve_source(source)
            if is_gguf(source) and not gguf_has_tokenizer(source):
                note = "GGUF file without tokenizer.ggml.tokens: token-level diagnostics skipped"
            elif not is_gguf(source) and not has_tokenizer(folder):
                note = "no tokenizer of the model's own in the folder: token-level diagnostics skipped"
            else:
                try:
                    traces = trace_text(source, dg.SENTENCES)
                except (ValueError, OSError) as exc:
                    note = f"token-level diagnostics skipped: {' '.join(str(exc).split())}"
        diag = dg.diagnose(heads, traces, progress=after_layer)
    notes = [n for n in (note, _latent_note(heads)) if n]
    if notes:
        import dataclasses

        diag = dataclasses.replace(diag, notes=(*diag.notes, *notes))
    return diag


def _latent_note(heads: Any) -> str | None:
    """What the HDI means for heads that share a latent (multi-head latent attention), with the nulls of
    random subspaces inside the latents beside the usual ones in R^d."""
    mla = heads.extra.get("mla")
    if not mla:
        return None
    r, rq, N, R, V = (
        mla[k] for k in ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    )
    k_null = f"{1 - (N + R) / (r + R):.4f}" if N <= r else "undefined"
    v_null = f"{1 - V / r:.4f}" if V <= r else "undefined"
    q_part = (
        f", Q heads in the {rq}-dim query latent (null {1 - (N + R) / rq:.4f})"
        if rq is not None and N + R <= rq
        else ""
    )
    return (
        f"multi-head latent attention: every head's keys lie in the span of one {r}-dim latent and one "
        f"shared {R}-dim rotary key, and its values in the latent, so the K and V HDI are bounded by that "
        f"subspace; random subspaces inside it give HDI {k_null} (K) and {v_null} (V) instead of the null "
        f"in R^d{q_part}; "
        "QK spectra and M_h use the non-rotary (bilinear) coordinates, scores also carry per-token latent "
        "RMS factors"
    )


def _check_csv_path(path: Path) -> None:
    """Fail before any model is loaded when ``--csv`` cannot be written (probe: create, then remove)."""
    if path.is_dir():
        raise UsageError("--csv", "a file, not a folder", str(path))
    if not path.parent.is_dir():
        raise UsageError("--csv", "a file in an existing folder", str(path))
    from attnlab.cli.common import special_file

    kind = special_file(path)
    if kind:
        raise UsageError("--csv", f"a regular file path (this is {kind}, which would block)", str(path))
    existed = path.exists()
    try:
        with path.open("a"):
            pass
    except OSError as exc:
        raise UsageError("--csv", f"a writable file ({exc.strerror or exc})", str(path)) from None
    if not existed:
        path.unlink(missing_ok=True)


def _check_figures_path(folder: Path) -> None:
    """Fail before any model is loaded when ``--figures`` is not a folder that can be created and written."""
    if folder.exists() and not folder.is_dir():
        raise UsageError("--figures", "a folder", str(folder))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".attnlab-write-probe"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise UsageError("--figures", f"a writable folder ({exc.strerror or exc})", str(folder)) from None


def _write_csv(path: Path, rows: tuple[dict[str, Any], ...]) -> None:
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


_COMPARE_COLUMNS = (
    ("layer", "layer", "{:d}"),
    ("hdi_k", "HDI K", "{:.4f}"),
    ("hdi_null", "null", "{:.4f}"),
    ("hdi_k_z", "z K", "{:.1f}"),
    ("hdi_q", "HDI Q", "{:.4f}"),
    ("qk_rank90", "QK rank90", "{:.1f}"),
    ("entropy_ratio", "H/log n", "{:.2f}"),
)


def _list_architectures(json_out: bool) -> None:
    from attnlab.models import architectures

    arch = architectures()
    if json_out:
        emit_json(arch)
        return
    table = Table(title="supported architectures (model_type -> converter)")
    table.add_column("model_type")
    table.add_column("converter")
    for mt, fam in arch["supported"].items():
        table.add_row(mt, fam)
    out_console.print(table)
    refused = Table(title="refused architectures (not reproduced exactly)")
    refused.add_column("model_type")
    refused.add_column("reason")
    for mt, why in arch["refused"].items():
        refused.add_row(mt, why)
    for what, why in arch["refused_configurations"].items():
        refused.add_row(what, why)
    for mt, what in arch.get("no_attention", {}).items():
        refused.add_row(mt, f"{what}: no attention layers")
    out_console.print(refused)


def _diagnose_all(paths: list[str], text: bool, dtype: str, show_progress: bool) -> list[Any]:
    from attnlab.cli.common import TaskProgress

    diags = []
    for src in paths:
        if not show_progress:
            diags.append(run_inspect(src, text=text, dtype=dtype))
            continue
        with TaskProgress(f"inspect {src}: layers", total=None, unit="layers") as bar:

            def tick(done: int, total: int, bar: Any = bar) -> None:
                if bar.total is None:
                    bar.total = total
                bar.update(done=done)

            diags.append(run_inspect(src, text=text, dtype=dtype, progress=tick))
    return diags


def _print_one(diag: Any) -> None:
    m = diag.meta
    kv = f", {m['n_kv_heads']} K/V heads" if m.get("grouped_kv") else ""
    out_console.print(
        f"[bold]{m['model']}[/bold] ({m['model_type'] or m['architecture']}): {m['n_layers']} layers × "
        f"{m['n_heads']} heads{kv}, d_model {m['d_model']}, d_head {m['d_head']} (per-layer means over heads)"
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
    null, sd = _fmt(r0.get("hdi_null"), "{:.4f}"), _fmt(r0.get("hdi_null_sd"), "{:.2g}")
    angle = _fmt(r0.get("null_median_angle_deg"), "{:.1f}")
    out_console.print(
        f"null: random {m['d_head']}-dim subspaces of R^{m['d_model']} give HDI {null} ± {sd} and a median "
        f"principal angle of {angle}°; z < −3 means heads share directions more than chance."
    )
    if "hdi_k_data" in r0:
        out_console.print(
            "HDI K data: key HDI in the metric of the hidden states entering the layer (Σ^{1/2} W_K, Σ their "
            "covariance on the bundled sentences), against Gaussian heads in the same metric."
        )


def _print_compare(diags: list[Any]) -> None:
    table = Table(title="per-layer comparison (means over heads; z of the key HDI against its null)")
    table.add_column("model")
    for _, label, _ in _COMPARE_COLUMNS:
        table.add_column(label, justify="right")
    for diag in diags:
        for r in diag.layers:
            table.add_row(diag.meta["model"], *(_fmt(r.get(key), spec) for key, _, spec in _COMPARE_COLUMNS))
    out_console.print(table)


def _compare_figure(folder: Path, diags: list[Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if folder.exists() and not folder.is_dir():
        raise UsageError("--figures", "a folder", str(folder))
    folder.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for diag in diags:
        depth = [(r["layer"] + 0.5) / len(diag.layers) for r in diag.layers]  # relative depth
        name = diag.meta["model"]
        line = axes[0].plot(depth, [r.get("hdi_k", math.nan) for r in diag.layers], marker="o", label=name)
        axes[0].plot(
            depth, [r.get("hdi_null", math.nan) for r in diag.layers], ls="--", color=line[0].get_color()
        )
        axes[1].plot(
            depth, [r.get("qk_rank90", math.nan) / diag.meta["d_head"] for r in diag.layers], marker="o"
        )
        axes[2].plot(depth, [r.get("entropy_ratio", math.nan) for r in diag.layers], marker="o")
    axes[0].set(title="key HDI (dashed: random-subspace null)", xlabel="relative depth", ylabel="HDI")
    axes[1].set(title="QK rank90 / d_head", xlabel="relative depth")
    axes[2].set(title="attention entropy / log n", xlabel="relative depth")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    written = []
    for ext in ("png", "svg"):
        p = folder / f"compare.{ext}"
        fig.savefig(p, dpi=110, bbox_inches="tight")
        written.append(str(p))
    plt.close(fig)
    return written


def inspect_command(
    paths: list[str] = typer.Argument(
        None,
        help="Local Hugging Face checkpoint folders or GGUF files, hub ids ORG/NAME found in the local "
        "Hugging Face cache (HF_HUB_CACHE, HF_HOME, ~/.cache/huggingface), or 'minilm' (the bundled "
        "all-MiniLM-L6-v2); several compare the models.",
    ),
    json_out: bool = JsonOpt,
    csv_path: Path | None = typer.Option(None, "--csv", help="Write the per-head table to this CSV file."),
    figures: Path | None = typer.Option(
        None, "--figures", help="Write figures (overlap heatmaps, angle histograms, spectra) to this folder."
    ),
    text: bool = typer.Option(
        True,
        "--text/--no-text",
        help="Token-level diagnostics on bundled sentences (needs the model's tokenizer).",
    ),
    dtype: str = typer.Option(
        "float64", "--dtype", help="Weights rounded to float64 (as stored) or float32."
    ),
    list_architectures: bool = typer.Option(
        False, "--list-architectures", help="Print the supported and refused architectures and exit."
    ),
    download: bool = typer.Option(
        False,
        "--download",
        help="Fetch hub ids (ORG/NAME) not in the local Hugging Face cache from the Hub (network); "
        "without it nothing is ever downloaded.",
    ),
) -> None:
    """Inspect real models' attention heads: diversity vs the null, QK spectra, flow defects, entropy."""
    if list_architectures:
        _list_architectures(json_out)
        return
    paths = list(paths or ["minilm"])
    if dtype not in ("float32", "float64"):
        raise UsageError("--dtype", "float32 or float64", dtype)
    if csv_path is not None:
        _check_csv_path(csv_path)
    if figures is not None:
        _check_figures_path(figures)
    if download:
        from attnlab.models import hub

        for src in paths:
            if hub.is_hub_id(src):
                try:
                    hub.resolve(src)
                except ValueError:  # not in the cache: the user asked for the network
                    hub.download(src)
    diags = _diagnose_all(paths, text, dtype, show_progress=not json_out)
    if csv_path is not None:
        # one table for all models; a model column whenever several are compared
        rows: tuple[dict[str, Any], ...] = (
            tuple([{"model": d.meta["model"], **r} for d in diags for r in d.heads])
            if len(diags) > 1
            else tuple(diags[0].heads)
        )
        _write_csv(csv_path, rows)
    if figures is not None:
        files = _write_figures(figures, diags[0]) if len(diags) == 1 else _compare_figure(figures, diags)
    else:
        files = []
    if json_out:
        out = diags[0].to_dict() if len(diags) == 1 else {"models": [d.to_dict() for d in diags]}
        if csv_path is not None:
            out["csv"] = str(csv_path)
        if files:
            out["figures"] = files
        emit_json(out)
        return
    if len(diags) == 1:
        _print_one(diags[0])
    else:
        _print_compare(diags)
    for d in diags:
        for note in d.notes:
            err_console.print(f"note ({d.meta['model']}): {note}" if len(diags) > 1 else f"note: {note}")
    if csv_path is not None:
        err_console.print(f"per-head table: {csv_path}")
    if files:
        err_console.print(f"figures: {len(files)} files in {figures}")
