"""``attnlab flow``: multi-head self-attention dynamics on the sphere (docs/flow.md).

Commands: ``beta-star`` (closed form of docs/flow.md B4), ``equiangular`` (B5) and ``simulate``
(a batch of trajectories, with energy and cluster statistics). Every option is checked before any
work starts, including the number of steps (``--max-steps``) and the memory a batch needs.
"""

from __future__ import annotations

import math
from pathlib import Path

import typer

from attnlab.cli.common import (
    JsonOpt,
    TaskProgress,
    UsageError,
    check_device,
    check_memory,
    check_out_file,
    check_seed,
    emit_json,
    err_console,
    largest_factor,
    out_console,
)

#: Figure formats ``--figure`` accepts (matplotlib writes each from the suffix).
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
#: ``e^{βλ}`` must stay within float64 range (e^709.8 overflows): ``β · max λ_h`` is capped here.
BETA_LAMBDA_MAX = 700.0

app = typer.Typer(help="Multi-head self-attention dynamics on the sphere (paper B).", no_args_is_help=True)


def _table(title: str, rows: dict) -> None:
    from rich.table import Table

    t = Table(title=title)
    t.add_column("quantity")
    t.add_column("value")
    for k, v in rows.items():
        if isinstance(v, float):
            v = f"{v:.6g}"
        t.add_row(k, str(v))
    out_console.print(t)


@app.command("beta-star")
def beta_star_cmd(
    heads: int = typer.Option(..., "--heads", help="Number of identical scalar heads H >= 1."),
    n: int = typer.Option(..., "--n", help="Number of pairwise orthogonal tokens n >= 2."),
    strength: float = typer.Option(1.0, "--strength", help="Head strength λ > 0 (M_h = λ I)."),
    json_out: bool = JsonOpt,
) -> None:
    """Critical inverse temperature β* of radial dominance (form 3) and the form-2 threshold."""
    from attnlab.core.validation import check_int, check_real
    from attnlab.dynamics import theory

    check_int("--heads", heads, min=1, max=10**7)  # beyond, log terms of β* lose float64 precision
    check_int("--n", n, min=2, max=10**12)
    check_real("--strength", strength, min=0.0, min_open=True)
    b = theory.beta_star(heads, n, strength)
    out = b.to_dict()
    if not out["note"]:
        out.pop("note")
    if json_out:
        emit_json(out)
    else:
        _table("beta* (docs/flow.md B4)", {k: ("inf" if v is None else v) for k, v in out.items()})


def _parse_strengths(text: str) -> list[float]:
    try:
        vals = [float(s) for s in text.split(",")]  # an empty item ("1,,2") is refused, not skipped
    except ValueError:
        raise UsageError("--strengths", "comma-separated positive numbers", text) from None
    if not vals or any(not math.isfinite(v) or v <= 0 for v in vals):
        raise UsageError("--strengths", "comma-separated positive numbers", text)
    return vals


@app.command("equiangular")
def equiangular_cmd(
    n: int = typer.Option(..., "--n", help="Number of tokens n >= 2."),
    beta: float = typer.Option(..., "--beta", help="Inverse temperature β >= 0."),
    strengths: str = typer.Option(
        ..., "--strengths", help="Head strengths λ_h, comma-separated (e.g. 1,0.5)."
    ),
    target: float = typer.Option(0.999, "--target", help="Target γ in (0, 1) for t_star."),
    scale: str = typer.Option("1", "--scale", help="Velocity scale: 1, or 1/n (divides rates by n)."),
    json_out: bool = JsonOpt,
) -> None:
    """Equiangular regime with scalar softmax heads: t_star (γ from 0 to target), early and late rates."""
    from attnlab.core.validation import check_choice, check_int, check_real
    from attnlab.dynamics import theory

    check_int("--n", n, min=2)
    check_real("--beta", beta, min=0.0)
    check_real("--target", target, min=0.0, max=1.0, min_open=True, max_open=True)
    check_choice("--scale", scale, ("1", "1/n"))
    lam = _parse_strengths(strengths)
    if beta * max(lam) > BETA_LAMBDA_MAX:
        raise UsageError(
            "--beta",
            f"β · max λ_h <= {BETA_LAMBDA_MAX:g} (e^(βλ) must stay in float64 range; "
            f"here β · max λ_h = {beta * max(lam):.3g})",
            beta,
        )
    out = {
        "n": n,
        "beta": beta,
        "strengths": lam,
        "target": target,
        "scale": scale,
        "t_star": theory.equiangular_time(lam, beta, n, target=target, scale=scale),
        "early_rate": theory.early_rate(lam, beta, n, scale=scale),
        "late_rate": theory.late_rate(lam, n=n, scale=scale),
        "lambda_c": theory.lambda_c(beta, n) if beta > 0 else None,
    }
    if json_out:
        emit_json(out)
    else:
        _table("equiangular regime (docs/flow.md B5)", out)


