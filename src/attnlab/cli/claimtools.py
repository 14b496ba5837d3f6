"""Tools around claim runs: resolving power, dry runs, the report's screenshot and progress."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from attnlab.cli.common import JsonOpt, UsageError, emit_json, err_console, out_console
from attnlab.cli.runopts import OutOpt, check_common, param_names, parse_sets

__all__ = ["claims_power"]


def screenshot(html: Path) -> Path | None:
    """Keep a picture of the report's first screen as report.png where Chromium is installed."""
    from attnlab.report.browser import find_chromium, screenshot

    if find_chromium() is None:
        err_console.print(
            "[dim]no Chromium found: report.png not written (install chromium to get one)[/dim]"
        )
        return None
    try:
        return screenshot(html, html.with_suffix(".png"))
    except RuntimeError as e:
        err_console.print(f"[dim]report.png not written: {e}[/dim]")
        return None


def dry_run(claims, profile, seed, sets, out: Path, workers, device, json_out: bool, seeds=None) -> None:
    """Points per claim, how many are stored, and the cost of the rest from stored runtimes."""
    import os

    from attnlab.engine import DB_NAME, Store

    check_common(profile, "serial", workers, seed, out)
    overrides_all = parse_sets(sets)
    db = out / DB_NAME
    store = Store(db, readonly=True) if db.exists() else None
    rows, total_s, unknown = [], 0.0, []
    from attnlab.engine.costs import claim_costs

    # this profile's stored costs, else the reference machine's measured ones (engine.costs)
    costs, by_reference = claim_costs(
        store.mean_runtimes(profile, {c.id: c.version for c in claims}) if store else {}, profile
    )
    try:
        for c in claims:
            names = param_names(c, profile)
            mine = c.check_overrides({k: v for k, v in overrides_all.items() if k in names})
            pts = [p for s in (seeds or [seed]) for p in c.points(profile, s, mine, device)]
            ids = [p.point_id for p in pts]
            done = store.done_ids(ids, ("ok",)) if store else set()
            mean = costs.get(c.id)
            todo = len(pts) - len(done)
            est = None if mean is None else mean * todo
            if est is None and todo:
                unknown.append(c.id)
            total_s += est or 0.0
            source = None if mean is None else ("reference" if c.id in by_reference else "store")
            rows.append({"id": c.id, "points": len(pts), "stored": len(done), "to_compute": todo,
                         "mean_runtime_s": mean, "cost_source": source, "estimate_cpu_s": est})  # fmt: skip
    finally:
        if store:
            store.close()
    n_workers = workers or max(1, os.cpu_count() or 1)
    result = {
        "profile": profile,
        "claims": rows,
        "points": sum(r["points"] for r in rows),
        "to_compute": sum(r["to_compute"] for r in rows),
        "estimate_cpu_s": round(total_s, 1) if not unknown else None,
        "estimate_cpu_s_known": round(total_s, 1),
        "estimate_wall_s": round(total_s / n_workers, 1) if not unknown else None,
        "workers": n_workers,
        "unknown": unknown,
        "note": f"estimates are mean stored runtimes per point of each claim at the {profile} profile times "
        "the points left; a claim with none stored at that profile is priced at the reference machine's "
        "measured cost (cost_source 'reference', engine/reference_costs.py), else listed as unknown and "
        "the totals are then null (estimate_cpu_s_known sums the others)",
    }
    if json_out:
        emit_json(result)
        return
    t = Table(
        title=f"dry run: {result['points']} points at the {profile} profile, "
        f"{result['to_compute']} to compute"
    )
    for col in ("claim", "points", "stored", "to compute", "mean s/point", "estimate (CPU s)"):
        t.add_column(col, justify="right" if col != "claim" else "left")
    for r in rows:
        m, e = r["mean_runtime_s"], r["estimate_cpu_s"]
        ref = " (ref)" if r["cost_source"] == "reference" else ""
        t.add_row(r["id"], str(r["points"]), str(r["stored"]), str(r["to_compute"]),
                  "?" if m is None else f"{m:.2f}{ref}", "?" if e is None else f"{e:.0f}")  # fmt: skip
    out_console.print(t)
    from attnlab.engine.costs import Estimate

    left = {r["id"]: r["to_compute"] for r in rows if r["id"] in unknown}
    est = Estimate(total_s, left)
    cpu = (
        f"{total_s:.0f} CPU s" if not unknown else (f"at least {total_s:.0f} CPU s" if total_s else "unknown")
    )
    out_console.print(f"estimate: {cpu}; wall time {est.text(n_workers)} on {n_workers} worker(s)")
    if any(r["cost_source"] == "reference" and r["to_compute"] for r in rows):
        out_console.print(
            "(ref): no runtime of this claim stored at this profile; priced at the reference machine's "
            "measured cost per point (engine/reference_costs.py)"
        )


