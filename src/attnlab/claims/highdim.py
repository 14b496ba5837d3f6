"""Claims of paper C (THEORY.md C): single-head tied attention in high dimensions."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from attnlab.engine.protocol import Claim, Grid, Point, Result, Row, Verdict

PAPER = "C"

# Devices: the random inputs (targets, sequences, label noise, Adam's initialisation) are drawn from CPU
# generators exactly as on CPU and moved to ``point.device``, where the labels, the Adam ERM training, the
# test errors and the eigen-decompositions of trained matrices run (float64). The state evolution
# (numpy/scipy quadrature and small batched Newton solves) and the thresholds stay on CPU: theory-only
# rows record ``"device": "cpu"``, rows with a simulation record where it ran.


def _device_name(device) -> str:
    """The device a computation ran on, as torch names it (``cpu``, ``cuda:0``)."""
    import torch

    return str(torch.empty(0, device=device).device)


# ---------------------------------------------------------------------------------------------- helpers
def _ok(rows: Sequence[Row]) -> tuple[list[Row], str]:
    good = [r for r in rows if r.ok]
    bad = len(rows) - len(good)
    return good, (f"{bad} failed row(s) ignored. " if bad else "")


def _setting(p, **over):
    from attnlab.highdim import Setting

    kw = dict(
        kappa0=p.get("kappa0", 0.5),
        noise=p.get("noise", 0.5),
        tokens=p.get("tokens", 2),
        lam=p.get("lam", 0.01),
    )
    kw.update(over)
    return Setting(**kw)


def _cfg(p):
    from attnlab.highdim import TrainConfig

    return TrainConfig(max_steps=int(p.get("max_steps", 2000)), rtol=float(p.get("rtol", 1e-7)))


def _fig():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(5.5, 4))


def _seed(point: Point, key: str = "") -> int:
    from attnlab.core.seeding import derive_seed

    return derive_seed(point.seed, key) if key else point.seed


# ------------------------------------------------------------------------------ 1. theory vs Adam
# Two sides, as separate points of one grid (``side``): the state evolution once per (α, λ̃) (it does not
# depend on d or on the seed) and Adam at dimension d with ``seeds`` replicates per (α, λ̃). Rows of the
# earlier layout (both sides in one row, ``se_*`` beside ``sim_*``) are read as well.
def _run_tva(point: Point) -> Result:
    from attnlab.highdim import simulate, state_evolution

    p = point.params
    if p.get("side", "simulation") == "theory":
        fp = state_evolution(_setting(p), p["alpha"], nodes=p.get("nodes", 2048))
        return Result(
            metrics={
                "se_test_error": fp.test_error,
                "se_train_loss": fp.train_loss,
                "se_converged": fp.converged,
                "device": "cpu",  # state evolution: numpy/scipy
            }
        )
    r = simulate(
        p["d"],
        p["alpha"],
        kappa0=0.5,
        noise=0.5,
        tokens=2,
        lam=p["lam"],
        seed=_seed(point),
        config=_cfg(p),
        device=point.device,
    )
    return Result(
        metrics={
            "sim_test_error": r.test_error,
            "sim_train_loss": r.train_loss,
            "converged": r.converged,
            "steps": r.steps,
            "device": _device_name(point.device),
        }
    )


def _groups(rows, keys):
    out: dict = {}
    for r in rows:
        out.setdefault(tuple(r.params[k] for k in keys), []).append(r)
    return out


def _tva_sides(rows: Sequence[Row]) -> tuple[dict, dict]:
    """(theory, simulation): the state-evolution metrics per (α, λ̃) and the Adam rows per (α, λ̃)."""
    theory: dict = {}
    sim: dict = {}
    for r in rows:
        key = (r.params["alpha"], r.params["lam"])
        if "se_test_error" in r.metrics:
            theory.setdefault(key, r.metrics)
        if "sim_test_error" in r.metrics:
            sim.setdefault(key, []).append(r)
    return theory, sim


def _verdict_tva(rows: Sequence[Row]) -> Verdict:
    good, note = _ok(rows)
    theory, sim = _tva_sides(good)
    pairs = sorted(k for k in sim if k in theory)
    if not pairs:
        return Verdict("inconclusive", {}, "-", note + "needs a state-evolution and an Adam row per (α, λ̃)")
    worst, d = 0.0, min(r.params["d"] for k in pairs for r in sim[k])
    nums: dict = {}
    seeds = min(len(sim[k]) for k in pairs)
    unconverged = [k for k in pairs if theory[k].get("se_converged") is False]
    for a, lam in pairs:
        rs, th_m = sim[(a, lam)], theory[(a, lam)]
        for key in ("test_error", "train_loss"):
            vals = np.array([r.metrics["sim_" + key] for r in rs])
            th = th_m["se_" + key]
            gap = abs(vals.mean() - th) / abs(th)
            spread = vals.std(ddof=1) / abs(th) if vals.size > 1 else 0.0
            tol = max(spread, 0.03)
            nums[f"rel_gap_{key}_a{a}_l{lam}"] = gap
            nums[f"rel_spread_{key}_a{a}_l{lam}"] = spread
            worst = max(worst, gap / tol)
    nums["worst_gap_over_tol"] = worst
    nums["d"] = d
    nums["seeds"] = seeds
    nums["alphas"] = sorted({a for a, _ in pairs})
    nums["lams"] = sorted({lam for _, lam in pairs})
    tol = "relative gap of the seed mean <= max(seed std, 3%), test error and training loss"
    ctx = f"d = {d}, {seeds} seed(s) per point, {len(pairs)} (α, λ̃) point(s)"
    if unconverged:
        note += f"state evolution not converged at {unconverged}; "
    if worst <= 1:
        thin = d < 100 or seeds < 2
        status = "inconclusive" if unconverged else "holds"
        return Verdict(
            status, nums, tol, note + ctx + (" (below the issue's d = 100 or 2 seeds)" if thin else "")
        )
    if d < 100 or seeds < 2 or unconverged:
        return Verdict(
            "inconclusive",
            nums,
            tol,
            note + f"gap above tolerance at {ctx}; the 3% finite-d gap is calibrated at d = 100 with "
            "several seeds",
        )
    return Verdict("fails", nums, tol, note + ctx)


def _fig_tva(rows):
    good, _ = _ok(rows)
    theory, sim = _tva_sides(good)
    fig, ax = _fig()
    for lam in sorted({k[1] for k in theory} | {k[1] for k in sim}):
        ka = sorted(a for a, l in theory if l == lam)
        line = ax.plot(ka, [theory[(a, lam)]["se_test_error"] for a in ka], "-", label=f"theory λ̃={lam}")
        sa = sorted(a for a, l in sim if l == lam)
        vals = [np.array([r.metrics["sim_test_error"] for r in sim[(a, lam)]]) for a in sa]
        ax.errorbar(
            sa,
            [v.mean() for v in vals],
            yerr=[v.std(ddof=1) if v.size > 1 else 0.0 for v in vals],
            fmt="o",
            color=line[0].get_color(),
            label=f"Adam λ̃={lam} (mean ± seed std)",
        )
    ax.set_xlabel("α = n/d² (dimensionless)")
    ax.set_ylabel("test error (sum over T² entries)")
    ax.legend(fontsize=7)
    return {"test_error": fig}


TVA = Claim(
    id="highdim.theory-vs-adam",
    kind="theorem",
    paper=PAPER,
    statement="Adam's test error and training loss match the state-evolution prediction (within the larger "
    "of the seed spread and 3% at d = 100).",
    version=2,
    # the simulation grid carries the seed replicates; the state evolution (deterministic, independent of
    # d) is an extra grid with its one replicate fixed (rep = 0)
    grids={
        "quick": Grid(
            {"alpha": [0.3016, 0.5], "lam": [0.01, 0.1]},
            {"side": "simulation", "d": 100, "max_steps": 1500},
            seeds=3,
            extra=[Grid({"alpha": [0.3016, 0.5], "lam": [0.01, 0.1]}, {"side": "theory", "rep": 0})],
        ),
        "full": Grid(
            {"alpha": [0.15, 0.3016, 0.5, 1.0], "lam": [0.01, 0.1]},
            {"side": "simulation", "d": 100},
            seeds=5,
            extra=[
                Grid(
                    {"alpha": [0.15, 0.3016, 0.5, 1.0], "lam": [0.01, 0.1]},
                    {"side": "theory", "nodes": 8192, "rep": 0},
                )
            ],
        ),
    },
    run=_run_tva,
    verdict=_verdict_tva,
    figures=_fig_tva,
)


# ------------------------------------------------------------------- 2. factorised beats Frobenius
def _run_fvf(point: Point) -> Result:
    import torch

    from attnlab.core.seeding import generator
    from attnlab.highdim import evaluate, mp_target, sample, train_erm

    p = point.params
    d, a = p["d"], p["alpha"]
    g = point.generator()
    S0 = mp_target(d, p["kappa0"], g, device=point.device)  # drawn on CPU; samples and training follow S0
    n = round(a * d * d)
    tr = sample(S0, n, 2, p["noise"], 1.0, "seq2lab", g)
    va = sample(S0, 1000, 2, p["noise"], 1.0, "seq2lab", g)
    te = sample(S0, 2000, 2, p["noise"], 1.0, "seq2lab", g)
    best = {}
    for fac, lams in ((True, p["lams"]), (False, p["lams_frob"])):
        scores = []
        for lam in lams:
            r = train_erm(tr, None, lam=lam, factorised=fac, config=_cfg(p), generator=generator(point.seed))
            scores.append((evaluate(r.S, va)[0], lam, r.S))
        v, lam, S = min(scores, key=lambda x: x[0])
        best[fac] = (evaluate(S, te)[0], lam, v)
    del torch
    return Result(
        metrics={
            "test_factorised": best[True][0],
            "lam_factorised": best[True][1],
            "test_frobenius": best[False][0],
            "lam_frobenius": best[False][1],
            "device": _device_name(point.device),
        }
    )


def _verdict_fvf(rows):
    good, note = _ok(rows)
    by = _groups(good, ("kappa0",))
    if len(by) < 2:
        return Verdict("inconclusive", {}, "-", note + "needs two target ranks")
    nums, adv = {}, {}
    edge = []
    for (k0,), rs in sorted(by.items()):
        f = np.mean([r.metrics["test_factorised"] for r in rs])
        u = np.mean([r.metrics["test_frobenius"] for r in rs])
        adv[k0] = (u - f) / u
        nums[f"test_factorised_k{k0}"] = f
        nums[f"test_frobenius_k{k0}"] = u
        nums[f"rel_advantage_k{k0}"] = adv[k0]
        for side, grid_key in (("factorised", "lams"), ("frobenius", "lams_frob")):
            chosen = sorted({r.metrics[f"lam_{side}"] for r in rs})
            nums[f"lam_{side}_k{k0}"] = chosen[0] if len(chosen) == 1 else chosen
            grid = [r.params.get(grid_key) for r in rs if r.params.get(grid_key)]
            if grid and len(grid[0]) > 2 and any(c in (min(grid[0]), max(grid[0])) for c in chosen):
                edge.append(f"{side} at κ0 = {k0}")
    ks = sorted(adv)
    beats = all(v > 0 for v in adv.values())
    largest_low = adv[ks[0]] >= max(adv.values())
    nums["advantage_largest_at_lowest_kappa0"] = largest_low
    tol = "factorised error < Frobenius error at every κ0; relative advantage largest at the lowest κ0"
    status = "holds" if beats and largest_low else "fails"
    seeds = min(len(rs) for rs in by.values())
    note += f"{len(ks)} target ranks, {seeds} seed(s) each; λ cross-validated on a held-out set per student"
    if edge:
        note += "; cross-validated λ at the edge of its grid: " + ", ".join(edge)
    return Verdict(status, nums, tol, note)


def _fig_fvf(rows):
    good, _ = _ok(rows)
    fig, ax = _fig()
    by = sorted(_groups(good, ("kappa0",)).items())
    k = [kk[0] for kk, _ in by]
    ax.plot(
        k, [np.mean([r.metrics["test_factorised"] for r in rs]) for _, rs in by], "o-", label="factorised"
    )
    ax.plot(k, [np.mean([r.metrics["test_frobenius"] for r in rs]) for _, rs in by], "s-", label="Frobenius")
    ax.set_xlabel("target rank ratio κ0 = p0/d")
    ax.set_ylabel("test error at cross-validated λ")
    ax.legend()
    return {"factorised_vs_frobenius": fig}


FVF = Claim(
    id="highdim.factorised-beats-frobenius",
    kind="theorem",
    paper=PAPER,
    statement="At matched (cross-validated) regularisation the factorised student has lower test error than "
    "the unfactorised Frobenius-penalised one, most of all at low target rank.",
    version=1,
    grids={
        # each student's λ grid brackets its cross-validated optimum (nuclear λ̃: 0.003–0.03; Frobenius:
        # 0.001–0.003 at d = 40, α = 0.4, Δ = 0.1)
        "quick": Grid(
            {"kappa0": [0.1, 0.25, 0.5, 1.0]},
            {
                "d": 40,
                "alpha": 0.4,
                "noise": 0.1,
                "lams": [0.001, 0.003, 0.01, 0.03, 0.1],
                "lams_frob": [0.0003, 0.001, 0.003, 0.01, 0.03],
                "max_steps": 1000,
            },
        ),
        "full": Grid(
            {"kappa0": [0.1, 0.25, 0.5, 1.0]},
            {
                "d": 80,
                "alpha": 0.4,
                "noise": 0.1,
                "lams": [0.001, 0.003, 0.01, 0.03, 0.1, 0.3],
                "lams_frob": [0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3],
            },
            seeds=3,
        ),
    },
    run=_run_fvf,
    verdict=_verdict_fvf,
    figures=_fig_fvf,
)


# ------------------------------------------------------------------------------------- 3. spectrum
def _run_spec(point: Point) -> Result:
    from attnlab.highdim import predicted_spectrum, simulate, state_evolution

    p = point.params
    s = _setting(p)
    fp = state_evolution(s, p["alpha"], nodes=p.get("nodes", 2048))
    ps = predicted_spectrum(s, fp)
    r = simulate(p["d"], p["alpha"], lam=p["lam"], seed=_seed(point), config=_cfg(p), device=point.device)
    ev = np.sort(r.eigenvalues)
    nz = ev[ev > r.S.new_tensor(0).item() + 1e-3]
    atom_sim = 1 - nz.size / ev.size
    if nz.size:
        emp = np.arange(1, nz.size + 1) / nz.size
        th = ps.cdf_nonzero(nz)
        ks = float(max(np.max(np.abs(emp - th)), np.max(np.abs(emp - 1 / nz.size - th))))
    else:
        ks = 1.0
    return Result(
        metrics={
            "atom_theory": ps.atom,
            "atom_sim": atom_sim,
            "ks": ks,
            "n_nonzero": int(nz.size),
            "device": _device_name(point.device),  # Adam's; the state evolution ran on CPU
        },
        arrays={"eigenvalues": ev, "pred_x": ps.x, "pred_density": ps.density * ps.rank_fraction},
    )


def _verdict_spec(rows):
    good, note = _ok(rows)
    if not good:
        return Verdict("inconclusive", {}, "-", note + "no rows")

    # the atom is a count of eigenvalues below ε: it fluctuates by a few eigenvalues at finite d, so allow
    # five eigenvalues (5/d) with a 5% floor; the KS bound is the 1% critical value for the non-zero count,
    # with a 0.1 floor for finite-d effects. The worst row decides (one row per seed), and is reported.
    def judged(r):
        m, d = r.metrics, r.params["d"]
        gap = abs(m["atom_theory"] - m["atom_sim"])
        atom_tol = max(0.05, 5 / d)
        ks_tol = max(0.1, 1.63 / math.sqrt(max(m["n_nonzero"], 1)))
        return {
            "atom_theory": m["atom_theory"],
            "atom_sim": m["atom_sim"],
            "atom_gap": gap,
            "atom_tol": atom_tol,
            "rank_fraction_theory": 1 - m["atom_theory"],
            "rank_fraction_sim": 1 - m["atom_sim"],
            "ks": m["ks"],
            "ks_tol": ks_tol,
            "n_nonzero": m["n_nonzero"],
            "d": d,
            "atom_gap_over_tol": gap / atom_tol,
            "ks_over_tol": m["ks"] / ks_tol,
        }

    all_nums = [judged(r) for r in good]
    nums = max(all_nums, key=lambda v: max(v["atom_gap_over_tol"], v["ks_over_tol"]))
    ok = all(v["atom_gap_over_tol"] <= 1 and v["ks_over_tol"] <= 1 for v in all_nums)
    tol = (
        f"|atom gap| <= max(0.05, 5/d) = {nums['atom_tol']:.3f}; "
        f"KS <= max(0.1, 1.63/√n_nonzero) = {nums['ks_tol']:.3f}"
    )
    ds = sorted({r.params["d"] for r in good})
    return Verdict(
        "holds" if ok else "fails", nums, tol, note + f"d = {', '.join(map(str, ds))}, {len(good)} run(s)"
    )


def _fig_spec(rows):
    good, _ = _ok(rows)
    fig, ax = _fig()
    if good:
        r = good[0]
        ev = r.arrays["eigenvalues"]
        ax.hist(ev[ev > 1e-3], bins=30, density=False, alpha=0.5, label="Adam (non-zero eigenvalues)")
        w = (ev > 1e-3).sum() * (np.ptp(ev[ev > 1e-3]) / 30 if (ev > 1e-3).sum() > 1 else 1)
        ax.plot(
            r.arrays["pred_x"],
            r.arrays["pred_density"]
            * w
            / max(r.metrics["atom_theory"] < 1, 1e-9)
            / (1 - r.metrics["atom_theory"]),
            "r-",
            label="theory (scaled to counts)",
        )
    ax.set_xlabel("eigenvalue of Ŝ (units of S0's scale)")
    ax.set_ylabel("count per bin")
    ax.legend(fontsize=7)
    return {"spectrum": fig}


SPEC = Claim(
    id="highdim.spectrum",
    kind="theorem",
    paper=PAPER,
    statement="The eigenvalues of the trained S follow η·ReLU(S0 + δZ − ε): atom at zero, rank fraction, "
    "and the law of the non-zero part (Kolmogorov–Smirnov).",
    version=1,
    grids={
        "quick": Grid({}, {"d": 100, "alpha": 0.5, "lam": 0.01, "max_steps": 1500}),
        "full": Grid({}, {"d": 200, "alpha": 0.5, "lam": 0.01, "nodes": 8192}),
    },
    run=_run_spec,
    verdict=_verdict_spec,
    figures=_fig_spec,
)


# ------------------------------------------------------------------- 4. interpolation threshold
def _run_interp(point: Point) -> Result:
    from attnlab.highdim import interpolation_threshold, simulate

    p = point.params
    ai, _ = interpolation_threshold(0.5, p["noise"], 2)
    r = simulate(
        p["d"],
        p["alpha"],
        noise=p["noise"],
        lam=p["lam"],
        seed=_seed(point),
        config=_cfg(p),
        device=point.device,
    )
    return Result(
        metrics={
            "alpha_interp": ai,
            "train_loss": r.train_loss,
            "data_loss": r.data_loss,
            "steps": r.steps,
            "device": _device_name(point.device),
        }
    )


def _verdict_interp(rows):
    good, note = _ok(rows)
    if not good:
        return Verdict("inconclusive", {}, "-", note + "no rows")
    ai = good[0].metrics["alpha_interp"]
    below = [r.metrics["data_loss"] for r in good if r.params["alpha"] <= 0.8 * ai]
    above = [r.metrics["data_loss"] for r in good if r.params["alpha"] >= 1.3 * ai]
    if not below or not above:
        return Verdict("inconclusive", {"alpha_interp": ai}, "-", note + "needs α on both sides")
    nums = {"alpha_interp": ai, "max_loss_below": max(below), "min_loss_above": min(above)}
    nums["ratio"] = max(below) / min(above)
    tol = "training data loss below 0.8 α_interp at most 10% of that above 1.3 α_interp"
    return Verdict("holds" if nums["ratio"] <= 0.1 else "fails", nums, tol, note + "λ̃ small, finite d")


def _fig_threshold(rows, metric: str, threshold: str, label: str, ylabel: str):
    """``metric`` against α (log scale) with the theory's threshold ``threshold`` marked."""
    good, _ = _ok(rows)
    fig, ax = _fig()
    rs = sorted(good, key=lambda r: r.params["alpha"])
    ax.semilogy([r.params["alpha"] for r in rs], [max(r.metrics[metric], 1e-12) for r in rs], "o-")
    if rs:
        ax.axvline(rs[0].metrics[threshold], color="r", ls="--", label=label)
    ax.set_xlabel("α = n/d²")
    ax.set_ylabel(ylabel)
    ax.legend()
    return fig


