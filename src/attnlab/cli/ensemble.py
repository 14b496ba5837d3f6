"""``attnlab ensemble``: head diversity and the MSE decomposition of NW ensembles (paper A, docs/ensemble.md).

Every option is checked before any work starts, sizes included: the projections (H · d · d_k values) and
the Monte Carlo predictions (R · H · queries values) are estimated against the memory available now.
"""

from __future__ import annotations

import torch
import typer
from rich.table import Table

from attnlab.cli.common import (
    JsonOpt,
    TaskProgress,
    UsageError,
    check_memory,
    check_seed,
    emit_json,
    largest_factor,
    out_console,
)

app = typer.Typer(
    help="Paper A: multi-head attention as an ensemble of Nadaraya–Watson estimators.", no_args_is_help=True
)

_CLI_LAYOUTS = ("random", "orthogonal", "shared")


@app.command()
def hdi(
    d: int = typer.Option(..., "--d", help="Model (input) dimension."),
    heads: int = typer.Option(..., "--heads", help="Number of heads H (>= 2)."),
    dk: int = typer.Option(..., "--dk", help="Per-head dimension d_k."),
    layout: str = typer.Option("random", "--layout", help="random | orthogonal (needs H·d_k <= d) | shared."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random subspaces."),
    json_out: bool = JsonOpt,
) -> None:
    """Head Diversity Index (subspace form) of H heads in a layout, with the random-subspace null."""
    from attnlab.core.geometry import diversity
    from attnlab.ensemble.layouts import projection_layout

    if layout not in _CLI_LAYOUTS:
        raise UsageError("--layout", "one of " + ", ".join(_CLI_LAYOUTS), layout)
    if d < 1:
        raise UsageError("--d", "an integer >= 1", d)
    if heads < 2:
        raise UsageError("--heads", "an integer >= 2 (HDI is a mean over pairs of heads)", heads)
    if dk < 1 or dk > d:
        raise UsageError("--dk", f"an integer in [1, d = {d}]", dk)
    if layout == "orthogonal" and heads * dk > d:
        raise UsageError("--layout", f"random or shared when H · d_k = {heads * dk} > d = {d}", layout)
    seed = check_seed(seed)
    _check_projection_memory(d, heads, dk)
    with TaskProgress(f"HDI of {heads} heads in R^{d}"):
        W = projection_layout(layout, heads, d, dk, generator=torch.Generator().manual_seed(seed))
        div = diversity(W)
    out = {
        "hdi": div.hdi,
        "hdi_null": div.hdi_null,
        "hdi_null_sd": div.hdi_null_sd,
        "hdi_z": div.z,
        "mean_angle_deg": div.mean_angle_deg,
        "median_angle_deg": div.median_angle_deg,
        "ceiling": div.ceiling,
        "form": div.form,
        "layout": layout,
        "d": d,
        "heads": heads,
        "dk": dk,
        "seed": seed,
    }
    if json_out:
        emit_json(out)
        return
    t = Table(title=f"HDI of {heads} heads, d = {d}, d_k = {dk}, layout {layout}")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    for k in ("hdi", "hdi_null", "hdi_null_sd", "hdi_z", "mean_angle_deg", "median_angle_deg", "ceiling"):
        t.add_row(k, f"{out[k]:.6g}")
    out_console.print(t)


@app.command()
def decompose(
    d: int = typer.Option(8, "--d", help="Input dimension."),
    heads: int = typer.Option(3, "--heads", help="Number of heads H."),
    dk: int = typer.Option(2, "--dk", help="Per-head dimension d_k."),
    layout: str = typer.Option("random", "--layout", help="random | orthogonal | shared | controlled."),
    angle: float = typer.Option(
        None, "--angle", help="Pairwise principal angle in degrees (controlled layout)."
    ),
    n: int = typer.Option(200, "--n", help="Training-sample size N."),
    queries: int = typer.Option(100, "--queries", help="Query points (integration sample)."),
    reps: int = typer.Option(100, "--reps", help="Monte Carlo replications R of the training sample."),
    target: str = typer.Option("sine", "--target", help="sine | ridge | bump | linear."),
    noise: float = typer.Option(0.5, "--noise", help="Label-noise standard deviation σ."),
    c: float = typer.Option(1.5, "--c", help="Projection scale c (W = c·U)."),
    kernel: str = typer.Option("gaussian", "--kernel", help="gaussian | dot."),
    weights: str = typer.Option("uniform", "--weights", help="uniform | geometric | fibonacci."),
    seed: int = typer.Option(0, "--seed", help="Root seed."),
    json_out: bool = JsonOpt,
) -> None:
    """One Monte Carlo MSE decomposition (bias², variance, covariance vs the direct MSE)."""
    from attnlab.core.geometry import diversity
    from attnlab.core.validation import check_choice, check_int, check_real
    from attnlab.ensemble.data import RegressionTask
    from attnlab.ensemble.decomposition import decompose as run_decompose
    from attnlab.ensemble.heads import KERNELS
    from attnlab.ensemble.layouts import LAYOUTS, projection_layout
    from attnlab.ensemble.weights import head_weights

    d = check_int("--d", d, min=1)
    heads = check_int("--heads", heads, min=1)
    dk = check_int("--dk", dk, min=1, max=d)
    check_choice("--layout", layout, LAYOUTS)
    if layout == "controlled":
        if angle is None:
            raise UsageError("--angle", "a principal angle in [0, 90] degrees with --layout controlled", None)
        check_real("--angle", angle, min=0.0, max=90.0)
    if layout == "orthogonal" and heads * dk > d:
        raise UsageError(
            "--layout", f"random, shared or controlled when H · d_k = {heads * dk} > d = {d}", layout
        )
    n = check_int("--n", n, min=2)
    queries = check_int("--queries", queries, min=1)
    reps = check_int("--reps", reps, min=2)
    check_real("--noise", noise, min=0.0)
    check_real("--c", c, min=0.0, min_open=True)
    check_choice("--kernel", kernel, KERNELS)
    check_choice("--weights", weights, ("uniform", "geometric", "fibonacci"))
    seed = check_seed(seed)
    _check_projection_memory(d, heads, dk)
    # predictions (R, H, queries) kept for the moments, queries and one training sample per replication
    blamed, value = largest_factor(("--reps", reps, 100), ("--queries", queries, 100), ("--n", n, 200))
    check_memory(
        blamed, value, 8 * (3 * reps * heads * queries + 2 * queries * d + 4 * n * d), "the predictions"
    )
    task = RegressionTask(d=d, target=target, noise=noise)
    g = torch.Generator().manual_seed(seed)
    W = projection_layout(layout, heads, d, dk, c, angle, generator=g)
    alpha = head_weights(weights, heads)
    with TaskProgress(f"{reps} replications of N = {n}"):
        dec = run_decompose(task, W, alpha, n, queries, reps, g, kernel=kernel)
    it = dec.integrated()
    out = {
        "bias2": it["bias2"],
        "variance": it["variance"],
        "covariance": it["covariance"],
        "terms_sum": it["terms_sum"],
        "mse": it["mse"],
        "identity_rel_error": dec.identity_rel_error,
        "mean_variance": dec.mean_variance,
        "mean_correlation": dec.mean_correlation,
        "hdi": diversity(W).hdi if heads >= 2 else None,
        "alpha": dec.alpha.tolist(),
        "params": {
            "d": d,
            "heads": heads,
            "dk": dk,
            "layout": layout,
            "angle": angle,
            "n": n,
            "queries": queries,
            "reps": reps,
            "target": target,
            "noise": noise,
            "c": c,
            "kernel": kernel,
            "weights": weights,
            "seed": seed,
        },
    }
    if json_out:
        emit_json(out)
        return
    t = Table(title=f"Integrated MSE decomposition ({heads} heads, {layout}, N = {n}, R = {reps})")
    t.add_column("term")
    t.add_column("value", justify="right")
    for k in (
        "bias2",
        "variance",
        "covariance",
        "terms_sum",
        "mse",
        "identity_rel_error",
        "mean_correlation",
    ):
        t.add_row(k, f"{out[k]:.6g}")
    out_console.print(t)


def _check_projection_memory(d: int, heads: int, dk: int) -> None:
    """H · d · d_k float64 values, with the draw, its QR and the per-head SVDs (~4 copies)."""
    check_memory("--d", d, 4 * 8 * heads * d * dk, f"{heads} projections of size {d} × {dk}")