def check_dest(to: Path | None, out: Path) -> Path:
    import os

    dest = to if to is not None else out
    if dest.exists() and not dest.is_dir():
        raise UsageError("--to", "a folder (or a path to create)", str(dest))
    probe = dest if dest.exists() else dest.parent
    arg = "--to" if to is not None else "--out"
    if probe.exists() and not os.access(probe, os.W_OK):
        raise UsageError(
            arg, "a folder the report can be written to (use --to for a read-only store)", str(dest)
        )
    from attnlab.cli.common import check_out_folder

    check_out_folder(arg, dest)  # tries a file in the nearest existing folder (/proc refuses it)
    return dest


def report_progress(quiet: bool):
    """One line per figure-drawing claim on stderr (the report takes ~20 s at the quick profile)."""
    state = {"n": 0, "total": 0}

    def cb(event: str, payload: Any) -> None:
        if quiet:
            return
        if event == "start":
            state["total"] = payload
        elif event == "claim":
            state["n"] += 1
            err_console.print(f"[dim]report: {state['n']}/{state['total']} {payload}[/dim]", highlight=False)

    return cb


def _stale(claim, sv) -> dict:
    """The power table's entry for a claim whose stored run is of another version than the code's."""
    reason = f"stored run is of version {sv.version}, the claim is now version {claim.version}: re-run it"
    return {
        "id": claim.id,
        "kind": claim.kind,
        "verdict": None,
        "stored_verdict": sv.status,
        "stored_version": sv.version,
        "version": claim.version,
        "paper": claim.paper,
        "grade": claim.grade,
        "label": "stale",
        "decisive": False,
        "lacks": ["stale: " + reason],
        "category": "stale",
        "stability": {"label": "-"},
        "map": [],
        "cannot_fail": False,
        "flips": {},
        "controls": {},
        "base": None,
        "reason": reason,
    }


