"""``attnlab results list|export``: what the store holds."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import typer
from rich.table import Table

from attnlab.cli.common import JsonOpt, UsageError, check_out_file, emit_json, out_console

app = typer.Typer(help="List or export stored rows.", no_args_is_help=True)

OutOpt = typer.Option(Path("results"), "--out", help="Results folder holding attnlab.sqlite.")


def _points(out: Path, claim: str | None):
    from attnlab.engine import DB_NAME, Store

    path = out / DB_NAME
    if not path.exists():
        raise UsageError("--out", f"a folder holding {DB_NAME}", str(out))
    with Store(path, readonly=True) as s:
        rows = s.all_points(claim)
    if claim and not rows:
        from attnlab.claims import all_claims

        known = {c.id for c in all_claims()}
        raise UsageError(
            "--claim",
            "a claim id with stored points" + ("" if claim in known else " (see 'attnlab claims list')"),
            claim,
        )
    return rows


@app.command("list")
def results_list(
    out: Path = OutOpt,
    claim: str = typer.Option(None, "--claim", help="Only this claim id."),
    json_out: bool = JsonOpt,
) -> None:
    """Stored points per claim and profile (counts, failures, compute time)."""
    rows = _points(out, claim)
    groups: dict[tuple[str, str], dict] = {}
    for r in rows:
        g = groups.setdefault(
            (r["claim_id"], r["profile"]),
            {"claim_id": r["claim_id"], "profile": r["profile"], "points": 0, "failed": 0, "runtime_s": 0.0},
        )
        g["points"] += 1
        g["failed"] += r["status"] != "ok"
        g["runtime_s"] += r["runtime_s"] or 0.0
    if json_out:
        emit_json(
            {"store": str(out / "attnlab.sqlite"), "groups": list(groups.values()), "points": len(rows)}
        )
        return
    t = Table(title=f"{len(rows)} stored points in {out}")
    for col in ("claim", "profile", "points", "failed", "compute (s)"):
        t.add_column(col)
    for g in groups.values():
        t.add_row(g["claim_id"], g["profile"], str(g["points"]), str(g["failed"]), f"{g['runtime_s']:.1f}")
    out_console.print(t)


@app.command("export")
def results_export(
    csv_path: Path = typer.Option(..., "--csv", help="Write one CSV row per stored point here."),
    out: Path = OutOpt,
    claim: str = typer.Option(None, "--claim", help="Only this claim id."),
    json_out: bool = JsonOpt,
) -> None:
    """Export stored points (params and metrics flattened to columns) as CSV."""
    if csv_path.exists() and csv_path.is_dir():
        raise UsageError("--csv", "a file path", str(csv_path))
    if not csv_path.parent.exists():
        raise UsageError("--csv", "a path in an existing folder", str(csv_path))
    check_out_file("--csv", csv_path)
    rows = _points(out, claim)
    flat = []
    for r in rows:
        d = {
            k: r[k]
            for k in (
                "point_id",
                "claim_id",
                "profile",
                "seed",
                "version",
                "status",
                "runtime_s",
                "host",
                "started",
                "ended",
            )
        }
        d.update({f"param.{k}": _cell(v) for k, v in r["params"].items()})
        d.update({f"metric.{k}": _cell(v) for k, v in r["metrics"].items()})
        d["error"] = (r["error"] or "").splitlines()[0] if r["error"] else ""
        flat.append(d)
    cols: list[str] = []
    for d in flat:
        cols.extend(k for k in d if k not in cols)
    try:
        with open(csv_path, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            w.writerows(flat)
    except OSError as e:  # a full disk (ENOSPC, /dev/full), a quota: the user's path, status 2
        why = (e.strerror or type(e).__name__).lower()
        raise UsageError("--csv", f"a path that can be written ({why})", str(csv_path)) from None
    if json_out:
        emit_json({"csv": str(csv_path), "rows": len(flat), "columns": len(cols)})
    else:
        out_console.print(f"wrote {len(flat)} rows × {len(cols)} columns to {csv_path}")


def _cell(v):
    return json.dumps(v) if isinstance(v, (list, dict)) else v