def _fig_interp(rows):
    ylabel = "training data loss per d² (penalty excluded)"
    return {"interpolation": _fig_threshold(rows, "data_loss", "alpha_interp", "α_interp (theory)", ylabel)}


INTERP = Claim(
    id="highdim.interpolation-threshold",
    kind="theorem",
    paper=PAPER,
    statement="At small λ̃ the training loss vanishes below α_interp and is positive above it.",
    version=1,
    grids={
        "quick": Grid(
            {"alpha": [0.06, 0.1, 0.25, 0.35]}, {"d": 30, "noise": 0.5, "lam": 1e-5, "max_steps": 4000}
        ),
        "full": Grid(
            {"alpha": [0.05, 0.08, 0.11, 0.13, 0.15, 0.17, 0.2, 0.25, 0.3]},
            {"d": 80, "noise": 0.5, "lam": 1e-4, "max_steps": 6000},
            seeds=2,
        ),
    },
    run=_run_interp,
    verdict=_verdict_interp,
    figures=_fig_interp,
)


# ---------------------------------------------------------------------------- 5. perfect recovery
def _run_pr(point: Point) -> Result:
    from attnlab.highdim import perfect_recovery_threshold, simulate

    p = point.params
    abar = perfect_recovery_threshold(p["kappa0"])
    r = simulate(
        p["d"],
        p["alpha"],
        kappa0=p["kappa0"],
        noise=0.0,
        lam=p["lam"],
        seed=_seed(point),
        config=_cfg(p),
        device=point.device,
    )
    return Result(
        metrics={
            "alpha_pr": abar / 2,
            "test_error": r.test_error_clean,
            "steps": r.steps,
            "device": _device_name(point.device),
        }
    )


