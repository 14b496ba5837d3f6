"""``attnlab claims stability``: a claim's profile under further root seeds; does its verdict hold up?"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from attnlab.cli.claimtools import dry_run
from attnlab.cli.common import SEED_MAX, JsonOpt, UsageError, emit_json, out_console
from attnlab.cli.runopts import (
    VERDICT_STYLE,
    BackendOpt,
    DeviceOpt,
    OutOpt,
    ProfileOpt,
    RetryOpt,
    SeedOpt,
    ThreadsOpt,
    WorkersOpt,
    check_common,
)
from attnlab.cli.runs import execute_run

__all__ = ["claims_stability", "MAX_SEEDS"]

#: The most further root seeds one call runs (each multiplies the profile's cost).
MAX_SEEDS = 32


def _stabilities(out: Path, ids: list[str]) -> list[dict]:
    from attnlab.engine.runner import DB_NAME
    from attnlab.engine.stability import is_seed_variant, stability_of
    from attnlab.engine.store import Store

    with Store(out / DB_NAME, readonly=True) as store:
        every = store.latest_verdicts()
    seeds = [v for v in every if is_seed_variant(v.variant)]
    rows = []
    for sv in every:
        if sv.variant or sv.claim_id not in ids:
            continue
        st = stability_of(sv, seeds)
        rows.append({"id": sv.claim_id, "verdict": sv.status, **st.to_dict()})
    return rows


def claims_stability(
    claim_id: str = typer.Argument(None, metavar="[ID]", help="A claim id (or --all)."),
    all_claims_: bool = typer.Option(False, "--all", help="Every registered claim."),
    only: str = typer.Option(
        None, "--only", help="With --all: only claims whose id starts with this prefix."
    ),
    n_seeds: int = typer.Option(
        3, "--seeds", help="Further root seeds to run: --seed + 1 … --seed + K (default 3)."
    ),
    profile: str = ProfileOpt,
    backend: str = BackendOpt,
    workers: int = WorkersOpt,
    seed: int = SeedOpt,
    retry_failed: bool = RetryOpt,
    out: Path = OutOpt,
    device: str = DeviceOpt,
    threads: int = ThreadsOpt,
    dry: bool = typer.Option(
        False, "--dry-run", help="Print the points and the cost from stored runtimes; run nothing."
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Seed stability: run a claim's profile under K further root seeds and re-decide each.

    Each seed's run is stored as the variant ``seed=N`` (resumable like any run; stored points are
    reused) and the profile's own run at --seed is completed if needed. A verdict that every seed
    repeats is labelled ``stable K+1/K+1``; otherwise ``unstable (holds 2 · fails 1 · …)``, and the
    table and report show it as inconclusive, with the per-seed outcomes, until its rule accounts for
    the spread between seeds.
    """
    from attnlab.claims import all_claims, get_claim

    if (claim_id is None) == (not all_claims_):
        raise UsageError("ID", "one claim id or --all (not both)", claim_id)
    if only is not None and not all_claims_:
        raise UsageError("--only", "to be given with --all", only)
    if not 1 <= n_seeds <= MAX_SEEDS:
        raise UsageError("--seeds", f"an integer from 1 to {MAX_SEEDS} (further root seeds)", n_seeds)
    check_common(profile, backend, workers, seed, out, threads)
    if seed + n_seeds > SEED_MAX:
        raise UsageError("--seed", f"an integer <= {SEED_MAX - n_seeds} with --seeds {n_seeds}", seed)
    claims = all_claims() if claim_id is None else [get_claim(claim_id)]
    if only is not None:
        claims = [c for c in claims if c.id.startswith(only)]
        if not only or not claims:
            raise UsageError("--only", "a prefix of at least one claim id", only)
    seeds = [seed, *range(seed + 1, seed + n_seeds + 1)]
    if dry:
        dry_run(claims, profile, seed, None, out, workers, device, json_out, seeds=seeds)
        return
    summary = execute_run(
        claims,
        profile=profile,
        backend=backend,
        workers=workers,
        seed=seed,
        sets=None,
        force=False,
        retry_failed=retry_failed,
        out=out,
        device=device,
        threads=threads,
        json_out=json_out,
        per_claim_sets=False,
        seeds=seeds,
    )
    rows = _stabilities(out, [c.id for c in claims])
    unstable = [r["id"] for r in rows if r["stable"] is False]
    if json_out:
        emit_json(
            {"seeds": seeds, "profile": profile, "claims": rows, "unstable": unstable, "summary": summary}
        )
        return
    t = Table(title=f"seed stability ({profile} profile, root seeds {seeds[0]}–{seeds[-1]})")
    for col in ("claim", "verdict at --seed", "per seed", "stability"):
        t.add_column(col, overflow="fold")
    for r in rows:
        per = ", ".join(f"{s}: {o.split('[', 1)[0]}" for s, o in r["outcomes"].items())
        style = "bold green" if r["stable"] else "bold red"
        t.add_row(r["id"], f"[{VERDICT_STYLE.get(r['verdict'], '')}]{r['verdict']}[/]", per,
                  f"[{style}]{r['label']}[/]")  # fmt: skip
    out_console.print(t)
    s = summary
    out_console.print(
        f"{s['points']} points ({s['cached']} from the store, {s['computed']} computed, "
        f"{s['failed']} failed) in {s['wall_s']:.1f} s; {len(unstable)} unstable of {len(rows)}"
    )
