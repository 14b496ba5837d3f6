"""The report: ``report.html`` (self-contained) and ``report.md`` from the store only.

For every claim with a stored run, the latest run's rows decide its verdict; the claim's
``figures`` function draws from the stored metrics and arrays (nothing is recomputed). Each figure
is saved as PNG and SVG under ``<out>/figures/`` and embedded in the HTML as base64 PNG.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attnlab import __version__  # noqa: E402
from attnlab.claims import KINDS, Claim, all_claims  # noqa: E402
from attnlab.engine.runner import DB_NAME, ClaimOutcome, claim_outcome  # noqa: E402
from attnlab.engine.store import Store  # noqa: E402

__all__ = ["build_report", "collect_outcomes", "Report", "format_numbers"]

_KIND_TITLES = {
    "identity": "Identities (hold by algebra; they check the code)",
    "theorem": "Theorems (empirical tests of the papers' statements)",
    "finding": "Findings (measurements on real models against a stated reading)",
}
_PAPERS = {
    "A": "A — heads as an ensemble of Nadaraya–Watson estimators",
    "B": "B — multi-head self-attention dynamics on the sphere",
    "C": "C — single-head tied attention in high dimensions",
    "models": "real models",
}


@dataclass
class FigureFile:
    claim_id: str
    name: str
    png: Path
    svg: Path
    png_bytes: bytes


@dataclass
class Report:
    html: Path
    markdown: Path
    outcomes: list[ClaimOutcome]
    figures: list[FigureFile] = field(default_factory=list)
    figure_errors: dict[str, str] = field(default_factory=dict)


def collect_outcomes(out: str | Path, claims: Sequence[Claim] | None = None) -> list[ClaimOutcome]:
    """Verdicts of every claim with a stored run in ``<out>/attnlab.sqlite`` (registered claims only).

    Verdicts always see the same rows (with their arrays), whichever command asks.
    """
    path = Path(out) / DB_NAME
    if not path.exists():
        return []
    claims = list(claims) if claims is not None else all_claims()
    by_id = {c.id: c for c in claims}
    order = {c.id: i for i, c in enumerate(claims)}
    with Store(path) as store:
        runs = [r for r in store.latest_runs() if r.claim_id in by_id]
        outs = [claim_outcome(store, by_id[r.claim_id], r.point_ids, r.profile) for r in runs]
    return sorted(outs, key=lambda o: order[o.claim.id])


def _round(v: Any) -> Any:
    if isinstance(v, float) and math.isfinite(v) and v != 0:
        return float(f"{v:.4g}")
    if isinstance(v, dict):
        return {k: _round(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_round(x) for x in v]
    return v


def format_numbers(numbers: dict[str, Any], limit: int = 6, width: int = 70) -> str:
    """A compact ``k=v`` rendering of a verdict's deciding numbers (4 significant digits)."""

    def fmt(v: Any) -> str:
        if isinstance(v, bool) or v is None:
            return str(v).lower() if v is not None else "null"
        if isinstance(v, float):
            if v == 0 or (1e-3 <= abs(v) < 1e4):
                return f"{v:.4g}"
            return f"{v:.3e}" if math.isfinite(v) else str(v)
        if isinstance(v, (dict, list)):
            s = json.dumps(_round(v), separators=(",", ":"), ensure_ascii=False)
            return s if len(s) <= width else s[: width - 3] + "..."
        return str(v)

    items = list(numbers.items())
    text = ", ".join(f"{k}={fmt(v)}" for k, v in items[:limit])
    if len(items) > limit:
        text += f", … (+{len(items) - limit})"
    return text