def _verdict_pr(rows):
    good, note = _ok(rows)
    if not good:
        return Verdict("inconclusive", {}, "-", note + "no rows")
    apr = good[0].metrics["alpha_pr"]
    below = [r.metrics["test_error"] for r in good if r.params["alpha"] <= 0.7 * apr]
    above = [r.metrics["test_error"] for r in good if r.params["alpha"] >= 1.4 * apr]
    if not below or not above:
        return Verdict("inconclusive", {"alpha_pr": apr}, "-", note + "needs α on both sides")
    nums = {"alpha_pr": apr, "min_error_below": min(below), "max_error_above": max(above)}
    nums["ratio"] = max(above) / min(below)
    tol = "noiseless test error above 1.4 α_PR at most 10% of that below 0.7 α_PR"
    return Verdict("holds" if nums["ratio"] <= 0.1 else "fails", nums, tol, note + "Δ = 0, small λ̃")


def _fig_pr(rows):
    fig = _fig_threshold(rows, "test_error", "alpha_pr", "α_PR (theory)", "noiseless test error")
    return {"perfect_recovery": fig}


PR = Claim(
    id="highdim.perfect-recovery",
    kind="theorem",
    paper=PAPER,
    statement="Without label noise the test error vanishes above the perfect-recovery threshold ᾱ_PR.",
    version=1,
    grids={
        "quick": Grid({"alpha": [0.12, 0.32, 0.4]}, {"d": 30, "kappa0": 0.5, "lam": 1e-3, "max_steps": 2000}),
        "full": Grid(
            {"alpha": [0.08, 0.12, 0.16, 0.2, 0.24, 0.3, 0.4]},
            {"d": 80, "kappa0": 0.5, "lam": 1e-4, "max_steps": 6000},
            seeds=2,
        ),
    },
    run=_run_pr,
    verdict=_verdict_pr,
    figures=_fig_pr,
)


