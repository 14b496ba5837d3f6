"""``attnlab highdim``: paper C (single-head tied attention in high dimensions).

``--noise`` is the label-noise variance Δ; ``--lam`` is λ̃, the nuclear-norm coefficient of docs/highdim.md C2
(the weight decay on W is λ = λ̃/√κ). Options are checked before any work starts, and the memory a
training run needs (about ``n = α d²`` sequences of T tokens in float64, with autograd's copies) is
estimated against what is available; solving and training show progress.
"""

from __future__ import annotations

import math
from pathlib import Path

import typer
from rich.table import Table

from attnlab.cli.common import (
    JsonOpt,
    TaskProgress,
    UsageError,
    check_device,
    check_out_file,
    emit_json,
    err_console,
    out_console,
)
from attnlab.cli.highdim_checks import check_nodes, check_setting, check_training
from attnlab.cli.highdim_target import law_readout, power_law_target

app = typer.Typer(help="Paper C: single-head tied attention in high dimensions.", no_args_is_help=True)

K0 = typer.Option(0.5, "--kappa0", help="Target rank ratio κ0 = p0/d.")
NOISE = typer.Option(0.5, "--noise", help="Label-noise variance Δ.")
TOK = typer.Option(2, "--tokens", help="Sequence length T.")
LAM = typer.Option(0.01, "--lam", help="λ̃: nuclear-norm coefficient (weight decay λ = λ̃/√κ).")
BETA = typer.Option(1.0, "--beta", help="Student inverse temperature β.")
BETA0 = typer.Option(1.0, "--beta0", help="Target inverse temperature β0.")


def _show(title: str, out: dict, err: dict | None = None) -> None:
    """A two-column table; ``err``: standard errors shown as ``value ± error``."""
    t = Table(title=title)
    t.add_column("quantity")
    t.add_column("value", justify="right")
    err = err or {}
    for k, v in out.items():
        text = f"{v:.6g}" if isinstance(v, float) else str(v)
        t.add_row(k, f"{text} ± {err[k]:.2g}" if k in err else text)
    out_console.print(t)


