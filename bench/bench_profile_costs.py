"""The full profile's cost per area from a measured sample of its points, and the error of the estimate.

Run: ``python bench/bench_profile_costs.py OUT_DIR [--minutes 20] [--per-claim 3] [--timeout 150]``
Fit: ``python bench/bench_profile_costs.py --fit SAMPLE.json [SAMPLE2.json ...] [--write-table PATH]``

Every claim's full-profile points are listed (root seed 0); up to ``--per-claim`` of them, evenly
spaced along the claim's grid (so small and large settings are both drawn), are computed one at a time
in this process with one torch thread, round robin over the claims (each claim gets its first point
before any gets a second) until ``--minutes`` have passed. Each point is stored, as a full-profile row,
in ``OUT_DIR/attnlab.sqlite`` (so ``attnlab reproduce --profile full --dry-run --out OUT_DIR`` prices
the rest from them), with its wall time (what the engine stores as ``runtime_s``) and this process's
CPU time. A point still running after ``--timeout`` seconds is stopped and counted as at least that
(censored).

The estimate is the engine's (``engine.costs``): a claim's mean stored cost per point times its points.
Its error on the sample is measured on held-out points: each claim's later draws (the ends of its grid)
are priced from its first draw (the middle point) alone, and the per-area sums of these prices are
compared with the per-area sums of the measured costs. Prints one JSON object.

``--fit`` reads samples (a claim in a later file replaces its draws from an earlier one) and prints the
held-out check twice: a constant per point (the later draws priced at the first draw's cost), and the
size models of ``engine.costs.SIZE_MODELS`` (priced at ``k · size`` with ``k`` fitted on the first draw
alone). The models' form comes from each claim's code, not from the sample; only ``k`` is fitted, so the
check holds ``k`` out, not the choice of the model. ``--write-table`` then writes
``engine/reference_costs.py``: its full table from all draws (``k`` = the draws' CPU s over their summed
size; the constant of a modelled claim = ``k`` times the mean size over its whole full grid), its quick
table kept as it is.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from pathlib import Path


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise _Timeout("point stopped at the sampling timeout")


def main(argv: list[str]) -> dict:
    import argparse

    ap = argparse.ArgumentParser()
    if argv and argv[0] == "--fit":
        ap.add_argument("--fit", nargs="+", required=True)
        ap.add_argument("--write-table", default="")
        f = ap.parse_args(argv)
        return fit([Path(x) for x in f.fit], f.write_table)
    ap.add_argument("out")
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--per-claim", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=150.0)
    ap.add_argument("--only", default="")
    a = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from attnlab import __version__
    from attnlab.claims import all_claims
    from attnlab.engine import DB_NAME, Store
    from attnlab.engine.backends import WorkItem, execute

    claims = [c for c in all_claims() if c.id.startswith(a.only)]
    plan: dict[str, list] = {}
    n_points: dict[str, int] = {}
    for c in claims:
        pts = c.points("full", 0, None, "cpu")
        n_points[c.id] = len(pts)
        k = min(a.per_claim, len(pts))
        idx = sorted({round(i * (len(pts) - 1) / max(1, k - 1)) for i in range(k)}) if k > 1 else [0]
        # the first draw of each claim is its middle point; then the two ends
        mid = len(pts) // 2
        order = [mid] + [i for i in idx if i != mid][: k - 1]
        plan[c.id] = [(c, pts[i]) for i in order]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    store = Store(out / DB_NAME)
    prov = {"attnlab": __version__, "sample": "bench_profile_costs"}
    signal.signal(signal.SIGALRM, _alarm)
    t_end = time.monotonic() + 60 * a.minutes
    samples: dict[str, list[dict]] = {cid: [] for cid in plan}
    t0w, t0c = time.monotonic(), time.process_time()
    load0 = os.getloadavg()
    try:
        for rnd in range(a.per_claim):
            for cid, todo in plan.items():
                if rnd >= len(todo) or time.monotonic() > t_end:
                    continue
                c, p = todo[rnd]
                c0, w0 = time.process_time(), time.monotonic()
                signal.setitimer(signal.ITIMER_REAL, a.timeout)
                try:
                    rec = execute(WorkItem(c.module, p, 1, prov))
                except _Timeout:
                    rec = None
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                cpu, wall = time.process_time() - c0, time.monotonic() - w0
                censored = rec is None or (rec.status == "failed" and "sampling timeout" in (rec.error or ""))
                if rec is not None and not censored:
                    store.write_point(rec)
                samples[cid].append(
                    {
                        "point_id": p.point_id,
                        "params": dict(p.params),
                        "cpu_s": cpu,
                        "wall_s": wall,
                        "censored": censored,
                        "status": None if rec is None else rec.status,
                    }  # fmt: skip
                )
                print(f"{cid}: {wall:.1f} s wall, {cpu:.1f} s CPU{' (censored)' if censored else ''}",
                      file=sys.stderr, flush=True)  # fmt: skip
    finally:
        store.close()
    total_w, total_c = time.monotonic() - t0w, time.process_time() - t0c

    def area(cid: str) -> str:
        return cid.split(".")[0]

    per_claim, areas = {}, {}
    for cid, ss in samples.items():
        if not ss:
            continue
        mean_c = sum(s["cpu_s"] for s in ss) / len(ss)
        mean_w = sum(s["wall_s"] for s in ss) / len(ss)
        per_claim[cid] = {
            "points_full": n_points[cid],
            "sampled": len(ss),
            "censored": sum(s["censored"] for s in ss),
            "cpu_s": [round(s["cpu_s"], 2) for s in ss],
            "draws": ss,
            "est_full_cpu_s": mean_c * n_points[cid],
            "est_full_wall_s_1worker": mean_w * n_points[cid],
        }
        ar = areas.setdefault(area(cid), {"claims": 0, "points_full": 0, "est_full_cpu_s": 0.0,
                                          "sampled": 0, "sample_cpu_s": 0.0, "held_out_pred_cpu_s": 0.0,
                                          "held_out_meas_cpu_s": 0.0, "censored": 0})  # fmt: skip
        ar["claims"] += 1
        ar["points_full"] += n_points[cid]
        ar["est_full_cpu_s"] += mean_c * n_points[cid]
        ar["sampled"] += len(ss)
        ar["censored"] += per_claim[cid]["censored"]
        ar["sample_cpu_s"] += sum(s["cpu_s"] for s in ss)
        if len(ss) >= 2:  # held out: the later draws priced at the claim's first draw (its middle point)
            ar["held_out_pred_cpu_s"] += ss[0]["cpu_s"] * (len(ss) - 1)
            ar["held_out_meas_cpu_s"] += sum(t["cpu_s"] for t in ss[1:])
    for ar in areas.values():
        m = ar["held_out_meas_cpu_s"]
        ar["held_out_error"] = (ar["held_out_pred_cpu_s"] - m) / m if m > 0 else math.nan
    return {
        "profile": "full",
        "per_claim": per_claim,
        "areas": areas,
        "sample_wall_s": total_w,
        "sample_cpu_s": total_c,
        "load_before": load0,
        "load_after": os.getloadavg(),
    }


def _area(cid: str) -> str:
    return cid.split(".")[0]


def fit(paths: list[Path], write_table: str = "") -> dict:
    """The held-out check of the constant and the size-model estimates on measured samples, and the
    fitted full-profile table (written to ``write_table`` when given)."""
    from attnlab.claims import all_claims
    from attnlab.engine.costs import SIZE_MODELS, point_size
    from attnlab.engine.reference_costs import REFERENCE

    claims = {c.id: c for c in all_claims()}
    draws: dict[str, list[dict]] = {}
    for path in paths:
        data = json.loads(path.read_text())
        for cid, r in data["per_claim"].items():
            if cid not in claims:
                continue
            if "draws" in r:
                draws[cid] = r["draws"]
            else:  # a sample written before the draws were kept: which draw was censored is not known
                draws[cid] = [{"cpu_s": v, "censored": r["censored"] == r["sampled"]} for v in r["cpu_s"]]
                if 0 < r["censored"] < r["sampled"]:
                    draws[cid][0]["some_censored"] = True
            if all(d["censored"] for d in draws[cid]):  # no draw finished: no measured cost, unknown
                del draws[cid]
    grid: dict[str, list] = {
        cid: [p.params for p in claims[cid].points("full", 0, None, "cpu")] for cid in draws
    }
    for cid, ds in draws.items():  # the bench's draw order: the middle point, then index 0, then the last
        pts = grid[cid]
        order = [len(pts) // 2] + [i for i in (0, len(pts) - 1) if i != len(pts) // 2]
        for j, dr in enumerate(ds):
            dr.setdefault("params", pts[order[j]] if j < len(order) else None)
    areas: dict[str, dict] = {}
    table: dict[str, float] = {}
    per_size: dict[str, float] = {}
    per_claim: dict[str, dict] = {}
    for cid, ds in sorted(draws.items()):
        cost = [float(d["cpu_s"]) for d in ds]
        sizes = [point_size(cid, d["params"]) if d["params"] is not None else None for d in ds]
        modelled = cid in SIZE_MODELS and all(z is not None and z > 0 for z in sizes)
        zero = {
            "claims": 0,
            "points_full": 0,
            "draws": 0,
            "meas": 0.0,
            "pred_constant": 0.0,
            "pred_model": 0.0,
        }
        zero |= {"est_full_cpu_s": 0.0, "est_full_cpu_s_constant": 0.0, "left_out_censored": []}
        ar = areas.setdefault(_area(cid), zero)
        censored = any(d.get("censored") or d.get("some_censored") for d in ds)
        if censored:  # a draw stopped at the timeout is a lower bound, not a measurement: not checked
            ar["left_out_censored"].append(cid)
        elif len(ds) >= 2:  # held out: the later draws priced from the first draw alone
            ar["meas"] += sum(cost[1:])
            ar["pred_constant"] += cost[0] * (len(ds) - 1)
            if modelled:
                ar["pred_model"] += sum(cost[0] * z / sizes[0] for z in sizes[1:])
            else:
                ar["pred_model"] += cost[0] * (len(ds) - 1)
            ar["draws"] += len(ds) - 1
        n_full = len(grid[cid])
        ar["claims"] += 1
        ar["points_full"] += n_full
        const = sum(cost) / len(cost)
        ar["est_full_cpu_s_constant"] += const * n_full
        if modelled:
            k = sum(cost) / sum(sizes)
            mean_size = sum(point_size(cid, p) for p in grid[cid]) / n_full
            per_size[cid] = k
            table[cid] = k * mean_size
        else:
            table[cid] = const
        ar["est_full_cpu_s"] += table[cid] * n_full
        per_claim[cid] = {"points_full": n_full, "cpu_s": [round(c, 3) for c in cost],
                          "model": modelled, "per_point_cpu_s": table[cid]}  # fmt: skip
    for ar in areas.values():
        m = ar["meas"]
        ar["held_out_error_constant"] = (ar["pred_constant"] - m) / m if m > 0 else math.nan
        ar["held_out_error_model"] = (ar["pred_model"] - m) / m if m > 0 else math.nan
    if write_table:
        _write_table(Path(write_table), REFERENCE.get("quick", {}), table, per_size)
    return {"areas": areas, "per_claim": per_claim, "per_size": per_size}


def _write_table(path: Path, quick: dict, full: dict, per_size: dict) -> None:
    old = path.read_text()
    head = old[: old.index("REFERENCE: dict")]

    def block(name: str, tab: dict) -> list[str]:
        return [f'    "{name}": {{', *(f'        "{c}": {tab[c]:.4g},' for c in sorted(tab)), "    },"]

    lines = [head.rstrip("\n"), "", "REFERENCE: dict[str, dict[str, float]] = {"]
    lines += block("quick", quick) + block("full", full) + ["}", ""]
    lines += [
        "#: CPU s per unit of ``engine.costs.SIZE_MODELS`` size, fitted on the full sample (modelled claims)",
        "PER_SIZE: dict[str, dict[str, float]] = {",
        *block("full", per_size),
        "}",
    ]
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=1))