# ------------------------------------------------------------------------- 6. error decomposition
def _run_dec(point: Point) -> Result:
    import torch

    from attnlab.core.seeding import derive_seed, generator
    from attnlab.highdim import decompose_error, mp_target, sample, state_evolution, train_erm

    p = point.params
    d, a = p["d"], p["alpha"]
    g = generator(derive_seed(point.seed, "data"))
    S0 = mp_target(d, 0.5, g, device=point.device)  # drawn on CPU; samples, training, eigh follow S0
    tr = sample(S0, round(a * d * d), 2, 0.5, 1.0, "seq2lab", g)
    r = train_erm(tr, None, lam=p["lam"], config=_cfg(p), generator=point.generator())
    dec = decompose_error(r.S, S0)
    fp = state_evolution(_setting(p), a, nodes=p.get("nodes", 2048))
    del torch
    return Result(metrics=dec.to_dict() | {"se_s_error": fp.s_error, "device": _device_name(point.device)})


def _verdict_dec(rows):
    good, note = _ok(rows)
    if not good:
        return Verdict("inconclusive", {}, "-", note + "no rows")
    worst = max(abs(r.metrics["parts_sum"] - r.metrics["total"]) / r.metrics["total"] for r in good)
    gap = max(abs(r.metrics["total"] - r.metrics["se_s_error"]) / r.metrics["se_s_error"] for r in good)
    nums = {"max_rel_sum_residual": worst, "max_rel_gap_total_vs_theory": gap}
    for r in good:
        a = r.params["alpha"]
        for k in ("over", "under", "approx", "mismatch"):
            nums[f"{k}_a{a}"] = r.metrics[k]
    tol = "parts sum to the total within 1e-10 (relative); total within 15% of the theory's Q0 + q − 2m"
    ok = worst < 1e-10 and gap < 0.15
    return Verdict(
        "holds" if ok else "fails", nums, tol, note + "the split is defined in highdim.decomposition"
    )


