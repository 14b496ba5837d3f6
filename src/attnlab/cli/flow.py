"""``attnlab flow``: multi-head self-attention dynamics on the sphere (THEORY.md B).

Commands: ``beta-star`` (closed form of THEORY.md B4), ``equiangular`` (B5) and ``simulate``
(a batch of trajectories, with energy and cluster statistics).
"""

from __future__ import annotations

import math
from pathlib import Path

import typer

from attnlab.cli.common import JsonOpt, UsageError, emit_json, err_console, out_console

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
    from attnlab.dynamics import theory

    b = theory.beta_star(heads, n, strength)
    out = b.to_dict()
    if not out["note"]:
        out.pop("note")
    if json_out:
        emit_json(out)
    else:
        _table("beta* (THEORY.md B4)", {k: ("inf" if v is None else v) for k, v in out.items()})


def _parse_strengths(text: str) -> list[float]:
    try:
        vals = [float(s) for s in text.split(",") if s.strip()]
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
    from attnlab.dynamics import theory

    lam = _parse_strengths(strengths)
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
        _table("equiangular regime (THEORY.md B5)", out)


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
    device: str = typer.Option("cpu", "--device", help="cpu | cuda."),
    seed: int = typer.Option(0, "--seed", help="Seed of the heads and the initial tokens."),
    records: int = typer.Option(
        20, "--records", help="Number of recorded times (energy monotonicity is checked there)."
    ),
    figure: Path | None = typer.Option(
        None, "--figure", help="Write a PNG of energy and cluster fraction over time."
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Simulate a batch: random symmetric M_h with V_h = M_h, tokens uniform on the sphere."""
    import torch

    from attnlab.core.seeding import derive_seed, generator
    from attnlab.core.validation import check_choice, check_int, check_real
    from attnlab.dynamics import Heads, Record, init, simulate

    check_choice("--dtype", dtype, ("float64", "float32"))
    check_choice("--device", device, ("cpu", "cuda"))
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device", "an available CUDA device", device)
    check_real("--time", time, min=0.0, min_open=True)
    check_real("--beta", beta, min=0.0)
    records = check_int("--records", records, min=1)
    tdtype = torch.float64 if dtype == "float64" else torch.float32
    spec = Heads.random_symmetric(
        check_int("--heads", heads, min=1),
        check_int("--d", d, min=1),
        generator=generator(derive_seed(seed, "heads")),
        kind=check_choice("--kind", kind, ("usa", "softmax", "relu")),
        combine=combine,
    )
    x0 = init.uniform(
        batch=check_int("--batch", batch, min=1),
        n=check_int("--n", n, min=2),
        d=d,
        seed=derive_seed(seed, "tokens"),
        dtype=tdtype,
        device=device,
    )
    obs = ("energy", "clusters") if beta > 0 else ("clusters",)
    sol = simulate(
        spec,
        x0,
        beta=beta,
        t1=time,
        method=method,
        dt=dt,
        space=space,
        record=Record(every=time / records, observables=obs),
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
        # non-decreasing to relative 1e-12: log E_{k+1} >= log E_k - 1e-12
        out["energy_monotone"] = bool(((le[1:] - le[:-1]) >= -1e-12).all())
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
        fig.savefig(figure)
        out["figure"] = str(figure)
        err_console.print(f"figure written to {figure}")
    if json_out:
        emit_json(out)
    else:
        _table("simulation", out)