def _render_figures(outcome: ClaimOutcome, fig_dir: Path) -> tuple[list[FigureFile], str | None]:
    claim = outcome.claim
    if claim.figures is None or not any(r.ok for r in outcome.rows):
        return [], None
    try:
        figs = claim.figures(outcome.rows)
    except Exception as e:  # noqa: BLE001 - a broken figure must not lose the report
        plt.close("all")
        return [], f"figure function raised {type(e).__name__}: {e}"
    files = []
    for name, fig in figs.items():
        stem = f"{claim.id}__{name}".replace("/", "_")
        png, svg = fig_dir / f"{stem}.png", fig_dir / f"{stem}.svg"
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        png.write_bytes(buf.getvalue())
        fig.savefig(svg, format="svg", bbox_inches="tight")
        plt.close(fig)
        files.append(FigureFile(claim.id, name, png, svg, buf.getvalue()))
    return files, None


def build_report(out: str | Path, claims: Sequence[Claim] | None = None) -> Report:
    """Write ``report.html``, ``report.md`` and ``figures/*.png|svg`` into ``out`` from its store."""
    out = Path(out)
    if not (out / DB_NAME).exists():
        raise ValueError(f"--out: expected a folder holding {DB_NAME}, got {str(out)!r} (nothing stored yet)")
    fig_dir = out / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    outcomes = collect_outcomes(out, claims)
    rep = Report(out / "report.html", out / "report.md", outcomes)
    per_claim: dict[str, list[FigureFile]] = {}
    for o in outcomes:
        files, err = _render_figures(o, fig_dir)
        per_claim[o.claim.id] = files
        rep.figures.extend(files)
        if err:
            rep.figure_errors[o.claim.id] = err
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rep.html.write_text(_html(outcomes, per_claim, rep.figure_errors, stamp), encoding="utf-8")
    rep.markdown.write_text(_markdown(outcomes, per_claim, rep.figure_errors, stamp, out), encoding="utf-8")
    return rep