def _fig_dec(rows):
    good, _ = _ok(rows)
    fig, ax = _fig()
    rs = sorted(good, key=lambda r: r.params["alpha"])
    x = np.arange(len(rs))
    bottom = np.zeros(len(rs))
    for k in ("over", "under", "approx", "mismatch"):
        v = np.array([r.metrics[k] for r in rs])
        ax.bar(x, v, bottom=bottom, label=k)
        bottom += v
    ax.plot(x, [r.metrics["se_s_error"] for r in rs], "k*", ms=10, label="theory Q0+q−2m")
    ax.set_xticks(x, [f"α={r.params['alpha']}" for r in rs])
    ax.set_ylabel("‖Ŝ − S0‖²/d (dimensionless)")
    ax.legend(fontsize=7)
    return {"decomposition": fig}


DEC = Claim(
    id="highdim.error-decomposition",
    kind="theorem",
    paper=PAPER,
    statement="The error of the learned S splits into over-fitting (noise bulk), under-fitting (hidden "
    "target "
    "directions), approximation (recovered outliers) and mismatch (rotation) parts that sum to the total.",
    version=1,
    grids={
        "quick": Grid({"alpha": [0.3, 0.8]}, {"d": 40, "lam": 0.01, "max_steps": 1500}),
        "full": Grid({"alpha": [0.2, 0.3, 0.5, 0.8, 1.2]}, {"d": 100, "lam": 0.01}, seeds=2),
    },
    run=_run_dec,
    verdict=_verdict_dec,
    figures=_fig_dec,
)