@app.command("simulate")
def simulate_cmd(
    n: int = typer.Option(..., "--n", help="Tokens per sequence."),
    d: int = typer.Option(..., "--d", help="Token dimension."),
    heads: int = typer.Option(..., "--heads", help="Number of heads H."),
    beta: float = typer.Option(..., "--beta", help="Inverse temperature β >= 0."),
    kind: str = typer.Option("usa", "--kind", help="usa | softmax | relu."),
    time: float = typer.Option(..., "--time", help="Final time T > 0."),
    batch: int = typer.Option(16, "--batch", help="Independent initialisations."),
    method: str = typer.Option("rk4", "--method", help="rk4 | euler | adaptive."),
    dt: float = typer.Option(0.05, "--dt", help="Step (fixed-step methods; first step of adaptive)."),
    space: str = typer.Option("sphere", "--space", help="sphere | flat."),
    combine: str = typer.Option("sum", "--combine", help="sum | mean over heads."),
    dtype: str = typer.Option("float64", "--dtype", help="float64 | float32."),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda | cuda:N."),
    seed: int = typer.Option(0, "--seed", help="Seed of the heads and the initial tokens."),
    records: int = typer.Option(
        20, "--records", help="Number of recorded times (energy monotonicity is checked there)."
    ),
    max_steps: int = typer.Option(
        1_000_000,
        "--max-steps",
        help="Step cap: a fixed-step run needing more steps (T/dt) is refused before it starts; "
        "an adaptive run stops with an error when it reaches the cap.",
    ),
    figure: Path | None = typer.Option(
        None, "--figure", help="Write a figure of energy and cluster fraction over time (.png, .svg, .pdf)."
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Simulate a batch: random symmetric M_h with V_h = M_h, tokens uniform on the sphere."""
    import torch

    from attnlab.core.seeding import derive_seed, generator
    from attnlab.core.validation import check_choice, check_int, check_real
    from attnlab.dynamics import METHODS, Heads, Record, init, simulate
    from attnlab.dynamics.field import SCORE_BLOCK_BYTES

    n = check_int("--n", n, min=2)
    d = check_int("--d", d, min=1)
    heads = check_int("--heads", heads, min=1)
    batch = check_int("--batch", batch, min=1)
    beta = check_real("--beta", beta, min=0.0)
    time = check_real("--time", time, min=0.0, min_open=True)
    dt = check_real("--dt", dt, min=0.0, min_open=True)
    records = check_int("--records", records, min=1)
    max_steps = check_int("--max-steps", max_steps, min=1)
    check_choice("--kind", kind, ("usa", "softmax", "relu"))
    check_choice("--method", method, METHODS)
    check_choice("--space", space, ("sphere", "flat"))
    check_choice("--combine", combine, ("sum", "mean"))
    check_choice("--dtype", dtype, ("float64", "float32"))
    device = check_device(device)
    seed = check_seed(seed)
    if figure is not None:
        figure = check_out_file("--figure", figure, FIGURE_SUFFIXES)
    nsteps = max(1, math.ceil(time / dt - 1e-9)) if method != "adaptive" else None
    if nsteps is not None and nsteps > max_steps:
        raise UsageError(
            "--dt",
            f"at most --max-steps {max_steps} steps over --time {time:g} (T/dt = {time / dt:.3g} steps; "
            "raise --dt or --max-steps)",
            dt,
        )
    item = 8 if dtype == "float64" else 4
    # tokens with the RK4/Dormand–Prince stages (~10 copies of (B, n, d)), heads (2 H d²), one block of scores
    need = item * (10 * batch * n * d + 2 * heads * d * d) + SCORE_BLOCK_BYTES
    blamed, value = largest_factor(
        ("--batch", batch, 16), ("--n", n, 32), ("--d", d, 8), ("--heads", heads, 4)
    )
    check_memory(blamed, value, need, "tokens, stages and heads")
    tdtype = torch.float64 if dtype == "float64" else torch.float32
    spec = Heads.random_symmetric(
        heads, d, generator=generator(derive_seed(seed, "heads")), kind=kind, combine=combine
    )
    x0 = init.uniform(batch=batch, n=n, d=d, seed=derive_seed(seed, "tokens"), dtype=tdtype, device=device)
    obs = ("energy", "clusters") if beta > 0 else ("clusters",)
    sol = _simulate_in_segments(
        simulate, spec, x0, beta, time, method, dt, space, Record(observables=obs), records, nsteps, max_steps
    )
    cf = sol.observables["cluster_fraction"]  # (T, B)
    out: dict = {
        "n": n,
        "d": d,
        "heads": heads,
        "beta": beta,
        "kind": kind,
        "time": time,
        "batch": batch,
        "method": method,
        "space": space,
        "combine": combine,
        "dtype": dtype,
        "velocity_scale": "1 (v_i = sum_h f_i^h)" if combine == "sum" else "1/H",
        "steps": sol.steps,
        "evaluations": sol.evaluations,
        "cluster_fraction": float(cf[-1].mean()),
    }
    if "log_energy_total" in sol.observables:
        le = sol.observables["log_energy_total"].double()  # (T, B)
        out["energy_start"] = float(le[0].exp().mean())
        out["energy_end"] = float(le[-1].exp().mean())
        out["log_energy_start"] = float(le[0].mean())
        out["log_energy_end"] = float(le[-1].mean())
        from attnlab.dynamics import energy_monotone  # non-decreasing to relative 1e-12

        out["energy_monotone"] = energy_monotone(le, rtol=1e-12)
    else:
        out.update(
            energy_start=None,
            energy_end=None,
            energy_monotone=None,
            note="energy undefined at beta = 0 (E_h has 1/beta)",
        )
    if figure is not None:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(9, 3.5), constrained_layout=True)
        a, b = fig.subplots(1, 2)
        t = sol.t.numpy()
        if "log_energy_total" in sol.observables:
            a.plot(t, sol.observables["log_energy_total"].double().numpy(), lw=0.8)
        a.set(xlabel="time t (model units)", ylabel="log E_multi (log energy units)", title="total energy")
        b.plot(t, cf.double().numpy(), lw=0.8)
        b.set(
            xlabel="time t (model units)", ylabel="fraction of pairs with <x_i,x_j> > 0.999", title="clusters"
        )
        figure.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(figure)
        out["figure"] = str(figure)
        err_console.print(f"figure written to {figure}")
    if json_out:
        emit_json(out)
    else:
        _table("simulation", out)


def _simulate_in_segments(simulate, spec, x0, beta, time, method, dt, space, record, records, nsteps, cap):
    """Integrate over ``records`` consecutive segments (one recorded time each), with progress.

    Fixed-step methods keep one step ``h = T/nsteps`` throughout, so the trajectory is the one a single
    call would compute; the adaptive method restarts its step control at each recorded time.
    """
    import torch

    from attnlab.dynamics import Solution

    fixed = nsteps is not None
    segments = min(records, nsteps) if fixed else records
    h = time / nsteps if fixed else None
    bounds = [round(k * nsteps / segments) for k in range(segments + 1)] if fixed else None
    x, t_now, sols, used = x0, 0.0, [], 0
    total = nsteps if fixed else time
    with TaskProgress(
        f"{method} steps" if fixed else "time", total=total, unit="steps" if fixed else "t"
    ) as bar:
        for k in range(segments):
            if fixed:
                seg_steps = bounds[k + 1] - bounds[k]
                length, step = seg_steps * h, h
            else:
                length, step = time / segments, dt
            try:
                sol = simulate(
                    spec,
                    x,
                    beta=beta,
                    t1=length,
                    method=method,
                    dt=step,
                    space=space,
                    record=record,
                    max_steps=max(1, cap - used),
                )
            except ValueError as e:
                if not str(e).startswith("max_steps"):
                    raise
                raise UsageError(
                    "--max-steps",
                    f"enough steps to reach --time {time:g} (the cap was hit near t = {t_now:.4g})",
                    cap,
                ) from None
            used += sol.steps + sol.rejected
            sols.append(sol)
            x, t_now = sol.x, t_now + length
            bar.update(done=bounds[k + 1] if fixed else t_now)
    obs = {
        key: torch.cat([sols[0].observables[key][:1]] + [s.observables[key][-1:] for s in sols])
        for key in sols[0].observables
    }
    times = torch.cumsum(torch.tensor([0.0] + [float(s.t[-1]) for s in sols], dtype=torch.float64), 0)
    return Solution(
        t=times,
        x=x,
        observables=obs,
        steps=sum(s.steps for s in sols),
        rejected=sum(s.rejected for s in sols),
        evaluations=sum(s.evaluations for s in sols),
        method=method,
        space=sols[0].space,
    )