@app.command()
def se(
    kappa0: float = K0,
    noise: float = NOISE,
    tokens: int = TOK,
    lam: float = LAM,
    alpha: float = typer.Option(..., "--alpha", help="Sample ratio α = n/d²."),
    beta: float = BETA,
    beta0: float = BETA0,
    nodes: int | None = typer.Option(
        None,
        "--nodes",
        help="Nodes of the output expectation in each scramble (at T = 2 from 9216 nodes and 256 label nodes "
        "on: Sobol label nodes times an n × n Gauss–Hermite grid, n = 5 at λ̃ ≥ 1e-2, 6 down to 1e-3 and 12 "
        "below; with --rtol 8 down to 1e-3, 16 down to 1e-4 and 24 below; `rule` and `grid` in the JSON; "
        "else scrambled Sobol). Default: 2048 label nodes, at most 73728 nodes (51200 at λ̃ ≥ 1e-2, else "
        "73728; with --rtol the default's label nodes times the finer grid, and 2048 label nodes below "
        "λ̃ = 1e-3 when --rtol < 2e-3).",
    ),
    scrambles: int = typer.Option(
        4,
        "--scrambles",
        help="Independent scrambles of the nodes: the fixed point is solved once on a pilot of 4096 nodes "
        "and refined to each scramble's fixed point; the point is their average and its standard error "
        "(`stderr`) their spread over √scrambles (1: one set of nodes, no error bar).",
    ),
    multi_start: bool = typer.Option(
        False,
        "--multi-start",
        help="Solve from several spread starts and report the stable fixed point with the lowest "
        "training loss (about 4× the time); adds `stable` and `candidates`.",
    ),
    rtol: float | None = typer.Option(
        None,
        "--rtol",
        help="Relative accuracy to reach, in (0, 1): adds batches of --scrambles new scrambles until the "
        "relative standard error of q, m, Σ, the test error and the training loss is at most rtol/t (t the "
        "95% t quantile, at least 8 scrambles) or --max-scrambles is spent; `accuracy_met` in the JSON "
        "(docs/se-accuracy.md).",
    ),
    max_scrambles: int | None = typer.Option(
        None, "--max-scrambles", help="With --rtol: the most scrambles to average (default 64)."
    ),
    fold: bool | None = typer.Option(
        None,
        "--fold/--no-fold",
        help="Fold the label nodes into one quadrant of the output channel's symmetries (T = 2): the same "
        "expectation, about half the standard error at the same cost at λ̃ ≥ 1e-3 (`folded` in the JSON; "
        "docs/se-accuracy.md). Default: folded at T = 2; --no-fold keeps the whole plane's nodes.",
    ),
    gamma: float | None = typer.Option(
        None,
        "--gamma",
        help="A power-law target instead of Marchenko–Pastur: eigenvalues s_i ∝ i^(−γ), i = 1 … --d, "
        "normalised to Tr S0²/d = 1 (docs/highdim.md C6; --kappa0 is then unused). Adds `top_share`, the "
        "strongest direction's share of the logit variance.",
    ),
    d: int | None = typer.Option(None, "--d", help="With --gamma: the target's dimension d."),
    readout: bool = typer.Option(
        False,
        "--readout",
        help="With --gamma at T = 2: eight draws of the fixed point's law of Ŝ, η·ReLU(S0 + δZ − ε), read "
        "on 8000 sequences of the exact logit law each and by the Gaussian formula at their overlaps, and "
        "the target's own error e0 on 100000 (`readout`, `e0_exact`, `e0_gaussian`: where the Gaussian "
        'logits of the state evolution miss, docs/highdim.md C6 "Estimator or read-out").',
    ),
    seed: int = typer.Option(0, "--seed", help="With --readout: the seed of its draws."),
    json_out: bool = JsonOpt,
) -> None:
    """Solve the state evolution (docs/highdim.md C3) at one α: order parameters and observables.

    --rtol R adds scrambles until the error bars meet a relative accuracy R (docs/se-accuracy.md).
    --gamma G --d D solves it for a power-law target of dimension D (docs/highdim.md C6).
    """
    from attnlab.core.validation import check_int, check_real
    from attnlab.highdim import Setting, state_evolution
    from attnlab.highdim.channel_nodes import check_grid, default_nodes, layout, target_grid, target_nodes

    check_setting(kappa0, noise, tokens, lam, beta, beta0)
    if fold and tokens != 2:
        raise UsageError("--fold", "--tokens 2 (the symmetries it folds are those of two tokens)", tokens)
    # α above 1000 is the noiseless limit, reached long before (and the solver's fixed point turns nan)
    check_real("--alpha", alpha, min=0.0, min_open=True, max=1000.0)
    spectrum = power_law_target(gamma, d, readout, tokens, seed)
    s = Setting(kappa0=kappa0, noise=noise, tokens=tokens, lam=lam, beta=beta, beta0=beta0, target=spectrum)
    # a targeted solve takes a finer grid in w below λ̃ = 1e-2 and, for a fine target below λ̃ = 1e-3, more
    # label nodes (state_evolution's rtol; channel_nodes.target_nodes)
    grid = target_grid(s) if rtol is not None and tokens == 2 else None
    if rtol is not None:
        check_real("--rtol", rtol, min=0.0, max=1.0, min_open=True, max_open=True)
    if nodes is None:
        nodes = default_nodes(s) if rtol is None else target_nodes(s, rtol, grid)
    check_nodes(nodes, tokens)
    check_int("--scrambles", scrambles, min=1, max=64)
    # the refinement holds every scramble's nodes in one batch (a targeted solve's batches too)
    check_nodes(nodes * scrambles, tokens)
    target = {}
    if rtol is not None:
        from attnlab.highdim.se_target import (
            MIN_SCRAMBLES,
            TARGETED,
            bound_ratio,
            check_target,
            relative_errors,
        )

        if scrambles < 2:
            raise UsageError("--rtol", "--scrambles of at least 2 (the target adds refined scrambles)", rtol)
        if max_scrambles is not None:
            check_int("--max-scrambles", max_scrambles, min=max(scrambles, MIN_SCRAMBLES), max=4096)
        rtol, max_scrambles = check_target(rtol, max_scrambles, scrambles)
        target = {"rtol": rtol, "max_scrambles": max_scrambles}
    elif max_scrambles is not None:
        raise UsageError("--max-scrambles", "to come with --rtol", max_scrambles)
    what = "solving the state evolution"
    with TaskProgress(what, total=max_scrambles if rtol is not None else None, unit="scrambles") as bar:

        def shown(done: int, budget: int, ratio: float) -> None:
            bar.update(done=done, description=f"{what}: relative error bar {ratio:.2f}× its bound")

        fp = state_evolution(
            s,
            alpha,
            nodes=nodes,
            scrambles=scrambles,
            starts="auto" if multi_start else None,
            progress=shown if rtol is not None else None,
            fold=fold,
            **target,
        )
    rule, used = layout(s, nodes, grid=grid)
    out = {
        "test_error": fp.test_error,
        "train_loss": fp.train_loss,
        "q": fp.q,
        "m": fp.m,
        "sigma": fp.sigma,
        "q_hat": fp.q_hat,
        "m_hat": fp.m_hat,
        "sigma_hat": fp.sigma_hat,
        "rank_fraction": fp.rank_fraction,
        "s_error": fp.s_error,
        "iterations": fp.iterations,
        "converged": fp.converged,
        "alpha": alpha,
        "lam_tilde": lam,
        "scrambles": fp.scrambles,
        "nodes_per_scramble": used,
        "rule": rule,
    }
    if out["rule"] == "product":  # the n of its n × n grid in w
        out["grid"] = check_grid(grid, s)
    if fp.stderr is not None:
        out["stderr"] = dict(fp.stderr)
    out["folded"] = fold if fold is not None else tokens == 2  # whether the label nodes were folded
    if rtol is not None:
        out["rtol"] = rtol
        out["max_scrambles"] = max_scrambles
        out["accuracy_met"] = fp.accuracy_met
        if not fp.accuracy_met:
            values = {k: getattr(fp, k) for k in TARGETED}
            rels = relative_errors(values, fp.stderr)  # infinite for a zero with an error bar
            worst = max(rels, key=rels.get)
            rel = rels[worst]
            why = "" if fp.converged else "the point is not converged; "
            more = ""
            ratio = bound_ratio(values, fp.stderr, fp.scrambles, rtol)
            # the budget ran out on a converged point: what would meet the target (not where a targeted
            # quantity is zero with an error bar, whose ratio is infinite)
            if fp.converged and fp.scrambles >= max_scrambles and math.isfinite(ratio):
                # the standard error falls like R^(-1/2) in the scrambles and about like N^(-0.8 ... -1.1) in
                # a scramble's label nodes (docs/se-accuracy.md), so more nodes per scramble cost less
                more = (
                    f", {ratio:.2g} times its bound: about {math.ceil(fp.scrambles * ratio**2)} scrambles "
                    f"would meet it (--max-scrambles), or fewer with more nodes per scramble (--nodes "
                    f"{4 * out['nodes_per_scramble']}, four times these)"
                )
            err_console.print(
                f"note: accuracy target rtol = {rtol:g} not met after {fp.scrambles} scrambles (budget "
                f"{max_scrambles}); {why}the largest relative standard error is {rel:.2g} ({worst}){more}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    if multi_start:
        out["stable"] = fp.stable
        out["candidates"] = len(fp.candidates)
    err = dict(fp.stderr or {})
    if spectrum is not None:
        from attnlab.highdim import top_share

        out.update(target="power-law", gamma=gamma, d=d, top_share=top_share(spectrum))
        if readout:
            out.update(law_readout(s, fp, seed))
            err["e0_exact"] = out["e0_exact_stderr"]
    if json_out:
        emit_json(out)
    else:
        shown = {k: v for k, v in out.items() if k not in ("stderr", "readout", "e0_exact_stderr")}
        if "readout" in out:
            r = out["readout"]
            for k in ("exact", "gaussian", "ratio"):
                shown[f"readout_{k}"] = r[k]
                if f"{k}_stderr" in r:
                    err[f"readout_{k}"] = r[f"{k}_stderr"]
        _show("state evolution", shown, err)


def _sweep_start(i: int, fp, cold: bool) -> str:
    """Where a sweep's solve began: ``"neighbour"`` (warm from the previous point's fixed point) or
    ``"default"`` (the default start: the first point, ``--cold``, or a warm start that ended unconverged
    and was solved again from the default start, ``FixedPoint.start``)."""
    return "default" if cold or i == 0 or fp.start == "default" else "neighbour"


@app.command()
def sweep(
    alphas: str = typer.Option(..., "--alphas", help="Comma-separated α = n/d², solved in this order."),
    kappa0: float = K0,
    noise: float = NOISE,
    tokens: int = TOK,
    lam: float = LAM,
    beta: float = BETA,
    beta0: float = BETA0,
    nodes: int = typer.Option(4096, "--nodes", help="Quasi-random nodes of the output expectation."),
    tol: float = typer.Option(1e-6, "--tol", help="Relative accuracy of each fixed point."),
    cold: bool = typer.Option(
        False, "--cold", help="Start every point from the default start (no continuation)."
    ),
    gamma: float | None = typer.Option(
        None,
        "--gamma",
        help="A power-law target instead of Marchenko–Pastur: eigenvalues s_i ∝ i^(−γ), i = 1 … --d, "
        "normalised to Tr S0²/d = 1 (docs/highdim.md C6; --kappa0 is then unused).",
    ),
    d: int | None = typer.Option(None, "--d", help="With --gamma: the target's dimension d."),
    json_out: bool = JsonOpt,
) -> None:
    """State evolution along α with continuation: each point starts from its neighbour's fixed point."""
    from attnlab.core.validation import check_real
    from attnlab.highdim import Setting
    from attnlab.highdim import sweep as se_sweep

    check_setting(kappa0, noise, tokens, lam, beta, beta0)
    check_nodes(nodes, tokens)
    check_real("--tol", tol, min=0.0, min_open=True, max=0.1)
    try:
        grid = [float(a) for a in alphas.split(",")]
    except ValueError:
        raise UsageError("--alphas", "comma-separated numbers", alphas) from None
    for a in grid:
        check_real("--alphas", a, min=0.0, min_open=True)
    if not 1 <= len(grid) <= 1000:
        raise UsageError("--alphas", "between 1 and 1000 values", len(grid))
    spectrum = power_law_target(gamma, d, False, tokens, 0)
    s = Setting(kappa0=kappa0, noise=noise, tokens=tokens, lam=lam, beta=beta, beta0=beta0, target=spectrum)
    with TaskProgress(f"solving the state evolution at {len(grid)} α"):
        fps = se_sweep(s, grid, nodes=nodes, tol=tol, warm=not cold)
    keys = ("alpha", "test_error", "train_loss", "q", "m", "sigma", "rank_fraction")
    keys += ("iterations", "converged")
    rows = [
        {k: getattr(fp, k) for k in keys} | {"start": _sweep_start(i, fp, cold)} for i, fp in enumerate(fps)
    ]
    keys += ("start",)
    total = sum(fp.iterations for fp in fps)
    head = {"lam_tilde": lam, "continuation": not cold, "map_evaluations": total}
    if spectrum is not None:
        from attnlab.highdim import top_share

        head.update(target="power-law", gamma=gamma, d=d, top_share=top_share(spectrum))
    if json_out:
        emit_json(head | {"points": rows})
        return
    how = "from the default start" if cold else "with continuation"
    what = f", power-law target γ = {gamma:g}, d = {d}" if spectrum is not None else ""
    t = Table(title=f"state evolution, λ̃ = {lam:g}{what}, {how}: {total} map evaluations")
    for k in keys:
        t.add_column(k, justify="right")
    for r in rows:
        t.add_row(*(f"{v:.6g}" if isinstance(v, float) else str(v) for v in r.values()))
    out_console.print(t)


@app.command()
def thresholds(
    kappa0: float = K0,
    noise: float = NOISE,
    tokens: int = TOK,
    json_out: bool = JsonOpt,
) -> None:
    """Interpolation threshold at Δ and perfect-recovery thresholds (always at Δ = 0)."""
    from attnlab.highdim import thresholds as th
    from attnlab.highdim.spectra import MarchenkoPastur
    from attnlab.highdim.thresholds import NOISE_FLOOR

    check_setting(kappa0, noise, tokens, 0.0)
    floor = NOISE_FLOOR * MarchenkoPastur(kappa0).q0
    if 0 < noise < floor:  # the interpolation threshold is not resolved there (thresholds.NOISE_FLOOR)
        raise UsageError(
            "--noise",
            f"0 (the noiseless limit) or a label noise of at least {floor:.3g} ({NOISE_FLOOR:g}·Q0, below "
            "which the interpolation threshold is not resolved)",
            noise,
        )
    with TaskProgress("solving for the thresholds"):
        out = th(kappa0, noise, tokens).to_dict()
    if noise == 0:
        out["note"] = "alpha_interp needs Δ > 0 (it tends to (1 + 2κ0 − κ0²)/4 / ((T²+T−2)/2) as Δ → 0+)"
    if json_out:
        emit_json(out)
    else:
        _show("thresholds", out)


@app.command()
def train(
    d: int = typer.Option(100, "--d", help="Token dimension d."),
    alpha: float = typer.Option(0.5, "--alpha", help="α = n/d² (n = round(α d²) training sequences)."),
    kappa0: float = K0,
    noise: float = NOISE,
    tokens: int = TOK,
    lam: float = LAM,
    task: str = typer.Option("seq2lab", "--task", help="seq2lab | seq2seq."),
    kappa: float = typer.Option(1.0, "--kappa", help="Student width κ = p/d."),
    unfactorised: bool = typer.Option(False, "--unfactorised", help="Train S directly (Frobenius penalty)."),
    max_steps: int = typer.Option(3000, "--max-steps", help="Adam step cap."),
    seed: int = typer.Option(0, "--seed", help="Seed of data and initialisation."),
    device: str = typer.Option(
        "cpu",
        "--device",
        help="cpu | cuda | cuda:N: where labels, Adam and the eigenvalues are computed (the random "
        "draws are the same CPU ones everywhere).",
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Train the student by full-batch Adam (lr 0.1, float64 loss, relative tolerance)."""
    from attnlab.highdim import TrainConfig, simulate

    check_setting(kappa0, noise, tokens, lam)
    check_training(d, alpha, tokens, task, kappa, max_steps, seed)
    device = check_device(device)
    cfg = TrainConfig(max_steps=max_steps)
    with TaskProgress("drawing data", total=max_steps) as bar:

        def cb(step: int, loss: float) -> None:
            bar.update(done=step, description=f"Adam loss/d²={loss:.5f}")

        r = simulate(
            d,
            alpha,
            kappa0=kappa0,
            noise=noise,
            tokens=tokens,
            lam=lam,
            kappa=kappa,
            task=task,
            factorised=not unfactorised,
            seed=seed,
            config=cfg,
            progress=cb,
            device=device,
        )
    out = r.to_dict() | {"d": d, "alpha": alpha, "lam_tilde": lam, "device": str(r.S.device)}
    if json_out:
        emit_json(out)
    else:
        _show("Adam", out)


@app.command()
def spectrum(
    d: int = typer.Option(200, "--d", help="Token dimension d."),
    alpha: float = typer.Option(0.5, "--alpha", help="α = n/d²."),
    kappa0: float = K0,
    noise: float = NOISE,
    tokens: int = TOK,
    lam: float = LAM,
    seed: int = typer.Option(0, "--seed", help="Seed."),
    nodes: int = typer.Option(4096, "--nodes", help="Quasi-random nodes of the state evolution."),
    max_steps: int = typer.Option(3000, "--max-steps", help="Adam step cap."),
    out: Path = typer.Option(
        Path("highdim_spectrum.png"),
        "--out",
        help="Figure path (.png; an .svg beside); a folder gets highdim_spectrum.png inside it.",
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Predicted spectrum of the learned S (docs/highdim.md C4) against Adam's, written as a figure."""
    check_setting(kappa0, noise, tokens, lam)
    check_training(d, alpha, tokens, "seq2lab", 1.0, max_steps, seed)
    check_nodes(nodes, tokens)
    out = check_out_file("--out", out, (".png",), folder_name="highdim_spectrum.png")
    svg = out.with_suffix(".svg")
    if svg.is_dir():
        raise UsageError("--out", f"a path whose .svg twin is not a folder ({svg})", str(out))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from attnlab.highdim import Setting, TrainConfig, predicted_spectrum, simulate, state_evolution

    s = Setting(kappa0=kappa0, noise=noise, tokens=tokens, lam=lam)
    with TaskProgress("state evolution (theory side)"):
        fp = state_evolution(s, alpha, nodes=nodes)
        ps = predicted_spectrum(s, fp)
    cfg = TrainConfig(max_steps=max_steps)
    with TaskProgress("drawing data", total=max_steps) as bar:
        r = simulate(
            d,
            alpha,
            kappa0=kappa0,
            noise=noise,
            tokens=tokens,
            lam=lam,
            seed=seed,
            config=cfg,
            progress=lambda step, loss: bar.update(done=step, description=f"Adam loss/d²={loss:.5f}"),
        )
    ev = r.eigenvalues
    nz = ev[ev > 1e-3]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.hist(nz, bins=40, density=True, alpha=0.5, label=f"Adam, d={d} (non-zero part)")
    ax.plot(ps.x, ps.density, "r-", label="theory η·ReLU(S0 + δZ − ε)")
    ax.set_xlabel("eigenvalue of Ŝ (dimensionless)")
    ax.set_ylabel("density of the non-zero part (per unit eigenvalue)")
    ax.set_title(f"atom at 0: theory {ps.atom:.3f}, Adam {1 - nz.size / ev.size:.3f}")
    ax.legend(fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    fig.savefig(svg)
    plt.close(fig)
    res = {
        "figure": str(out),
        "atom_theory": ps.atom,
        "atom_sim": float(1 - nz.size / ev.size),
        "rank_fraction": ps.rank_fraction,
        "max_eigenvalue_theory": float(np.max(ps.x)) if ps.x.size else 0.0,
        "max_eigenvalue_sim": float(ev.max()),
    }
    if json_out:
        emit_json(res)
    else:
        _show("spectrum", res)