# -------------------------------------------------------------------------------------- 7. emergence
def _outliers_theory(s, fp) -> int:
    from attnlab.highdim import semicircle_convolution

    law = semicircle_convolution(s.spectrum, fp.delta)
    d = s.spectrum.d
    masses = [law.mass_above(a) - law.mass_above(b) for a, b in law.intervals]
    ib = int(np.argmax(masses))
    return int(
        round(sum(m for (a, b), m in zip(law.intervals[ib + 1 :], masses[ib + 1 :]) if b > fp.eps) * d)
    )


def _run_em(point: Point) -> Result:
    import torch

    from attnlab.core.seeding import derive_seed, generator
    from attnlab.highdim import (
        power_law_spectrum,
        power_law_target,
        predicted_spectrum,
        simulate,
        state_evolution,
    )

    p = point.params
    d = p["d"]
    spec = power_law_spectrum(d, p["gamma"])
    s = _setting(p, target=spec, noise=p["noise"])
    fp = state_evolution(s, p["alpha"], nodes=p.get("nodes", 2048))
    n_th = _outliers_theory(s, fp)
    ps = predicted_spectrum(s, fp)
    S0 = power_law_target(d, p["gamma"], generator(derive_seed(point.seed, "target")), device=point.device)
    r = simulate(d, p["alpha"], noise=p["noise"], lam=p["lam"], target=S0, seed=_seed(point), config=_cfg(p))
    n_sim = int(np.sum(r.eigenvalues > ps.outlier_edge))
    del torch
    return Result(
        metrics={
            "outliers_theory": n_th,
            "outliers_sim": n_sim,
            "edge": ps.outlier_edge,
            "device": _device_name(point.device),  # Adam's; the state evolution ran on CPU
        }
    )


def _verdict_em(rows):
    good, note = _ok(rows)
    rs = sorted(good, key=lambda r: r.params["alpha"])
    if len(rs) < 3:
        return Verdict("inconclusive", {}, "-", note + "needs at least three α")
    th = [r.metrics["outliers_theory"] for r in rs]
    sim = [r.metrics["outliers_sim"] for r in rs]
    nums = {"alphas": [r.params["alpha"] for r in rs], "outliers_theory": th, "outliers_sim": sim}
    rises = all(b >= a for a, b in zip(th, th[1:])) and th[-1] > th[0]
    agree = max(abs(a - b) for a, b in zip(th, sim))
    nums["max_count_gap"] = agree
    tol = "theory count non-decreasing and rising over the α grid; simulation within ±2 modes"
    if rises and agree <= 2:
        return Verdict("holds", nums, tol, note)
    if rises:
        return Verdict("fails", nums, tol, note + "simulation count differs from theory")
    return Verdict("fails", nums, tol, note + "theory count does not rise")


def _fig_em(rows):
    good, _ = _ok(rows)
    fig, ax = _fig()
    rs = sorted(good, key=lambda r: r.params["alpha"])
    a = [r.params["alpha"] for r in rs]
    ax.step(a, [r.metrics["outliers_theory"] for r in rs], where="mid", label="theory (finite-d SE)")
    ax.plot(a, [r.metrics["outliers_sim"] for r in rs], "o", label="Adam")
    ax.set_xscale("log")
    ax.set_xlabel("α = n/d²")
    ax.set_ylabel("recovered modes (outliers above the bulk)")
    ax.legend()
    return {"emergence": fig}


EM = Claim(
    id="highdim.emergence",
    kind="theorem",
    paper=PAPER,
    statement="With a power-law target the number of recovered modes (outliers above the bulk edge) rises "
    "step by step as α grows, in theory and in simulation.",
    version=1,
    grids={
        "quick": Grid(
            {"alpha": [0.05, 0.15, 0.4]},
            {"d": 40, "gamma": 1.0, "noise": 0.1, "lam": 0.01, "max_steps": 1500},
        ),
        "full": Grid(
            {"alpha": [0.02, 0.05, 0.1, 0.2, 0.4, 0.8]},
            {"d": 100, "gamma": 1.0, "noise": 0.1, "lam": 0.01, "nodes": 4096},
            seeds=2,
        ),
    },
    run=_run_em,
    verdict=_verdict_em,
    figures=_fig_em,
)


