"""Figures of the paper-A claims (``ensemble.*``), drawn from stored rows only.

Rows include control rows (``row.control`` non-empty); a figure shows the test setting and, where the
claim has controls, the controls beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from attnlab.engine.protocol import Row
from attnlab.report.figures import new_figure

__all__ = ["FIGURES"]

_NW_TOL = 1e-12  # the identity claims' tolerance, drawn as a reference line


def _ok(rows: Sequence[Row], control: str | None = "") -> list[Row]:
    return [r for r in rows if r.ok and (control is None or r.control == control)]


def _setting_label(setting: Sequence[Any]) -> str:
    d, H, d_k, target, noise, n, c = setting
    return f"{target}, d={d}, H={H}, d_k={d_k}, σ={noise}, N={n}, c={c}"


def nw_identity(rows: Sequence[Row]) -> dict[str, Any]:
    ok = _ok(rows)
    fig, axes = new_figure(1, 1, 6, 3.6)
    ax = axes[0][0]
    for s in sorted({tuple(r.params["shape"]) for r in ok}):
        sel = sorted((r for r in ok if tuple(r.params["shape"]) == s), key=lambda r: r.params["beta"])
        ax.plot(
            [r.params["beta"] for r in sel],
            [max(r.metrics["rel_diff"], 1e-18) for r in sel],
            "o-",
            label="N={}, d={}, d_k={}, d_v={}, B={}".format(*s),
        )
    ax.axhline(_NW_TOL, color="k", ls="--", lw=1, label="tolerance 1e-12")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("inverse temperature β (scale β/√d_k)")
    ax.set_ylabel("‖NW − SDPA‖ / ‖SDPA‖ (relative, float64)")
    ax.set_title("One head = Nadaraya–Watson estimator")
    ax.legend(fontsize=6, loc="upper left")
    return {"nw_identity": fig}


def decomposition(rows: Sequence[Row]) -> dict[str, Any]:
    ok = _ok(rows)
    fig, axes = new_figure(1, 2, 5, 3.8)
    ax, bx = axes[0]
    labels = [
        "{}{} {} {} {} N={}".format(c[0], "" if c[1] is None else f"({c[1]}°)", *c[2:])
        for c in (r.params["config"] for r in ok)
    ]
    x = np.arange(len(ok))
    b2 = np.array([r.metrics["bias2"] for r in ok])
    va = np.array([r.metrics["variance"] for r in ok])
    co = np.array([r.metrics["covariance"] for r in ok])
    ax.bar(x, b2, label="bias² (Σαb)²")
    ax.bar(x, va, bottom=b2, label="variance Σα²V")
    ax.bar(x, co, bottom=b2 + va, label="covariance Σαα'C")
    ax.plot(x, [r.metrics["mse"] for r in ok], "k_", ms=18, mew=2, label="MSE (direct)")
    ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=6)
    ax.set_ylabel("integrated MSE (squared target units)")
    ax.set_title("Three terms vs direct MSE")
    ax.legend(fontsize=7)
    bx.semilogy(x, [max(r.metrics["rel_err"], 1e-18) for r in ok], "o")
    bx.axhline(_NW_TOL, color="k", ls="--", lw=1, label="tolerance")
    bx.set_xticks(x, labels, rotation=30, ha="right", fontsize=6)
    bx.set_ylabel("max over queries |terms − MSE|/MSE")
    bx.set_title("Identity error (float64)")
    bx.legend(fontsize=7)
    return {"decomposition": fig}


def variance_needs_decorrelation(rows: Sequence[Row]) -> dict[str, Any]:
    ok = _ok(rows)
    fig, axes = new_figure(1, 2, 5, 3.8)
    ax, bx = axes[0]
    for r in ok:
        lab = _setting_label(r.params["setting"]) + f", rep {r.params['rep']}"
        ax.plot(r.arrays["mean_corr"], r.arrays["ratio"], "o-", ms=3, label=lab)
        line = bx.plot(r.arrays["angle_deg"], r.arrays["var_part"], "o-", ms=3)[0]
        if "closed_form_by_angle" in r.metrics:  # V(q)(ρ(q) + (1−ρ(q))/H) per query, integrated
            bx.plot(
                r.arrays["angle_deg"], r.metrics["closed_form_by_angle"], ":", color=line.get_color(), lw=1
            )
    rho = np.linspace(0, 1, 50)
    for H in sorted({int(r.params["setting"][1]) for r in ok}):
        ax.plot(rho, rho + (1 - rho) / H, "k--", lw=1, label=f"closed form ρ+(1−ρ)/H, H={H}")
    ax.set_xlabel("mean head correlation ρ̄ (dimensionless)")
    ax.set_ylabel("variance part / mean head variance")
    ax.set_title("Variance reduction needs decorrelation")
    ax.legend(fontsize=5)
    bx.set_xlabel("pairwise principal angle φ (degrees)")
    bx.set_ylabel("variance + covariance terms (squared target units)")
    bx.set_title("Variance part vs head angle (dotted: the closed form per query)")
    return {"variance_vs_correlation": fig}


def hdi_monotone(rows: Sequence[Row]) -> dict[str, Any]:
    """Frame-mean MSE and variance part against HDI, test setting and controls side by side."""
    groups = [(c or "test", _ok(rows, c)) for c in sorted({r.control for r in rows if r.ok})]
    fig, axes = new_figure(1, max(1, len(groups)), 4.2, 3.6)
    for ax, (name, rs) in zip(axes[0], groups):
        hdi = np.mean([r.metrics["hdi"] for r in rs], axis=0)
        for key, lab in (("mse", "integrated MSE"), ("var_part", "variance part")):
            curves = np.array([r.metrics[key] for r in rs])  # (frames, angles)
            m, se = curves.mean(0), curves.std(0, ddof=1) / np.sqrt(len(rs)) if len(rs) > 1 else 0 * hdi
            ax.errorbar(hdi, m, yerr=2 * se, fmt="o-", ms=3, label=f"{lab} (mean of {len(rs)} frames ± 2 se)")
        ax.set_xlabel("HDI = sin²φ (subspace form, dimensionless)")
        ax.set_ylabel("squared target units")
        ax.set_title(f"{name}: target {rs[0].params.get('target', '?')}", fontsize=8)
        ax.legend(fontsize=6)
    return {"mse_vs_hdi": fig}


def decorrelation_optimal(rows: Sequence[Row]) -> dict[str, Any]:
    ok = _ok(rows)
    fig, axes = new_figure(1, 2, 5, 3.8)
    ax, bx = axes[0]
    for key, mk, lab in [
        ("init", "s", "random init"),
        ("plain", "o", "trained"),
        ("penalised", "^", "trained + penalty"),
    ]:
        ax.scatter(
            [r.metrics[f"hdi_{key}"] for r in ok],
            [r.metrics[f"test_mse_{key}"] for r in ok],
            marker=mk,
            label=lab,
        )
    ax.set_xlabel("HDI (subspace form, dimensionless)")
    ax.set_ylabel("test MSE on fresh inputs (squared target units)")
    ax.legend(fontsize=7)
    ax.set_title("Decorrelation and test error")
    for r in ok:
        bx.plot(r.arrays["val_plain"], "C1", lw=0.8)
        bx.plot(r.arrays["val_penalised"], "C2", lw=0.8)
    bx.set_xlabel("Adam step")
    bx.set_ylabel("validation ensemble MSE (squared target units)")
    bx.set_title("Validation MSE, early stopping (orange: plain, green: penalised)", fontsize=9)
    return {"decorrelation_training": fig}


def budget_law(rows: Sequence[Row]) -> dict[str, Any]:
    ok = _ok(rows)
    fig, axes = new_figure(1, 2, 5, 3.8)
    ax, bx = axes[0]
    keys = sorted({(r.params["D"], r.params["d"], r.params["c"]) for r in ok})
    for i, key in enumerate(keys):
        rs = [r for r in ok if (r.params["D"], r.params["d"], r.params["c"]) == key]
        ns = sorted({r.params["n"] for r in rs})
        mean_dk = [np.mean([r.metrics["dk_star"] for r in rs if r.params["n"] == n]) for n in ns]
        bx.plot(ns, mean_dk, "o-", color=f"C{i}", label=f"D={key[0]}, d={key[1]}, c={key[2]}")
        p = 2 / (4 + key[1])
        a = np.mean(np.log(mean_dk) - p * np.log(np.log(ns)))
        bx.plot(ns, np.exp(a) * np.log(ns) ** p, ":", color=f"C{i}", lw=1)
        for r in rs:
            if r.params["n"] in (ns[0], ns[-1]) and r.params["rep"] == 0:
                style = "o-" if r.params["n"] == ns[0] else "s--"
                lab = f"D={key[0]}, d={key[1]}, c={key[2]}, n={r.params['n']}"
                ax.plot(r.arrays["d_k"], r.arrays["mse"], style, color=f"C{i}", ms=3, label=lab)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("per-head dimension d_k (H = D/d_k)")
    ax.set_ylabel("integrated MSE (squared target units)")
    ax.legend(fontsize=5)
    ax.set_title("MSE across budget splits")
    for i, key in enumerate(keys):  # the power law n^a fitted to the same means, for comparison
        rs = [r for r in ok if (r.params["D"], r.params["d"], r.params["c"]) == key]
        ns = np.array(sorted({r.params["n"] for r in rs}), dtype=float)
        if len(ns) >= 2:
            mean_dk = [np.mean([r.metrics["dk_star"] for r in rs if r.params["n"] == n]) for n in ns]
            a, b = np.polyfit(np.log(ns), np.log(mean_dk), 1)
            bx.plot(ns, np.exp(b) * ns**a, "--", color=f"C{i}", lw=0.8, label=f"c={key[2]}: n^{a:.2f} fit")
    bx.set_xscale("log")
    bx.set_yscale("log", base=2)
    bx.set_xlabel("training-sample size n")
    bx.set_ylabel("optimal d_k* (continuous estimate)")
    bx.set_title("d_k*(n); dotted: (log n)^{2/(4+d)}, dashed: n^a", fontsize=9)
    bx.legend(fontsize=6)
    return {"budget_law": fig}


def weighting(rows: Sequence[Row]) -> dict[str, Any]:
    ok = _ok(rows)
    ns = sorted({r.params["n"] for r in ok})
    fig, axes = new_figure(1, 1, 6, 4)
    ax = axes[0][0]
    for s in ("uniform", "geometric", "fibonacci", "optimal"):
        ax.plot(
            ns,
            [np.mean([r.metrics[f"mse_{s}"] for r in ok if r.params["n"] == n]) for n in ns],
            "o-",
            label=s,
        )
    heads = np.array(
        [np.mean([r.metrics["mse_heads"] for r in ok if r.params["n"] == n], axis=0) for n in ns]
    )
    for h in range(heads.shape[1] if heads.ndim == 2 else 0):
        ax.plot(ns, heads[:, h], ":", color="gray", lw=1, label="single heads" if h == 0 else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training-sample size n")
    ax.set_ylabel("integrated MSE (squared target units)")
    ax.set_title("Weighting schemes on heads of different rates")
    ax.legend(fontsize=7)
    return {"weighting": fig}


def heads_linear_in_budget(rows: Sequence[Row]) -> dict[str, Any]:
    from attnlab.ensemble.budget import pooled_optimum

    fig, axes = new_figure(1, 1, 5, 3.6)
    ax = axes[0][0]
    for i, name in enumerate(sorted({r.control for r in rows if r.ok})):
        ok = [r for r in _ok(rows, name) if not r.cell]  # the test setting (knob cells not drawn)
        Ds = sorted({r.params["D"] for r in ok})
        for r in ok:
            ax.plot(r.params["D"], r.params["D"] / r.metrics["dk_star"], "o", color=f"C{i}", alpha=0.3, ms=3)
        hs = []
        for D in Ds:  # the verdict's H*: the optimum of the seed-pooled MSE curve
            rs = [r for r in ok if r.params["D"] == D]
            hs.append(D / pooled_optimum(rs[0].metrics["d_k"], [r.metrics["mse_by_split"] for r in rs])[0])
        ax.plot(Ds, hs, f"C{i}-", label=f"{name or 'test'}: H* = D/d_k* (seed-pooled MSE curve)")
        if Ds:
            ax.plot(Ds, np.array(Ds) * hs[-1] / Ds[-1], "--", color=f"C{i}", lw=1, label="linear in D")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("budget D = H·d_k")
    ax.set_ylabel("optimal number of heads H* (points: per seed)")
    ax.legend(fontsize=6)
    return {"heads_vs_budget": fig}


def many_small_heads(rows: Sequence[Row]) -> dict[str, Any]:
    """Mean MSE of every split at the largest n, per cell of the map (test, knob cells, control), with the
    same heads' large-sample limit dashed where the target has one."""
    fig, axes = new_figure(1, 1, 5.5, 3.8)
    ax = axes[0][0]
    ok = [r for r in rows if r.ok]
    groups = sorted({(r.control, r.cell) for r in ok})
    for i, (ctrl, cell) in enumerate(groups):
        rs = [r for r in ok if (r.control, r.cell) == (ctrl, cell)]
        top = max(r.params["n"] for r in rs)
        rs = [r for r in rs if r.params["n"] == top]
        dk = rs[0].metrics["d_k"]
        mse = np.mean([r.metrics["mse_by_split"] for r in rs], axis=0)
        name = ctrl or cell or "test"
        ax.plot(dk, mse, "o-", ms=3, color=f"C{i}", label=f"{name} (n={top})")
        lim = [r.metrics.get("mse_limit_by_split") for r in rs]
        if all(v is not None and None not in v for v in lim):
            ax.plot(dk, np.mean(np.array(lim, dtype=float), axis=0), "--", color=f"C{i}", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("per-head dimension d_k (H = D/d_k)")
    ax.set_ylabel("integrated MSE (squared target units)")
    ax.set_title("Mean over seeds at the largest n; dashed: the n → ∞ limit", fontsize=8)
    ax.legend(fontsize=5)
    return {"mse_by_split": fig}


def training_orthogonalises(rows: Sequence[Row]) -> dict[str, Any]:
    groups = sorted({r.control for r in rows if r.ok})
    fig, axes = new_figure(1, max(1, len(groups)), 4.2, 3.6)
    for ax, name in zip(axes[0], groups):
        rs = _ok(rows, name)
        for r in rs:
            col = "C0" if r.params["setting"][3] == "radial" else "C1"
            if "hdi_path" in r.arrays:  # the HDI at every checkpoint of the run
                ax.plot(r.arrays["path_steps"], r.arrays["hdi_path"], "-", color=col, lw=1, alpha=0.7)
            else:
                ax.plot([0, 1], [r.metrics["hdi_init"], r.metrics["hdi_trained"]], "o-", color=col, ms=3)
        if rs:
            m0, sd = rs[0].metrics["hdi_null"], rs[0].metrics.get("hdi_null_sd", 0.0)
            ax.axhline(m0, color="k", ls=":", lw=1)
            ax.axhspan(m0 - 2 * sd, m0 + 2 * sd, color="0.85", zorder=0)
        ax.set_xlabel("Adam steps")
        ax.set_ylabel("HDI (subspace form); grey: random-subspace null ± 2 sd")
        ax.set_title(f"{name or 'test'} (blue radial, orange bump)", fontsize=8)
    return {"hdi_training": fig}


def single_head_smoother(rows: Sequence[Row]) -> dict[str, Any]:
    ok = _ok(rows)
    fig, axes = new_figure(1, 1, 5, 3.6)
    ax = axes[0][0]
    for i, c in enumerate(sorted({r.params["c"] for r in ok})):
        rs = [r for r in ok if r.params["c"] == c]
        ax.plot(
            [r.metrics["n_h"] for r in rs],
            [r.metrics["variance"] for r in rs],
            "o",
            color=f"C{i}",
            label=f"c={c}",
        )
    for i, c in enumerate(sorted({r.params["c"] for r in _ok(rows, "dot-kernel")})):
        rs = [r for r in _ok(rows, "dot-kernel") if r.params["c"] == c]
        ax.plot(
            [r.metrics["n_h"] for r in rs],
            [r.metrics["variance"] for r in rs],
            "x",
            color=f"C{i}",
            label=f"c={c}, dot-product kernel (control)",
        )
    if ok:
        x = np.array(sorted(r.metrics["n_h"] for r in ok))
        v0 = np.exp(np.mean([np.log(r.metrics["variance"] * r.metrics["n_h"]) for r in ok]))
        ax.plot(x, v0 / x, "k--", lw=1, label="NW rate ∝ 1/(n h^d_k)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n·h^{d_k} (points per kernel volume)")
    ax.set_ylabel("integrated variance (squared target units)")
    ax.legend(fontsize=7)
    return {"single_head_variance": fig}


FIGURES = {
    "ensemble.nw-identity": nw_identity,
    "ensemble.decomposition": decomposition,
    "ensemble.variance-needs-decorrelation": variance_needs_decorrelation,
    "ensemble.hdi-monotone": hdi_monotone,
    "ensemble.decorrelation-optimal": decorrelation_optimal,
    "ensemble.budget-law": budget_law,
    "ensemble.weighting": weighting,
    "ensemble.heads-linear-in-budget": heads_linear_in_budget,
    "ensemble.many-small-heads": many_small_heads,
    "ensemble.training-orthogonalises": training_orthogonalises,
    "ensemble.single-head-smoother": single_head_smoother,
}
