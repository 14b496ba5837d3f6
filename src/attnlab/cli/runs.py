"""``attnlab claims list|run``, ``attnlab reproduce`` and ``attnlab report``: running claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from attnlab.cli import claimtools
from attnlab.cli.claimtools import check_dest, report_progress, screenshot
from attnlab.cli.common import JsonOpt, UsageError, check_device, emit_json, err_console, out_console
from attnlab.cli.runopts import (
    BackendOpt,
    DeviceOpt,
    ForceOpt,
    OutOpt,
    ProfileOpt,
    RetryOpt,
    SeedOpt,
    SetOpt,
    ThreadsOpt,
    WorkersOpt,
    check_common,
    claims_table,
    headline_line,
    param_names,
    parse_sets,
)

claims_app = typer.Typer(help="List and run the claims of the three papers.", no_args_is_help=True)


class _Bar:
    """A rich progress bar on stderr, one tick per finished point."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.progress: Progress | None = None
        self.task = None

    def __call__(self, event: str, payload: Any) -> None:
        if self.quiet:
            return
        if event == "start":
            total, todo = payload["total"], payload["todo"]
            err_console.print(f"[dim]{total} points: {total - todo} stored already, {todo} to compute[/dim]")
            from attnlab.engine.costs import Eta

            # the ETA prices the points left of each claim at its stored cost (engine.costs)
            self.eta = Eta(
                payload.get("by_claim", {}),
                payload.get("cost", {}),
                payload.get("workers", 1),
                cap=payload.get("cpu_slots"),
            )
            if todo and not err_console.is_terminal:  # a log: one line every ~10 s (done/total, rate, ETA)
                from attnlab.cli.common import LogTicker

                self.ticker = LogTicker("computing", todo, unit="points", eta=self.eta.text)
            elif todo:
                self.progress = Progress(
                    TextColumn("[bold]{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    TextColumn("{task.fields[eta]}"),
                    TextColumn("{task.fields[last]}"),
                    console=err_console,
                    transient=False,
                )
                self.progress.start()
                self.task = self.progress.add_task("computing", total=todo, last="", eta=self.eta.text())
        if event == "point" and getattr(self, "eta", None) is not None:
            self.eta.done(payload.claim_id, payload.runtime_s or 0.0, getattr(payload, "cpu_s", None))
        if event == "point" and getattr(self, "ticker", None) is not None:
            self.ticker.update(advance=1, description=f"computing (last: {payload.claim_id})")
        elif event == "point" and self.progress is not None:
            mark = "" if payload.status == "ok" else " [red]failed[/red]"
            self.progress.update(self.task, advance=1, last=f"{payload.claim_id}{mark}", eta=self.eta.text())

    def close(self) -> None:
        if getattr(self, "ticker", None) is not None:
            self.ticker.close(final=True)
            self.ticker = None
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def execute_run(
    claims,
    *,
    profile,
    backend,
    workers,
    seed,
    sets,
    force,
    retry_failed,
    out,
    device,
    threads,
    json_out,
    per_claim_sets: bool,
    seeds: list[int] | None = None,
) -> dict[str, Any]:
    """Run ``claims``, then return the summary and the outcomes (shared by run and reproduce)."""
    from attnlab.cli import signals
    from attnlab.engine import run_claims
    from attnlab.engine.backends import WorkerDied
    from attnlab.engine.store import StoreFull

    check_common(profile, backend, workers, seed, out, threads)
    device = check_device(device)
    overrides_all = parse_sets(sets)
    overrides: dict[str, dict[str, Any]] = {}
    if overrides_all:
        used: set[str] = set()
        for c in claims:
            names = param_names(c, profile)
            mine = {k: v for k, v in overrides_all.items() if per_claim_sets or k in names}
            if mine:
                overrides[c.id] = c.check_overrides(mine)  # names and types against Params
                used |= set(mine) & names
        unused = sorted(set(overrides_all) - used)
        if unused and not per_claim_sets:
            raise UsageError("--set", "a parameter of at least one claim", unused[0])
    for c in claims:  # every point's work within its claim's COSTS, before the store is opened
        c.points(profile, seed, overrides.get(c.id), device)
    bar = _Bar(quiet=False)
    try:
        summary = run_claims(
            claims,
            profile=profile,
            out=out,
            backend=backend,
            workers=workers,
            root_seed=seed,
            overrides=overrides,
            force=force,
            retry_failed=retry_failed,
            device=device,
            threads=threads,
            progress=bar,
            seeds=seeds,
        )
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (cli.signals): 130 or 143
        bar.close()
        raise typer.Exit(signals.report_interrupted(out, e)) from None
    except WorkerDied as e:
        bar.close()
        if signals.terminated():  # the workers died of the SIGTERM that stops this run
            raise typer.Exit(signals.report_interrupted(out)) from None
        err_console.print(f"error: {e}; finished points are stored in {out}; rerun to resume")
        raise typer.Exit(1) from None
    except StoreFull as e:  # one line: how many points are stored and how to resume
        bar.close()
        raise typer.Exit(signals.report_disk_full(e)) from None
    finally:
        bar.close()
    result = summary.to_dict()
    from attnlab.engine.protocol import variant_name

    result["variants"] = {cid: variant_name(ov) for cid, ov in overrides.items()}
    return result


@claims_app.command("list")
def claims_list(json_out: bool = JsonOpt) -> None:
    """List every registered claim: id, kind, paper, statement and grid sizes."""
    from attnlab.claims import all_claims

    claims = all_claims()
    if json_out:
        emit_json(
            {
                "claims": [
                    {
                        "id": c.id,
                        "kind": c.kind,
                        "paper": c.paper,
                        "statement": c.statement,
                        "grade": c.grade,
                        "parts": {k: {"grade": p.grade, "what": p.what} for k, p in c.parts.items()},
                        "knobs": {
                            k: {"why": kb.why, "values": {pr: kb.values_for(pr) for pr in c.grids}}
                            for k, kb in c.knobs.items()
                        },
                        "version": c.version,
                        "points": {p: len(c.points(p)) for p in c.grids},
                    }
                    for c in claims
                ]
            }
        )
        return
    t = Table(title=f"{len(claims)} claims")
    for col in ("id", "kind", "grade", "paper", "points quick/full", "open knobs", "statement"):
        t.add_column(col, overflow="fold")
    for c in claims:
        knobs = "; ".join(f"{k} ∈ {kb.values_for('full')}" for k, kb in c.knobs.items())
        t.add_row(
            c.id,
            c.kind,
            c.grade or "undeclared",
            c.paper,
            f"{len(c.points('quick'))}/{len(c.points('full'))}",
            knobs or "-",
            c.statement,
        )
    out_console.print(t)


@claims_app.command("run")
def claims_run(
    claim_id: str = typer.Argument(..., metavar="ID", help="A claim id (see 'attnlab claims list')."),
    profile: str = ProfileOpt,
    backend: str = BackendOpt,
    workers: int = WorkersOpt,
    seed: int = SeedOpt,
    sets: list[str] = SetOpt,
    force: bool = ForceOpt,
    retry_failed: bool = RetryOpt,
    out: Path = OutOpt,
    device: str = DeviceOpt,
    threads: int = ThreadsOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Run one claim's grid (stored points are skipped) and print its verdict."""
    from attnlab.claims import get_claim

    claim = get_claim(claim_id)
    summary = execute_run(
        [claim],
        profile=profile,
        backend=backend,
        workers=workers,
        seed=seed,
        sets=sets,
        force=force,
        retry_failed=retry_failed,
        out=out,
        device=device,
        threads=threads,
        json_out=json_out,
        per_claim_sets=True,
    )
    outcome = _latest(out, claim.id, summary.get("variants", {}).get(claim.id, ""))
    if json_out:
        emit_json({"summary": summary, "claim": outcome.to_dict(), "store": str(out / "attnlab.sqlite")})
        return
    title = f"{claim.id} ({profile}" + (f"; variant {outcome.variant})" if outcome.variant else ")")
    out_console.print(claims_table([outcome], title=title))
    if outcome.verdict.note:
        out_console.print(f"[dim]{outcome.verdict.note}[/dim]")


def _latest(out: Path, claim_id: str, variant: str):
    from attnlab.report import collect_outcomes

    return next(o for o in collect_outcomes(out, variants=True) if o.id == claim_id and o.variant == variant)


def reproduce(
    profile: str = ProfileOpt,
    backend: str = BackendOpt,
    workers: int = WorkersOpt,
    seed: int = SeedOpt,
    sets: list[str] = SetOpt,
    force: bool = ForceOpt,
    retry_failed: bool = RetryOpt,
    out: Path = OutOpt,
    device: str = DeviceOpt,
    threads: int = ThreadsOpt,
    only: str = typer.Option(None, "--only", help="Only claims whose id starts with this prefix."),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Print the points per claim and a cost estimate from stored runtimes; run nothing.",
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Run every claim, write report.html / report.md / figures, and print the claims table."""
    from attnlab.claims import all_claims
    from attnlab.report import build_report

    claims = all_claims()
    if only:
        claims = [c for c in claims if c.id.startswith(only)]
        if not claims:
            raise UsageError("--only", "a prefix of at least one claim id", only)
    if dry_run:
        claimtools.dry_run(claims, profile, seed, sets, out, workers, device, json_out)
        return
    summary = execute_run(
        claims,
        profile=profile,
        backend=backend,
        workers=workers,
        seed=seed,
        sets=sets,
        force=force,
        retry_failed=retry_failed,
        out=out,
        device=device,
        threads=threads,
        json_out=json_out,
        per_claim_sets=False,
    )

    rep = build_report(out, progress=report_progress(json_out))
    shot = None if json_out else screenshot(rep.html)
    if shot is not None:
        err_console.print(f"[dim]report screenshot: {shot}[/dim]")
    if json_out:
        emit_json(
            {
                "summary": summary,
                "claims": [o.to_dict() for o in rep.outcomes],
                "variants": [o.to_dict() for o in rep.variants],  # --set runs, as `report --json`
                "report": {"html": str(rep.html), "markdown": str(rep.markdown), "figures": len(rep.figures)},
            }
        )
        return
    out_console.print(claims_table(rep.outcomes + rep.variants, title=f"attnlab claims ({profile} profile)"))
    out_console.print(headline_line(rep.outcomes))
    s = summary
    out_console.print(
        f"{s['points']} points ({s['cached']} from the store, {s['computed']} computed, "
        f"{s['failed']} failed) "
        f"in {s['wall_s']:.1f} s · report: {rep.html} · {rep.markdown} · store: {out / 'attnlab.sqlite'}"
    )


def report(
    out: Path = OutOpt,
    to: Path = typer.Option(
        None, "--to", help="Write the report into this folder instead (for a read-only, archived store)."
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Rebuild report.html / report.md / figures from the store (nothing is recomputed)."""
    from attnlab.report import build_report

    dest = check_dest(to, out)
    rep = build_report(out, dest, progress=report_progress(json_out))
    if json_out:
        emit_json(
            {
                "html": str(rep.html),
                "markdown": str(rep.markdown),
                "figures": len(rep.figures),
                "claims": [o.to_dict() for o in rep.outcomes],
                "variants": [o.to_dict() for o in rep.variants],
            }
        )
        return
    out_console.print(claims_table(rep.outcomes + rep.variants, title="attnlab claims (from the store)"))
    out_console.print(headline_line(rep.outcomes))
    out_console.print(f"report: {rep.html} · {rep.markdown}")