# ---------------------------------------------------------------------------------- 8. scaling law
# Two sides, as separate points of one grid (``side``): the finite-d state evolution with the power-law
# spectrum (one point per α and γ) and Adam ERM on a Haar-rotated power-law target at a moderate d (``seeds``
# replicates per α). Both measure the excess test error ``e − e0`` against noisy labels, ``e0`` being the
# error of the target itself (state evolution: at q = m = Q0 on the same nodes; simulation: S0 on the same
# test sequences, a paired difference), and fit the slope of log excess against log(n/d).
_SL_TOL = 0.15  # |slope − (−1 + 1/(2γ))| accepted for the theory side and as the floor of the simulation's


def _run_sl(point: Point) -> Result:
    p = point.params
    if p.get("side", "theory") == "simulation":
        return _run_sl_sim(point)
    from attnlab.highdim import OutputChannel, power_law_spectrum, state_evolution

    s = _setting(p, target=power_law_spectrum(p["d"], p["gamma"]), noise=p["noise"])
    ch = OutputChannel(s, p.get("nodes", 2048))
    fp = state_evolution(s, p["alpha"], channel=ch)
    e0 = ch.test_error(s.q0, s.q0)
    return Result(
        metrics={
            "test_error": fp.test_error,
            "e0": e0,
            "excess": fp.test_error - e0,
            "converged": fp.converged,
            "device": "cpu",  # state evolution: numpy/scipy
        }
    )


def _run_sl_sim(point: Point) -> Result:
    from attnlab.core.seeding import derive_seed, generator
    from attnlab.highdim import evaluate, power_law_target, sample, train_erm

    p = point.params
    d, a = p["d"], p["alpha"]
    g = generator(derive_seed(point.seed, "data"))
    S0 = power_law_target(d, p["gamma"], g, device=point.device)  # drawn on CPU; the rest follows S0
    tr = sample(S0, max(1, round(a * d * d)), 2, p["noise"], 1.0, "seq2lab", g)
    te = sample(S0, p.get("n_test", 4000), 2, p["noise"], 1.0, "seq2lab", g)
    r = train_erm(tr, te, lam=p["lam"], config=_cfg(p), generator=generator(derive_seed(point.seed, "init")))
    e0 = evaluate(S0, te)[0]
    return Result(
        metrics={
            "test_error": r.test_error,
            "e0": e0,
            "excess": r.test_error - e0,
            "converged": r.converged,
            "steps": r.steps,
            "device": _device_name(point.device),
        }
    )


def _sl_side(r: Row) -> str:
    return r.params.get("side", "theory")


def _sl_fit(rs: Sequence[Row]) -> tuple[float, float, np.ndarray, np.ndarray] | None:
    """Slope of log(mean excess) against log(n/d) over the α of ``rs``, with its standard error from the
    per-seed slopes (NaN with one seed); None with fewer than three α with a positive mean excess."""
    by = _groups(rs, ("alpha",))
    al = sorted(a for (a,), v in by.items() if np.mean([r.metrics["excess"] for r in v]) > 0)
    if len(al) < 3:
        return None
    d = rs[0].params["d"]
    x = np.array([a * d for a in al])
    y = np.array([np.mean([r.metrics["excess"] for r in by[(a,)]]) for a in al])
    slope = float(np.polyfit(np.log(x), np.log(y), 1)[0])
    per_seed = []
    for rep in sorted({r.params.get("rep", 0) for r in rs}):
        ys = [
            next((r.metrics["excess"] for r in by[(a,)] if r.params.get("rep", 0) == rep), None) for a in al
        ]
        if all(v is not None and v > 0 for v in ys):
            per_seed.append(float(np.polyfit(np.log(x), np.log(np.array(ys)), 1)[0]))
    se = float(np.std(per_seed, ddof=1) / math.sqrt(len(per_seed))) if len(per_seed) > 1 else math.nan
    return slope, se, x, y


