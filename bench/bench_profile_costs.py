"""The full profile's cost per area from a measured sample of its points, and the error of the estimate.

Run: ``python bench/bench_profile_costs.py OUT_DIR [--minutes 20] [--per-claim 3] [--timeout 150]``

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
are priced at its first draw (the middle point), and the per-area sums of these prices are compared with
the per-area sums of the measured costs. Prints one JSON object.
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


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=1))
