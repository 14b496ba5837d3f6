"""Figures of paper B's claims (``flow.*``), drawn from stored rows only (test-setting rows)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnlab.engine.protocol import Row
from attnlab.report.figures import new_figure

__all__ = ["FIGURES"]


def _test(rows: Sequence[Row]) -> list[Row]:
    """Rows of the test setting that computed (controls and map cells have their own figures where drawn)."""
    return [r for r in rows if r.ok and not r.control and not r.cell]


def energy_monotone(rows: Sequence[Row]) -> dict:
    fig, ax = new_figure()
    for r in rows:
        if r.ok and "rel_err" in r.arrays:
            tag = f"{r.params['space']}, β={r.params['beta']}" + (f" [{r.control}]" if r.control else "")
            ax[0, 0].semilogy(r.arrays["t"], np.maximum(r.arrays["rel_err"], 1e-18), "o-", ms=3, label=tag)
    ax[0, 0].axhline(1e-8, color="k", ls="--", lw=0.8, label="tolerance")
    ax[0, 0].set(
        xlabel="time t (model units)", ylabel="relative error of dE/dt identity", title="Thm 11 identity"
    )
    ax[0, 0].legend(fontsize=7)
    return {"energy_identity": fig}


def energy_monotone_softmax(rows: Sequence[Row]) -> dict:
    fig, ax = new_figure()
    lines: dict[tuple, dict[float, list[float]]] = {}
    for r in _test(rows):
        pp = r.params
        cur = lines.setdefault((pp["heads"], pp["n"], pp["d"]), {}).setdefault(pp["beta"], [0.0, 0.0])
        cur[0] += r.metrics["violation_rate"] * r.metrics["trials"]
        cur[1] += r.metrics["trials"]
    for (H, n, d), by_b in sorted(lines.items()):
        bs = sorted(by_b)
        ax[0, 0].plot(
            bs, [100 * by_b[b][0] / by_b[b][1] for b in bs], "s-", ms=3, label=f"H={H}, n={n}, d={d}"
        )
    ax[0, 0].set(
        xlabel="inverse temperature β",
        ylabel="trajectories with dE/dt < -1e-12 E (%)",
        title="softmax attention: total energy falls (H ≥ 2)",
    )
    ax[0, 0].legend(fontsize=6)
    return {"energy_softmax": fig}


def value_perturbation(rows: Sequence[Row]) -> dict:
    good = _test(rows)
    sizes = sorted({float(r.params["size"]) for r in good})
    fig, ax = new_figure(1, 2)
    windows = sorted({w for r in good for w in r.metrics.get("violation_rate_by_window", {})}, key=float)
    xs = [max(s, 1e-4) for s in sizes]
    for w in windows:
        ys = []
        for s in sizes:
            rs = [r for r in good if float(r.params["size"]) == s]
            t = sum(r.metrics["trials"] for r in rs)
            ys.append(
                100 * sum(r.metrics["violation_rate_by_window"][w] * r.metrics["trials"] for r in rs) / t
            )
        ax[0, 0].semilogx(xs, ys, "o-", label=f"within t ≤ {w}")
    ax[0, 0].set(
        xlabel="perturbation s = ||V_h - M_h||_op / ||M_h||_op (0 drawn at 1e-4)",
        ylabel="trajectories with dE_multi/dt < 0 (%)",
        title="Thm 12: violation rate by window",
    )
    ax[0, 0].legend(fontsize=7)
    pos = [s for s in sizes if s > 0]
    mx = [max(r.metrics["max_rel_violation"] for r in good if float(r.params["size"]) == s) for s in pos]
    keep = [(s, m) for s, m in zip(pos, mx, strict=True) if m > 0]
    if keep:
        ax[0, 1].loglog(*zip(*keep), "o", label="largest |dE/dt|/E")
        s0, m0 = keep[-1]
        ax[0, 1].loglog(pos, [m0 * (s / s0) ** 2 for s in pos], "k--", lw=0.8, label="∝ s² (predicted)")
    ax[0, 1].set(xlabel="perturbation s", ylabel="largest relative violation", title="quadratic in s")
    ax[0, 1].legend(fontsize=7)
    return {"value_perturbation": fig}


def radial_shadow(rows: Sequence[Row]) -> dict:
    good = _test(rows)
    scan = [r for r in good if r.params.get("mode") == "scan"]
    good = [r for r in good if r.params.get("mode") != "scan"]
    fig, ax = new_figure(1, 2)
    curves: dict[tuple, dict[float, float]] = {}
    for r in scan:
        n_mid = sorted(r.params["ns"])[len(r.params["ns"]) // 2]
        for setting, (r1, _) in r.metrics["rates"].items():
            n, d = (int(part.split("=")[1]) for part in setting.split(","))
            if n == n_mid:
                key = (r.params["construction"], r.params["heads"], n, d)
                curves.setdefault(key, {})[r.params["beta"]] = 100 * r1
    for (con, H, n, d), c in sorted(curves.items()):
        bs = sorted(c)
        ax[0, 1].plot(
            bs,
            [c[b] for b in bs],
            "o-" if con == "random" else "s--",
            ms=3,
            label=f"{con}, H={H}, n={n}, d={d}",
        )
    ax[0, 1].axhline(30, color="k", ls=":", lw=0.8, label="30% (docs/flow.md B3)")
    ax[0, 1].set(
        xlabel="inverse temperature β",
        ylabel="configurations with dE_1/dt < 0 (%)",
        title="scan: head construction, d",
    )
    ax[0, 1].legend(fontsize=6)
    sph = sorted((r for r in good if r.params["space"] == "sphere"), key=lambda r: r.params["beta"])
    flat = sorted((r for r in good if r.params["space"] == "flat"), key=lambda r: r.params["beta"])
    b = [r.params["beta"] for r in sph]
    ax[0, 0].plot(b, [100 * r.metrics["violation_rate"] for r in sph], "o-", label="sphere: some dE_h/dt < 0")
    ax[0, 0].plot(
        [r.params["beta"] for r in flat],
        [100 * r.metrics["violation_rate"] for r in flat],
        "x--",
        label="flat: some dE_h/dt < 0",
    )
    for k, m in (("form1", "^:"), ("form2", "v:"), ("form3", "d:")):
        ax[0, 0].plot(b, [100 * r.metrics[k] for r in sph], m, label=f"sphere: {k} holds")
    ax[0, 0].set(
        xlabel="inverse temperature β", ylabel="configurations (%)", title="radial shadows, orthogonal heads"
    )
    ax[0, 0].legend(fontsize=7)
    return {"radial_shadow": fig}


def beta_star(rows: Sequence[Row]) -> dict:
    good = _test(rows)
    fig, ax = new_figure(1, 2)
    for r in good:
        if r.params.get("part") == "form3-scan" and "form3" in r.arrays:
            ls = "o-" if r.params["law"] == "orthogonal" else "s--"
            lab = f"H={r.params['heads']}, n={r.params['n']}, {r.params['law']} tokens"
            ax[0, 0].semilogx(
                r.arrays["beta"] / r.metrics["beta_star"], 100 * r.arrays["form3"], ls, ms=3, label=lab
            )
    ax[0, 0].axvline(1.0, color="k", ls="--", lw=0.8, label="β = β*")
    ax[0, 0].set(xlabel="β / β* (closed form)", ylabel="states with form 3 for every head (%)",
                 title="Condition 8, scalar heads")  # fmt: skip
    ax[0, 0].legend(fontsize=6)
    cf = [r for r in good if r.params.get("part") == "closed-form"]
    for H in sorted({r.params["heads"] for r in cf}):
        rs = sorted((r for r in cf if r.params["heads"] == H), key=lambda r: r.params["n"])
        ns = [r.params["n"] for r in rs]
        ax[0, 1].semilogx(ns, [r.metrics["beta_star"] for r in rs], "o-", label=f"β*, H={H}")
        ax[0, 1].semilogx(ns, [r.metrics["direct_form3"] for r in rs], "k+", ms=9)
        ax[0, 1].semilogx(
            ns, [r.metrics["beta_form2"] for r in rs], "s--", mfc="none", label=f"form 2, H={H}"
        )
    ax[0, 1].set(
        xlabel="tokens n", ylabel="threshold β (λ = 1)", title="closed form (lines) vs bisection (+)"
    )
    ax[0, 1].legend(fontsize=6)
    return {"beta_star": fig}


def beta_star_onset(rows: Sequence[Row]) -> dict:
    fig, ax = new_figure(1, 2)
    for r in _test(rows):
        if r.params.get("part", "onset") != "onset" or "fall" not in r.arrays:
            continue
        ratio = r.arrays["beta"] / r.metrics["beta_star"]
        lab = f"H={r.params['heads']}, n={r.params['n']}"
        ax[0, 0].semilogx(ratio, 100 * r.arrays["fall"], "o-", ms=3, label=lab)
        ax[0, 1].semilogx(ratio, 100 * r.arrays["form3"], "o-", ms=3, label=lab)
    for a in (ax[0, 0], ax[0, 1]):
        a.axvline(1.0, color="k", ls="--", lw=0.8, label="β = β*")
        a.legend(fontsize=6)
    ax[0, 0].axhline(1.0, color="k", ls=":", lw=0.8)
    ax[0, 0].set(xlabel="β / β*", ylabel="states with some dE_h/dt < 0 (%)",
                 title="orthogonal-block heads, orthonormal tokens")  # fmt: skip
    ax[0, 1].set(xlabel="β / β*", ylabel="states with form 3 for every head (%)", title="Condition 8")
    return {"beta_star_onset": fig}


def equiangular_rates(rows: Sequence[Row]) -> dict:
    fig, ax = new_figure(1, 3)
    for r in rows:
        if not r.ok:
            continue
        part = r.params.get("part")
        if part == "particles" and "t" in r.arrays and not r.control:
            lab = f"λ={r.params['strengths']}, n={r.params['n']}"
            ax[0, 0].semilogy(
                r.arrays["t"], np.maximum(1 - r.arrays["gamma"], 1e-16), "o", ms=3, label=lab + " particles"
            )
            ax[0, 0].semilogy(r.arrays["t"], np.maximum(1 - r.arrays["gamma_ode"], 1e-16), "k-", lw=0.8)
        if part == "superadditivity" and "mean" in r.arrays and not r.control:
            ax[0, 1].plot(r.arrays["mean"] / r.metrics["lambda_c"], r.arrays["gain"], ".", ms=2,
                          label=f"H={r.params['heads']}")  # fmt: skip
        if part == "local" and "gain" in r.arrays:
            g = r.arrays["gain"]
            tag = f"H={r.params['heads']}, n={r.params['n']}" + (f" [{r.control}]" if r.control else "")
            ax[0, 2].semilogx(
                r.arrays["mean"] / r.metrics["lambda_c"], g / np.max(np.abs(g)), "o-", ms=3, label=tag
            )
    ax[0, 0].set(xlabel="time t (model units)", ylabel="1 - γ", title="equiangular: particles vs ODE (line)")
    ax[0, 0].legend(fontsize=6)
    ax[0, 1].axhline(0, color="k", lw=0.8)
    ax[0, 1].set(xlabel="mean strength / λ_c", ylabel="Σφ(λ_h) - Hφ(mean λ) (rate units)",
                 title="mean-only reading: random strengths")  # fmt: skip
    ax[0, 1].legend(fontsize=7)
    ax[0, 2].axhline(0, color="k", lw=0.8)
    ax[0, 2].axvline(1, color="k", ls=":", lw=0.8)
    ax[0, 2].set(xlabel="mean strength / λ_c", ylabel="gain / its largest |value|",
                 title="local reading: small symmetric spread")  # fmt: skip
    ax[0, 2].legend(fontsize=6)
    return {"equiangular": fig}


def relu_vs_softmax(rows: Sequence[Row]) -> dict:
    good = _test(rows)
    fig, ax = new_figure(1, 2)
    for kind, mk in (("softmax", "o"), ("relu", "s")):
        for n in sorted({r.params["n"] for r in good if r.params.get("part") == "force"}):
            rs = sorted(
                (
                    r
                    for r in good
                    if r.params.get("part") == "force" and r.params["kind"] == kind and r.params["n"] == n
                ),
                key=lambda r: r.params["d"],
            )
            if rs:
                dd = [r.params["d"] for r in rs]
                (ln,) = ax[0, 0].loglog(dd, [r.metrics["rate"] for r in rs], mk, label=f"{kind}, n={n}")
                ax[0, 0].loglog(dd, [r.metrics["predicted"] for r in rs], "--", color=ln.get_color(), lw=0.8)
    ax[0, 0].set(
        xlabel="dimension d", ylabel="dγ/dt at random tokens", title="early force (dashed: predicted)"
    )
    ax[0, 0].legend(fontsize=6)
    for r in good:
        if r.params.get("part") == "times" and "t" in r.arrays:
            ax[0, 1].plot(r.arrays["t"], r.arrays["gamma"], "-" if r.params["kind"] == "softmax" else "--",
                          label=f"{r.params['kind']}, n={r.params['n']}, d={r.params['d']}")  # fmt: skip
    ax[0, 1].axhline(0.5, color="k", lw=0.8, ls=":")
    ax[0, 1].set(xlabel="time t (model units)", ylabel="mean γ", title="full dynamics from random tokens")
    ax[0, 1].legend(fontsize=5)
    return {"relu_vs_softmax": fig}


def entropy(rows: Sequence[Row]) -> dict:
    good = [r for r in rows if r.ok and "entropy_over_log_n" in r.arrays]
    fig, ax = new_figure()
    for r in good:
        tag = r.control or "test (uniform start)"
        ax[0, 0].plot(r.arrays["t"], r.arrays["entropy_over_log_n"], "-" if not r.control else "--",
                      label=f"{tag}, β={r.params['beta']:g}")  # fmt: skip
    ax[0, 0].axhline(1.0, color="k", ls=":", lw=0.8)
    ax[0, 0].set(xlabel="time t (model units)", ylabel="mean attention entropy / log n",
                 title="entropy along trajectories (mean over draws)")  # fmt: skip
    ax[0, 0].legend(fontsize=6)
    return {"entropy": fig}


def approx_orthogonal(rows: Sequence[Row]) -> dict:
    good = [r for r in rows if r.ok and "delta" in r.arrays]
    fig, ax = new_figure(1, 2)
    for r in good:
        tag = f"{r.params['space']}, n={r.params['n']}" + (f" [{r.control}]" if r.control else "")
        ax[0, 0].semilogx(np.maximum(r.arrays["delta"], 1e-7), 100 * r.arrays["rate"], "o-", ms=2, label=tag)
        if r.params["space"] == "sphere" and "kappa" in r.arrays:
            k, dok = r.arrays["kappa"], r.arrays["delta_ok"]
            broke = dok < r.arrays["delta"][-1]
            ax[0, 1].loglog(
                k[broke], np.maximum(dok[broke], 1e-7), "x" if r.control else "o", ms=4, label=tag
            )
    ax[0, 0].set(
        xlabel="δ = max ||M_h' M_h||_op (||M_h||_op = 1; 0 drawn at 1e-7)",
        ylabel="states with some dE_h/dt < 0 (%)",
        title="per-head falls vs δ (all states)",
    )
    ax[0, 0].legend(fontsize=6)
    ax[0, 1].set(
        xlabel="margin κ = min_h (dE_h/dt)/E_h at δ = 0 (1/time)",
        ylabel="largest safe δ before the state breaks",
        title="sphere: δ_crit against κ (states that broke)",
    )
    ax[0, 1].legend(fontsize=6)
    return {"approx_orthogonal": fig}


def radial_invariance(rows: Sequence[Row]) -> dict:
    fig, ax = new_figure(1, 2)
    for i, r in enumerate(_test(rows)):
        st, lf = r.metrics["started"], r.metrics["left"]
        x = np.arange(3) + 0.35 * i
        ax[0, 0].bar(x, st, width=0.17, label=f"β={r.params['beta']:g}: start inside")
        ax[0, 0].bar(x + 0.17, lf, width=0.17, label=f"β={r.params['beta']:g}: of those, leave")
        te, tc = r.arrays.get("exit_time"), r.arrays.get("cluster_time")
        if te is not None and tc is not None:  # −1: not within t1 (drawn at t1)
            t1 = float(r.params.get("t1", 20.0))
            ax[0, 1].plot(
                np.where(tc < 0, t1, tc), np.where(te < 0, t1, te), ".", ms=3, label=f"β={r.params['beta']:g}"
            )
    ax[0, 0].set_xticks(np.arange(3) + 0.25, ["form 1", "form 2", "form 3"])
    ax[0, 0].set(ylabel="trajectories", title="radial dominance along trajectories")
    ax[0, 0].legend(fontsize=6)
    lim = ax[0, 1].get_xlim()
    ax[0, 1].plot(lim, lim, "k--", lw=0.8)
    ax[0, 1].set(
        xlabel="time to one cluster (t1 if later)",
        ylabel="first exit from form 1 (t1 if none)",
        title="form 1 lasts until clustering above the diagonal",
    )
    ax[0, 1].legend(fontsize=6)
    return {"radial_invariance": fig}


def cluster_times(rows: Sequence[Row]) -> dict:
    fig, ax = new_figure()
    groups: dict[tuple, list[tuple[int, float]]] = {}
    for r in _test(rows):
        if r.params.get("part") == "times" and r.metrics.get("time_half") is not None:
            groups.setdefault((r.params["kind"], r.params["d"]), []).append(
                (r.params["n"], r.metrics["time_half"])
            )
    for (kind, d), pts in sorted(groups.items()):
        pts.sort()
        ax[0, 0].loglog([n for n, _ in pts], [t for _, t in pts], "o-", ms=3, label=f"{kind}, d={d}")
    if groups:
        ns = np.array(sorted({n for v in groups.values() for n, _ in v}), dtype=float)
        t0 = min(t for v in groups.values() for _, t in v)
        ax[0, 0].loglog(ns, t0 * ns / ns[0], "k--", lw=0.8, label="∝ n (stated)")
    ax[0, 0].set(xlabel="tokens n", ylabel="median time to γ = 1/2", title="clustering time against n")
    ax[0, 0].legend(fontsize=6)
    return {"cluster_times": fig}


def superadditivity_mean(rows: Sequence[Row]) -> dict:
    fig, ax = new_figure()
    for r in rows:
        if r.ok and "ratio" in r.arrays and not r.cell:
            lam = np.asarray(r.arrays["lam"]).reshape(len(r.arrays["ratio"]), -1)
            lc = r.metrics["lambda_c"]
            tag = f"n={r.params['n']}, β={r.params['beta']:g}" + (f" [{r.control}]" if r.control else "")
            ax[0, 0].plot(lam.mean(1) / lc, r.arrays["ratio"], ".", ms=4, label=tag)
    ax[0, 0].axhline(1.0, color="k", ls="--", lw=0.8)
    ax[0, 0].set(
        xlabel="mean strength λ̄ / λ_c",
        ylabel="early rate: unequal / equal heads (particles)",
        title="super-additivity: below 1 is a counterexample",
    )
    ax[0, 0].legend(fontsize=6)
    return {"superadditivity_mean": fig}


def relu_late(rows: Sequence[Row]) -> dict:
    fig, ax = new_figure()
    for r in _test(rows):
        if "eps" in r.arrays:
            ls = "-" if r.params["kind"] == "relu" else "--"
            lab = f"{r.params['kind']}, β={r.params['beta']:g}"
            ax[0, 0].semilogy(r.arrays["t"], np.maximum(r.arrays["eps"], 1e-16), ls, label=lab)
    ax[0, 0].set(xlabel="time t (model units)", ylabel="ε = 1 − γ", title="late decay: ReLU vs softmax")
    ax[0, 0].legend(fontsize=7)
    return {"relu_late": fig}


def late_constant(rows: Sequence[Row]) -> dict:
    fig, ax = new_figure()
    for r in _test(rows):
        if "eps" in r.arrays:
            L = float(sum(r.params["strengths"]))
            t, eps = r.arrays["t"], r.arrays["eps"]
            ok = eps > 1e-12
            (ln,) = ax[0, 0].semilogy(
                t[ok], eps[ok] * np.exp(2 * L * t[ok]), label=f"λ={r.params['strengths']}"
            )
            ax[0, 0].axhline(r.metrics["C_theory"], color=ln.get_color(), ls="--", lw=0.8)
    ax[0, 0].set(
        xlabel="time t (model units)", ylabel="ε(t) e^{2Λt}", title="late constant (dashed: quadrature C)"
    )
    ax[0, 0].legend(fontsize=7)
    return {"late_constant": fig}


FIGURES = {
    "flow.energy-monotone": energy_monotone,
    "flow.energy-monotone-softmax": energy_monotone_softmax,
    "flow.value-perturbation": value_perturbation,
    "flow.radial-shadow": radial_shadow,
    "flow.beta-star": beta_star,
    "flow.equiangular-rates": equiangular_rates,
    "flow.relu-vs-softmax": relu_vs_softmax,
    "flow.entropy": entropy,
    "flow.approx-orthogonal": approx_orthogonal,
    "flow.radial-invariance": radial_invariance,
    "flow.relu-late": relu_late,
    "flow.late-constant": late_constant,
    "flow.beta-star-onset": beta_star_onset,
    "flow.entropy-equiangular": entropy,
    "flow.superadditivity-mean": superadditivity_mean,
    "flow.cluster-times": cluster_times,
}