def _verdict_sl(rows):
    good, note = _ok(rows)
    th_rows = [r for r in good if _sl_side(r) == "theory" and r.metrics["converged"]]
    sim_rows = [r for r in good if _sl_side(r) == "simulation"]
    nums: dict = {}
    theory_ok: list[bool] = []
    sim_ok: list[bool] = []
    sim_thin: list[str] = []
    gammas = sorted({r.params["gamma"] for r in th_rows + sim_rows})
    parts = []
    for g in gammas:
        pred = -1 + 1 / (2 * g)
        nums[f"predicted_g{g}"] = pred
        fit = _sl_fit([r for r in th_rows if r.params["gamma"] == g])
        if fit is not None:
            slope, _, x, _ = fit
            nums[f"slope_g{g}"] = slope  # the theory side (finite-d state evolution)
            nums[f"n_over_d_range_g{g}"] = [float(x.min()), float(x.max())]
            theory_ok.append(abs(slope - pred) <= _SL_TOL)
            parts.append(f"γ={g}: theory slope {slope:.3f} ({'agrees' if theory_ok[-1] else 'disagrees'})")
        rs = [r for r in sim_rows if r.params["gamma"] == g]
        fit = _sl_fit(rs)
        if fit is not None:
            slope, se, x, _ = fit
            tol = max(_SL_TOL, 2 * se) if math.isfinite(se) else _SL_TOL
            seeds = min(len(v) for v in _groups(rs, ("alpha",)).values())
            nums[f"sim_slope_g{g}"] = slope
            nums[f"sim_slope_se_g{g}"] = se
            nums[f"sim_tol_g{g}"] = tol
            nums[f"sim_n_over_d_range_g{g}"] = [float(x.min()), float(x.max())]
            nums[f"sim_d_g{g}"] = rs[0].params["d"]
            sim_ok.append(abs(slope - pred) <= tol)
            if seeds < 3 or rs[0].params["d"] < 60:
                sim_thin.append(f"γ={g}: d = {rs[0].params['d']}, {seeds} seed(s)")
            parts.append(
                f"simulation slope {slope:.3f} ± {se:.3f} ({'agrees' if sim_ok[-1] else 'disagrees'})"
            )
        if f"slope_g{g}" in nums and f"sim_slope_g{g}" in nums:
            nums[f"sim_minus_theory_slope_g{g}"] = nums[f"sim_slope_g{g}"] - nums[f"slope_g{g}"]
    tol = (
        f"theory: |slope − (−1 + 1/(2γ))| <= {_SL_TOL}; simulation: the same with tolerance "
        f"max({_SL_TOL}, 2 × standard error of the slope over seeds)"
    )
    if not theory_ok and not sim_ok:
        return Verdict(
            "inconclusive", nums, "-", note + "needs three α with a positive excess per γ and side"
        )
    where = "; ".join(parts) + ". "

    def state(ok: list[bool]) -> str:
        return "not run" if not ok else "agrees" if all(ok) else "disagrees"

    sides = f"theory side {state(theory_ok)}, simulation side {state(sim_ok)}. "
    nums["theory_agrees"] = all(theory_ok) if theory_ok else None
    nums["simulation_agrees"] = all(sim_ok) if sim_ok else None
    gaps = [v for k, v in nums.items() if k.startswith("sim_minus_theory_slope")]
    if gaps:
        sides += f"Simulation and finite-d theory slopes differ by at most {max(abs(v) for v in gaps):.3f}. "
    d_th = th_rows[0].params["d"] if th_rows else None
    ctx = f"finite-d state evolution at d = {d_th}; " if d_th else ""
    noise = good[0].params.get("noise")
    note = note + where + sides + ctx + f"Δ = {noise}"
    if theory_ok and not all(theory_ok):
        return Verdict("fails", nums, tol, note)
    if sim_ok and not all(sim_ok):
        if sim_thin:
            return Verdict(
                "inconclusive",
                nums,
                tol,
                note
                + "; the simulation is too small to settle it ("
                + ", ".join(sim_thin)
                + "; full profile)",
            )
        return Verdict("fails", nums, tol, note)
    if not theory_ok or not sim_ok:
        return Verdict("inconclusive", nums, tol, note + "; the claim needs both sides")
    return Verdict("holds", nums, tol, note)


def _fig_sl(rows):
    good, _ = _ok(rows)
    fig, ax = _fig()
    drawn: set = set()
    for side, marker in (("theory", "o-"), ("simulation", "s--")):
        rs = [r for r in good if _sl_side(r) == side]
        for (g,), grs in sorted(_groups(rs, ("gamma",)).items()):
            fit = _sl_fit(grs)
            if fit is None:
                continue
            slope, se, x, y = fit
            label = "state evolution" if side == "theory" else "Adam (mean over seeds)"
            label += f", γ={g}: slope {slope:.2f}" + (f" ± {se:.2f}" if math.isfinite(se) else "")
            ax.loglog(x, y, marker, label=label)
            if g not in drawn:  # the predicted slope once per γ, through the first point
                drawn.add(g)
                pred = -1 + 1 / (2 * g)
                ax.loglog(x, y[0] * (x / x[0]) ** pred, "k:", lw=1, label=f"−1 + 1/(2γ) = {pred:.2f}")
    ax.set_xlabel("n/d (samples per dimension)")
    ax.set_ylabel("excess test error e − e0 (sum over T² entries)")
    ax.legend(fontsize=6, loc="lower left")
    return {"scaling_law": fig}


SL = Claim(
    id="highdim.scaling-law",
    kind="theorem",
    paper=PAPER,
    statement="With a power-law target (γ > 1/2) the excess test error decays like (n/d)^(−1 + 1/(2γ)) for "
    "d ≪ n ≪ d² at small λ, by finite-d state evolution and by simulation.",
    version=2,
    # the simulation grid carries the seed replicates; the deterministic theory side is an extra grid
    # with its one replicate fixed (rep = 0)
    grids={
        "quick": Grid(
            {"alpha": [0.08, 0.16, 0.32]},
            {"side": "simulation", "d": 50, "gamma": 1.0, "noise": 0.1, "lam": 1e-3, "max_steps": 2000},
            seeds=3,
            extra=[
                Grid(
                    {"alpha": [0.02, 0.04, 0.08]},
                    {"side": "theory", "d": 200, "gamma": 1.0, "noise": 0.1, "lam": 1e-3, "rep": 0},
                )
            ],
        ),
        "full": Grid(
            {"alpha": [0.02, 0.04, 0.08, 0.16, 0.32], "gamma": [0.75, 1.0, 2.0]},
            {"side": "simulation", "d": 100, "noise": 0.1, "lam": 1e-4, "max_steps": 6000},
            seeds=5,
            extra=[
                Grid(
                    {"alpha": [0.005, 0.01, 0.02, 0.04, 0.08, 0.16], "gamma": [0.75, 1.0, 2.0]},
                    {"side": "theory", "d": 500, "noise": 0.1, "lam": 1e-4, "nodes": 8192, "rep": 0},
                )
            ],
        ),
    },
    run=_run_sl,
    verdict=_verdict_sl,
    figures=_fig_sl,
)


CLAIMS: list[Claim] = [TVA, FVF, SPEC, INTERP, PR, DEC, EM, SL]
