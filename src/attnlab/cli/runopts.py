"""Options and checks shared by the commands that run claims (``claims run|stability``, ``reproduce``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from attnlab.cli.common import UsageError

__all__ = [
    "BackendOpt",
    "DeviceOpt",
    "ForceOpt",
    "OutOpt",
    "ProfileOpt",
    "RetryOpt",
    "SeedOpt",
    "SetOpt",
    "ThreadsOpt",
    "VERDICT_STYLE",
    "WorkersOpt",
    "check_common",
    "claims_table",
    "headline_line",
    "param_names",
    "parse_sets",
]

VERDICT_STYLE = {
    "holds": "bold green",
    "fails": "bold red",
    "inconclusive": "bold yellow",
    "depends": "bold blue",
}

ProfileOpt = typer.Option("quick", "--profile", help="Parameter grids: quick (laptop) or full (GPU/cluster).")
BackendOpt = typer.Option(
    "process", "--backend", help="serial | process (local pool) | ray (RAY_ADDRESS or local)."
)
WorkersOpt = typer.Option(None, "--workers", help="Worker processes (default: the number of cores).")
SeedOpt = typer.Option(0, "--seed", help="Root seed; every point's seed derives from it.")
SetOpt = typer.Option(
    None, "--set", help="Override a claim parameter: key=value (a,b,c for a list). Repeatable."
)
ForceOpt = typer.Option(False, "--force", help="Recompute points that are already stored.")
RetryOpt = typer.Option(
    False, "--retry-failed", help="Recompute stored points that failed (others are kept)."
)
OutOpt = typer.Option(Path("results"), "--out", help="Results folder (SQLite store, figures, report).")
DeviceOpt = typer.Option("cpu", "--device", help="cpu, cuda or cuda:N (bring your own CUDA torch).")
ThreadsOpt = typer.Option(
    None, "--threads", help="Threads per point: torch's and the BLAS/OpenMP pools (default: cores / workers)."
)


#: Caps of --threads and --workers: far above any machine's cores, below what exhausts the thread
#: runtime's memory (100,000 OpenMP threads) or the process table.
MAX_THREADS = 1024
MAX_WORKERS = 4096


def check_common(
    profile: str, backend: str, workers: int | None, seed: int, out: Path, threads: int | None = None
) -> None:
    from attnlab.claims import PROFILES
    from attnlab.engine import BACKENDS

    if profile not in PROFILES:
        raise UsageError("--profile", " or ".join(PROFILES), profile)
    if backend not in BACKENDS:
        raise UsageError("--backend", ", ".join(BACKENDS), backend)
    if workers is not None and workers < 1:
        raise UsageError("--workers", "an integer >= 1", workers)
    if seed < 0:
        raise UsageError("--seed", "a non-negative integer", seed)
    from attnlab.cli.common import SEED_MAX, check_out_folder

    if seed > SEED_MAX:
        raise UsageError("--seed", f"an integer <= {SEED_MAX} (2^63 - 1, the store's integer range)", seed)
    if out.exists() and not out.is_dir():
        raise UsageError("--out", "a folder (or a path to create)", str(out))
    check_out_folder("--out", out)
    if threads is not None and not 1 <= threads <= MAX_THREADS:
        raise UsageError("--threads", f"an integer in [1, {MAX_THREADS}] (threads per point)", threads)
    if workers is not None and workers > MAX_WORKERS:
        raise UsageError("--workers", f"an integer in [1, {MAX_WORKERS}]", workers)


def param_names(claim, profile: str) -> set[str]:
    """The names ``--set`` may give for ``claim``: its Params fields (or its grid's names) and rep."""
    import dataclasses

    if claim.params is not None:
        return {f.name for f in dataclasses.fields(claim.params)} | {"rep"}
    return claim.grids[profile].names() | {"rep"}


def parse_sets(sets: list[str] | None) -> dict[str, Any]:
    from attnlab.claims import parse_override

    return dict(parse_override(s) for s in (sets or []))


def claims_table(outcomes, title: str = "claims") -> Table:
    """The terminal's claims table: grade, verdict, power, seed stability, decisive or what it lacks."""
    from attnlab.report import format_numbers

    t = Table(title=title, show_lines=False, expand=False)
    t.add_column("claim", no_wrap=True)
    t.add_column("grade")
    t.add_column("verdict", no_wrap=True)
    t.add_column("power", overflow="fold", max_width=24)
    t.add_column("stability", overflow="fold", max_width=16)
    t.add_column("deciding numbers (first three; all in the report)", overflow="fold", ratio=1)
    t.add_column("s", justify="right", no_wrap=True)
    for o in outcomes:
        v = o.verdict
        power = o.power.label
        st = o.stability.label if getattr(o, "stability", None) is not None else "-"
        if o.variant:
            st = "variant"
        dec = ""
        if not o.variant:
            a = o.assessment
            dec = "[bold green]decisive[/] " if a.decisive else ""
        t.add_row(
            o.title,
            o.grade or "-",
            f"[{VERDICT_STYLE[v.status]}]{v.status}[/]",
            f"[bold magenta]{power}[/]" if o.power.cannot_fail else power,
            st,
            dec + (f"[yellow]{v.regime}[/] " if v.regime else "") + format_numbers(dict(v.numbers), 3),
            f"{o.runtime_s:.1f}",
        )
    return t


def headline_line(outcomes) -> str:
    """The decisive count per paper, for the line under the claims table."""
    from attnlab.engine.stability import headline, headline_text

    own = [o for o in outcomes if not o.variant]
    text = headline_text(headline((o.paper, o.assessment) for o in own))
    unmeasured = sum(not (o.stability and o.stability.measured) for o in own if o.grade == "evidence")
    if unmeasured:
        text += (
            f"; seed stability not stored for {unmeasured} evidence claim(s): "
            "run 'attnlab claims stability --all' on this store"
        )
    return text
