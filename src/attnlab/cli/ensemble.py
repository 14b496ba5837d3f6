"""``attnlab ensemble``: head diversity and the MSE decomposition of NW ensembles (paper A)."""

from __future__ import annotations

import torch
import typer
from rich.table import Table

from attnlab.cli.common import JsonOpt, UsageError, emit_json, out_console

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
    if heads < 2:
        raise UsageError("--heads", "an integer >= 2 (HDI is a mean over pairs of heads)", heads)
    if d < 1 or dk < 1 or dk > d:
        raise UsageError("--dk", f"an integer in [1, d = {d}]", dk)
    if seed < 0:
        raise UsageError("--seed", "a non-negative integer", seed)
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
    from attnlab.ensemble.data import RegressionTask
    from attnlab.ensemble.decomposition import decompose as run_decompose
    from attnlab.ensemble.layouts import projection_layout
    from attnlab.ensemble.weights import head_weights

    if weights not in ("uniform", "geometric", "fibonacci"):
        raise UsageError("--weights", "one of uniform, geometric, fibonacci", weights)
    if seed < 0:
        raise UsageError("--seed", "a non-negative integer", seed)
    task = RegressionTask(d=d, target=target, noise=noise)
    g = torch.Generator().manual_seed(seed)
    W = projection_layout(layout, heads, d, dk, c, angle, generator=g)
    alpha = head_weights(weights, heads)
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