# -- HTML ---------------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
table{border-collapse:collapse;width:100%;font-size:.9em;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:.35em .5em;vertical-align:top;text-align:left}
th{background:#f3f3f3} code{font-size:.92em}
.holds{background:#e3f6e3;font-weight:600}.fails{background:#fbe0e0;font-weight:600}
.inconclusive{background:#fdf3d6;font-weight:600}
figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee}
.note{color:#555;font-size:.92em} .err{color:#a00}
section.claim{border-top:2px solid #ddd;padding-top:.5em;margin-top:1.5em}
"""


def _e(s: Any) -> str:
    return html.escape(str(s))


def _html(outcomes, per_claim, errors, stamp) -> str:
    counts = {v: sum(o.verdict.status == v for o in outcomes) for v in ("holds", "fails", "inconclusive")}
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>attnlab report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>attnlab — claims report</h1>",
        f"<p class='note'>attnlab {__version__}, written {stamp} from the results store. "
        f"{len(outcomes)} claims: {counts['holds']} hold, {counts['fails']} fail, "
        f"{counts['inconclusive']} inconclusive.</p>",
    ]
    for kind in KINDS:
        group = [o for o in outcomes if o.claim.kind == kind]
        if not group:
            continue
        parts.append(
            f"<h2>{_e(_KIND_TITLES[kind])}</h2><table><tr><th>claim</th><th>paper</th>"
            "<th>statement</th><th>verdict</th><th>deciding numbers</th><th>tolerance</th>"
            "<th>profile</th><th>runtime (s)</th></tr>"
        )
        for o in group:
            v = o.verdict
            parts.append(
                f"<tr><td><a href='#{_e(o.claim.id)}'><code>{_e(o.claim.id)}</code></a></td>"
                f"<td>{_e(o.claim.paper)}</td><td>{_e(o.claim.statement)}</td>"
                f"<td class='{v.status}'>{v.status}</td><td>{_e(format_numbers(dict(v.numbers)))}</td>"
                f"<td>{_e(v.tolerance)}</td><td>{_e(o.profile)}</td><td>{o.runtime_s:.1f}</td></tr>"
            )
        parts.append("</table>")
    for o in outcomes:
        v = o.verdict
        parts.append(
            f"<section class='claim' id='{_e(o.claim.id)}'><h3><code>{_e(o.claim.id)}</code> "
            f"<span class='{v.status}'>&nbsp;{v.status}&nbsp;</span></h3>"
        )
        parts.append(
            f"<p><b>Paper {_e(_PAPERS.get(o.claim.paper, o.claim.paper))}</b> · kind "
            f"<i>{_e(o.claim.kind)}</i> · profile <i>{_e(o.profile)}</i> · {len(o.rows)} points "
            f"({sum(not r.ok for r in o.rows)} failed) · {o.runtime_s:.1f} s of compute</p>"
        )
        parts.append(f"<p>{_e(o.claim.statement)}</p>")
        if o.claim.description:
            parts.append(f"<p class='note'>{_e(o.claim.description)}</p>")
        if v.note:
            parts.append(f"<p class='note'><b>Why:</b> {_e(v.note)}</p>")
        parts.append(f"<p class='note'><b>Tolerance:</b> {_e(v.tolerance)}</p>")
        parts.append("<table><tr><th>deciding number</th><th>value</th></tr>")
        for k, val in v.to_dict()["numbers"].items():
            parts.append(
                f"<tr><td><code>{_e(k)}</code></td><td>{_e(format_numbers({'': val})[1:])}</td></tr>"
            )
        parts.append("</table>")
        for f in per_claim.get(o.claim.id, []):
            b64 = base64.b64encode(f.png_bytes).decode()
            parts.append(
                f"<figure><img alt='{_e(f.name)}' src='data:image/png;base64,{b64}'>"
                f"<figcaption class='note'>{_e(f.name)} (also {f.svg.name})</figcaption></figure>"
            )
        if o.claim.id in errors:
            parts.append(f"<p class='err'>{_e(errors[o.claim.id])}</p>")
        failed = [r for r in o.rows if not r.ok]
        if failed:
            parts.append("<details><summary>failed points</summary><ul>")
            for r in failed[:20]:
                first = (r.error or "").splitlines()[0] if r.error else ""
                parts.append(f"<li><code>{_e(json.dumps(dict(r.params)))}</code>: {_e(first)}</li>")
            parts.append("</ul></details>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


# -- Markdown -----------------------------------------------------------------------------------
def _md(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _markdown(outcomes, per_claim, errors, stamp, out: Path) -> str:
    lines = [
        "# attnlab — claims report",
        "",
        f"attnlab {__version__}, written {stamp} from the results store.",
        "",
    ]
    for kind in KINDS:
        group = [o for o in outcomes if o.claim.kind == kind]
        if not group:
            continue
        lines += [
            f"## {_KIND_TITLES[kind]}",
            "",
            "| claim | paper | statement | verdict | deciding numbers | tolerance | runtime (s) |",
            "|---|---|---|---|---|---|---|",
        ]
        for o in group:
            v = o.verdict
            lines.append(
                f"| `{o.claim.id}` | {o.claim.paper} | {_md(o.claim.statement)} | **{v.status}** | "
                f"{_md(format_numbers(dict(v.numbers)))} | {_md(v.tolerance)} | {o.runtime_s:.1f} |"
            )
        lines.append("")
    for o in outcomes:
        v = o.verdict
        lines += [
            f"### `{o.claim.id}` — {v.status}",
            "",
            f"Paper {_PAPERS.get(o.claim.paper, o.claim.paper)}; kind {o.claim.kind}; profile {o.profile}; "
            f"{len(o.rows)} points.",
            "",
            o.claim.statement,
            "",
        ]
        if v.note:
            lines += [f"*Why:* {v.note}", ""]
        lines += [
            f"*Tolerance:* {v.tolerance}",
            "",
            f"*Deciding numbers:* {format_numbers(dict(v.numbers), 50)}",
            "",
        ]
        for f in per_claim.get(o.claim.id, []):
            lines += [f"![{f.name}]({f.png.relative_to(out).as_posix()})", ""]
        if o.claim.id in errors:
            lines += [f"> {errors[o.claim.id]}", ""]
    return "\n".join(lines) + "\n"