def claims_power(
    claim_id: str = typer.Argument(None, metavar="[ID]", help="A claim id (or --all)."),
    all_claims_: bool = typer.Option(False, "--all", help="Every claim with a stored verdict."),
    out: Path = OutOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Resolving power: re-decide the stored rows with each prediction scaled by 1 ± ε (nothing recomputed).

    For each deciding prediction, the smallest ε in {1, 2, 5, 10, 25, 50}% that flips the verdict in
    each direction; for claims with controls, whether each came out as designed. A theorem claim that
    no perturbation up to 50% flips and with no failing negative control is shown as "cannot fail".
    """
    import time as _time

    from attnlab.claims import all_claims
    from attnlab.engine.power import Power
    from attnlab.engine.runner import DB_NAME, decide_rows
    from attnlab.engine.stability import (
        Assessment,
        assess,
        headline,
        headline_text,
        is_seed_variant,
        stability_of,
    )
    from attnlab.engine.store import Store

    if (claim_id is None) == (not all_claims_):
        raise UsageError("ID", "one claim id or --all (not both)", claim_id)
    db = out / DB_NAME
    if not db.exists():
        raise UsageError("--out", f"a folder holding {DB_NAME}", str(out))
    t0 = _time.perf_counter()
    registry = {c.id: c for c in all_claims()}

    with Store(db, readonly=True) as store:
        every = store.latest_verdicts()
        if (
            claim_id is not None
            and claim_id not in registry
            and not any(v.claim_id == claim_id for v in every)
        ):
            raise UsageError("ID", "a claim id (see 'attnlab claims list')", claim_id)
        seeds = [v for v in every if is_seed_variant(v.variant)]
        stored = [v for v in every if not v.variant and (claim_id is None or v.claim_id == claim_id)]
        if claim_id is not None and not stored:
            raise UsageError("ID", f"a claim with a stored run in {out} (run it first)", claim_id)
        results = []
        for sv in stored:
            claim = registry.get(sv.claim_id)
            stab = stability_of(sv, seeds)
            if claim is not None and sv.version != claim.version:
                # rows of an older version of the claim hold what that version measured; the present rule
                # cannot re-decide them (its numbers may not exist there): say so rather than guess
                results.append(_stale(claim, sv))
                continue
            if claim is None:
                # no code for this claim here (another attnlab, or a plug-in not loaded): the stored
                # decision, as the run left it
                verdict_status, power, source = sv.status, Power.from_dict(sv.power), "store"
                grade = sv.claim.get("grade", "") or (
                    "identity" if sv.claim.get("kind") == "identity" else ""
                )
            else:
                rows = store.rows(sv.point_ids, with_arrays=True)
                v, power = decide_rows(claim, rows, sv.profile, sv.overrides)
                verdict_status, source, grade = v.status, "re-decided", claim.grade
            shown = verdict_status
            if stab.measured and not stab.stable:
                shown = "inconclusive"
            a = assess(grade, shown, power.to_dict(), stab)
            results.append(
                {
                    "id": sv.claim_id,
                    "kind": sv.claim.get("kind", claim.kind if claim else ""),
                    "paper": sv.claim.get("paper", claim.paper if claim else ""),
                    "grade": grade,
                    "verdict": shown,
                    "decided": verdict_status,
                    "stored_verdict": sv.status,
                    "stored_version": sv.version,
                    "version": claim.version if claim else sv.version,
                    "source": source,
                    "stability": stab.to_dict(),
                    "map": power.cells,
                    **power.to_dict(),
                    **a.to_dict(),
                }
            )
    elapsed = _time.perf_counter() - t0
    counts = headline((r["paper"], Assessment(r["decisive"], r["lacks"], r["category"]))
                      for r in results if r.get("label") != "stale")  # fmt: skip
    if json_out:
        emit_json({"claims": results, "decisive": counts, "elapsed_s": round(elapsed, 3), "store": str(db)})
        return
    t = Table(title=f"resolving power ({len(results)} claims, {elapsed:.1f} s)")
    for col in ("claim", "grade", "verdict", "power", "stability", "per prediction (+/−) and controls",
                "decisive, or what it lacks"):  # fmt: skip
        t.add_column(col, overflow="fold")
    for r in results:
        pct = lambda e: "none" if e is None else f"{100 * e:g}%"  # noqa: E731
        per = "; ".join(f"{k} +{pct(f['+'])}/−{pct(f['-'])}" for k, f in r["flips"].items())
        ctrl = "; ".join(
            f"{k}: {c['got']} (expect {c['expect']}"
            + (f", via {c['branch']}" if c.get("branch") else "")
            + ")"
            for k, c in r["controls"].items()
        )
        label = f"[bold magenta]{r['label']}[/]" if r["cannot_fail"] else r["label"]
        lacks = "decisive" if r.get("decisive") else "; ".join(r.get("lacks", [])) or r.get("reason", "")
        t.add_row(
            r["id"],
            r.get("grade") or "-",
            r["verdict"] or "-",
            label,
            (r.get("stability") or {}).get("label", "-"),
            "; ".join(x for x in (per, ctrl) if x) or r["reason"],
            lacks,
        )
    out_console.print(t)
    if counts:
        out_console.print(headline_text(counts))
