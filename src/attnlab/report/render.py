"""HTML and Markdown rendering of stored verdicts (no store access, no claim code).

Every deciding number is shown in full: scalars in a table, nested values as nested tables inside
collapsible details. The page opens with a verdict board (one line per claim: verdict, resolving
power, regime, runtime); tables wrap long text so that they fit the page.
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path
from typing import Any

from attnlab import __version__
from attnlab.engine.protocol import KINDS

__all__ = ["format_numbers", "render_html", "render_markdown", "plural"]

KIND_TITLES = {
    "identity": "Identities (hold by algebra; they check the code)",
    "theorem": "Theorems (empirical tests of the papers' statements)",
    "finding": "Findings (measurements on real models against a stated reading)",
}
PAPERS = {
    "A": "A — heads as an ensemble of Nadaraya–Watson estimators",
    "B": "B — multi-head self-attention dynamics on the sphere",
    "C": "C — single-head tied attention in high dimensions",
    "models": "real models",
}


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 point``, ``2 points``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def _round(v: Any) -> Any:
    if isinstance(v, float) and math.isfinite(v) and v != 0:
        return float(f"{v:.4g}")
    if isinstance(v, dict):
        return {k: _round(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_round(x) for x in v]
    return v


def _scalar(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return "null" if v is None else str(v).lower()
    if isinstance(v, float):
        if v == 0 or (1e-3 <= abs(v) < 1e4):
            return f"{v:.4g}"
        return f"{v:.3e}" if math.isfinite(v) else str(v)
    return str(v)


def format_numbers(numbers: dict[str, Any], limit: int = 6, width: int | None = 70) -> str:
    """A compact ``k=v`` rendering (4 significant digits) for terminal tables.

    ``width`` cuts long nested values (None: never cut); the report shows everything in full.
    """

    def fmt(v: Any) -> str:
        if isinstance(v, (dict, list)):
            s = json.dumps(_round(v), separators=(",", ":"), ensure_ascii=False)
            return s if width is None or len(s) <= width else s[: width - 3] + "..."
        return _scalar(v)

    items = list(numbers.items())
    text = ", ".join(f"{k}={fmt(v)}" for k, v in items[:limit])
    if len(items) > limit:
        text += f", … (+{len(items) - limit})"
    return text


def _e(s: Any) -> str:
    return html.escape(str(s))


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1280px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
table{border-collapse:collapse;width:100%;font-size:.88em;margin:.5em 0 1.2em;table-layout:fixed}
th,td{border:1px solid #ccc;padding:.3em .45em;vertical-align:top;text-align:left;overflow-wrap:anywhere}
th{background:#f3f3f3} code{font-size:.92em;overflow-wrap:anywhere}
table.nested{font-size:.95em;margin:.2em 0;table-layout:auto}
.holds{background:#e3f6e3;font-weight:600}.fails{background:#fbe0e0;font-weight:600}
.inconclusive{background:#fdf3d6;font-weight:600}.depends{background:#dde8fb;font-weight:600}.cannot{background:#f1d0f5;font-weight:600}
figure{margin:1em 0} figure img{max-width:100%;height:auto;border:1px solid #eee}
.note{color:#555;font-size:.92em} .err{color:#a00}
section.claim{border-top:2px solid #ddd;padding-top:.5em;margin-top:1.5em}
details>summary{cursor:pointer;color:#345}
table.board{table-layout:auto}
table.board th,table.board td,table.board code{overflow-wrap:normal;word-break:normal}
"""


def _breakable(s: Any) -> str:
    """Escaped text that may wrap after a dot, hyphen, comma or equals sign (``<wbr>``), never inside a
    word: a long claim id fits a narrow column without breaking "theorem" into "theore/m"."""
    import re

    return re.sub(r"([.\-,=])", r"\1<wbr>", _e(s))


def _value_html(v: Any, depth: int = 0) -> str:
    """A value in full: scalars as text, mappings and lists of mappings as nested tables."""
    if isinstance(v, dict):
        if not v:
            return "{}"
        rows = "".join(
            f"<tr><td><code>{_e(k)}</code></td><td>{_value_html(x, depth + 1)}</td></tr>"
            for k, x in v.items()
        )
        inner = f"<table class='nested'>{rows}</table>"
        if depth == 0 and len(json.dumps(v, default=str)) > 160:
            return f"<details><summary>{len(v)} entries</summary>{inner}</details>"
        return inner
    if isinstance(v, (list, tuple)):
        if v and all(isinstance(x, dict) for x in v):
            return "".join(_value_html(x, depth + 1) for x in v)
        s = ", ".join(_scalar(x) if not isinstance(x, (list, dict)) else json.dumps(_round(x)) for x in v)
        return f"[{_e(s)}]"
    return _e(_scalar(v))


def _power_cell(o) -> tuple[str, str]:
    label = o.power.label or "-"
    cls = "cannot" if o.power.cannot_fail else ""
    return label, cls


def _regime(o) -> str:
    return o.verdict.regime or ("in regime" if o.meta.get("regime") else "-")


def _stability(o) -> str:
    st = getattr(o, "stability", None)
    return st.label if st is not None else "-"


def _decisive(o) -> str:
    """'decisive', or what the verdict lacks to be (variants are not assessed)."""
    if o.variant:
        return "variant"
    a = o.assessment
    return "decisive" if a.decisive else "; ".join(a.lacks)


def headline_html(outcomes) -> str:
    from attnlab.engine.stability import headline, headline_text

    own = [o for o in outcomes if not o.variant]
    return headline_text(headline((o.paper, o.assessment) for o in own))


def _board(outcomes, variants) -> list[str]:
    parts = [
        "<h2>Verdict board</h2><table class='board'><colgroup><col style='width:22%'><col style='width:9%'>"
        "<col style='width:9%'><col style='width:18%'><col style='width:12%'><col style='width:30%'>"
        "</colgroup><tr><th>claim</th><th>grade</th><th>verdict</th><th>power</th><th>stability</th>"
        "<th>decisive, or what it lacks</th></tr>"
    ]
    for o in list(outcomes) + list(variants):
        label, cls = _power_cell(o)
        dec = _decisive(o)
        parts.append(
            f"<tr><td><a href='#{_e(o.id)}'><code>{_breakable(o.title)}</code></a></td>"
            f"<td>{_e(o.grade or '-')}</td>"
            f"<td class='{o.verdict.status}'>{o.verdict.status}</td><td class='{cls}'>{_e(label)}</td>"
            f"<td>{_e(_stability(o))}</td>"
            f"<td class='{'holds' if dec == 'decisive' else 'note'}'>{_e(dec)}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _evidence_html(o) -> list[str]:
    """Grade, parts, stability, the deciding branch and the map of an open knob."""
    p, v = o.power, o.verdict
    parts = [f"<p><b>Grade:</b> {_e(o.grade or 'undeclared')}"]
    for name, part in (o.meta.get("parts") or {}).items():
        got = (p.parts or {}).get(name)
        parts.append(
            f" · part <code>{_e(name)}</code> ({_e(part.get('grade'))}: {_e(part.get('what'))})"
            + (f": <span class='{_e(got)}'>{_e(got)}</span>" if got else "")
        )
    st = getattr(o, "stability", None)
    if st is not None:
        parts.append(f" · <b>seed stability:</b> {_e(st.label)}")
        if st.measured:
            parts.append(f" <span class='note'>({_e(st.per_seed)})</span>")
    if p.branch:
        parts.append(f" · <b>deciding branch:</b> {_e(p.branch)}")
    if p.band is not None:
        parts.append(f" · <b>band:</b> ±{100 * p.band:.3g}%")
    if o.stored_status and o.stored_status != v.status:
        parts.append(f" · stored verdict {_e(o.stored_status)}")
    parts.append("</p>")
    if not o.variant:
        a = o.assessment
        parts.append(
            "<p class='holds'>Decisive.</p>"
            if a.decisive
            else "<p class='note'><b>Not decisive:</b> " + _e("; ".join(a.lacks)) + "</p>"
        )
    if p.cells:
        knobs = o.meta.get("knobs") or {}
        parts.append(
            "<table><tr><th>open knob</th><th>value</th><th>verdict</th><th>branch</th><th>numbers</th></tr>"
        )
        for c in p.cells:
            why = (knobs.get(c.get("knob")) or {}).get("why", "")
            tag = " (test setting)" if c.get("test") else ""
            parts.append(
                f"<tr><td><code>{_e(c.get('knob'))}</code> <span class='note'>{_e(why)}</span></td>"
                f"<td>{_e(c.get('value'))}{tag}</td>"
                f"<td class='{_e(c.get('status'))}'>{_e(c.get('status'))}</td>"
                f"<td>{_e(c.get('branch') or '-')}</td><td>{_value_html(c.get('numbers', {}), 1)}</td></tr>"
            )
        parts.append("</table>")
    return parts


def _power_html(o) -> list[str]:
    p = o.power
    parts = [
        f"<p><b>Resolving power:</b> <span class='{'cannot' if p.cannot_fail else ''}'>{_e(p.label)}</span>"
    ]
    if p.reason:
        parts.append(f" <span class='note'>({_e(p.reason)})</span>")
    parts.append("</p>")
    preds = o.meta.get("predictions", {})
    if p.flips:
        parts.append(
            "<table><tr><th>prediction</th><th>what it is</th><th>smallest ε flipping (+)</th>"
            "<th>smallest ε flipping (−)</th></tr>"
        )
        for name, f in p.flips.items():
            pct = lambda e: "none ≤ 50%" if e is None else f"{100 * e:g}%"  # noqa: E731
            parts.append(
                f"<tr><td><code>{_e(name)}</code></td><td>{_e(preds.get(name, ''))}</td>"
                f"<td>{pct(f.get('+'))}</td><td>{pct(f.get('-'))}</td></tr>"
            )
        parts.append("</table>")
    if p.controls:
        parts.append(
            "<table><tr><th>setting</th><th>knob</th><th>expected</th><th>verdict</th><th>why</th>"
            "<th>deciding numbers</th></tr>"
            f"<tr><td>test</td><td>-</td><td>-</td><td class='{o.verdict.status}'>{o.verdict.status}"
            f"{_e(f' (through {p.branch})' if p.branch else '')}</td>"
            "<td>the claim's setting</td><td>(above)</td></tr>"
        )
        for name, c in p.controls.items():
            got = c.get("got", "?")
            br = c.get("branch") or ""
            thru = (
                "" if not br else f" (through {br}{'' if c.get('same_branch') else ', not the test branch'})"
            )
            parts.append(
                f"<tr><td>{_e(c.get('kind'))} control <code>{_e(name)}</code></td>"
                f"<td><code>{_e(c.get('knob'))}</code></td><td>{_e(c.get('expect'))}</td>"
                f"<td class='{got}'>{_e(got)}{_e(thru)}</td>"
                f"<td>{_e(c.get('why'))}</td><td>{_value_html(c.get('numbers', {}))}</td></tr>"
            )
        parts.append("</table>")
    return parts


def render_html(outcomes, variants, per_claim, errors, stamp, failed_points=None, not_testable=None) -> str:
    counts = {
        v: sum(o.verdict.status == v for o in outcomes) for v in ("holds", "fails", "inconclusive", "depends")
    }
    cannot = sum(o.power.cannot_fail for o in outcomes)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        "<title>attnlab report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>attnlab — claims report</h1>",
        f"<p class='note'>attnlab {__version__}, written {stamp} from the results store alone. "
        f"{plural(len(outcomes), 'claim')}: {counts['holds']} hold, {counts['fails']} fail, "
        f"{counts['inconclusive']} inconclusive, {counts['depends']} depend on an open knob; "
        f"{cannot} could not have come out the other way "
        "('cannot fail' or 'cannot hold': no perturbation of their predictions up to 50% and no control "
        f"of the opposite outcome changes them). {plural(len(variants), 'variant')} "
        "(runs with overrides) are shown beside their claims.</p>",
        f"<p><b>{_e(headline_html(outcomes))}</b>. A verdict is decisive when its grade is evidence, it is "
        "stable over the stored root seeds, and either a perturbation of its prediction of at most 10% "
        "(wider than its band) flips it or its controls come out as designed through the branch of the rule "
        "that decides it; the board says what every other verdict lacks.</p>",
    ]
    parts += _board(outcomes, variants)
    for kind in KINDS:
        group = [o for o in outcomes if o.kind == kind]
        if not group:
            continue
        parts.append(
            f"<h2>{_e(KIND_TITLES[kind])}</h2><table><colgroup><col style='width:20%'><col style='width:6%'>"
            "<col style='width:40%'><col style='width:9%'><col style='width:17%'><col style='width:8%'>"
            "</colgroup><tr><th>claim</th><th>paper</th><th>statement</th><th>verdict</th><th>power</th>"
            "<th>version</th></tr>"
        )
        for o in group:
            label, cls = _power_cell(o)
            parts.append(
                f"<tr><td><a href='#{_e(o.id)}'><code>{_e(o.id)}</code></a></td><td>{_e(o.paper)}</td>"
                f"<td>{_e(o.statement)}</td><td class='{o.verdict.status}'>{o.verdict.status}</td>"
                f"<td class='{cls}'>{_e(label)}</td><td>{o.version}</td></tr>"
            )
        parts.append("</table>")
    by_claim: dict[str, list] = {}
    for v in variants:
        by_claim.setdefault(v.id, []).append(v)
    for o in outcomes:
        parts += _section_html(o, per_claim.get(o.id, []), errors.get(o.id), by_claim.get(o.id, []))
        failed = (failed_points or {}).get(o.id)
        if failed:
            parts.insert(len(parts) - 1, "<details><summary>failed points</summary><ul>")
            for params, first in failed:
                parts.insert(len(parts) - 1, f"<li><code>{_e(json.dumps(params))}</code>: {_e(first)}</li>")
            parts.insert(len(parts) - 1, "</ul></details>")
    for cid, vs in by_claim.items():
        if cid not in {o.id for o in outcomes}:
            for v in vs:
                parts += _section_html(v, [], None, [])
    if not_testable:
        parts.append(
            "<h2>Not testable from the statements</h2><table><colgroup><col style='width:12%'>"
            "<col style='width:28%'><col style='width:60%'></colgroup>"
            "<tr><th>area</th><th>statement</th><th>why</th></tr>"
        )
        for area, items in not_testable.items():
            for what, why in items.items():
                parts.append(f"<tr><td>{_e(area)}</td><td>{_e(what)}</td><td>{_e(why)}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _section_html(o, figures, error, variants) -> list[str]:
    v = o.verdict
    parts = [
        f"<section class='claim' id='{_e(o.id)}'><h3><code>{_e(o.title)}</code> "
        f"<span class='{v.status}'>&nbsp;{v.status}&nbsp;</span></h3>",
        f"<p><b>Paper {_e(PAPERS.get(o.paper, o.paper))}</b> · kind <i>{_e(o.kind)}</i> · profile "
        f"<i>{_e(o.profile)}</i>{' · variant <i>' + _e(o.variant) + '</i>' if o.variant else ''} · "
        f"claim version {o.version} · {plural(o.points, 'point')} ({o.failed} failed"
        f"{', ' + str(o.missing) + ' missing' if o.missing else ''}) · {o.runtime_s:.1f} s of compute</p>",
        f"<p>{_e(o.statement)}</p>",
    ]
    if o.meta.get("description"):
        parts.append(f"<p class='note'>{_e(o.meta['description'])}</p>")
    if o.meta.get("regime"):
        parts.append(f"<p class='note'><b>Regime:</b> {_e(o.meta['regime'])}</p>")
    if v.regime:
        parts.append(f"<p class='note'><b>Outside the regime / not resolved:</b> {_e(v.regime)}</p>")
    if v.note:
        parts.append(f"<p class='note'><b>Why:</b> {_e(v.note)}</p>")
    parts.append(f"<p class='note'><b>Tolerance:</b> {_e(v.tolerance)}</p>")
    parts += _evidence_html(o)
    parts += _power_html(o)
    parts.append(
        "<table><colgroup><col style='width:25%'><col style='width:75%'></colgroup>"
        "<tr><th>deciding number</th><th>value</th></tr>"
    )
    for k, val in v.to_dict()["numbers"].items():
        parts.append(f"<tr><td><code>{_e(k)}</code></td><td>{_value_html(val)}</td></tr>")
    parts.append("</table>")
    for f in figures:
        b64 = base64.b64encode(f.png_bytes).decode()
        parts.append(
            f"<figure><img alt='{_e(f.name)}' src='data:image/png;base64,{b64}'>"
            f"<figcaption class='note'>{_e(f.name)} (also {_e(f.svg.name)})</figcaption></figure>"
        )
    if error:
        parts.append(f"<p class='err'>{_e(error)}</p>")
    for var in variants:
        parts.append(
            f"<details open><summary>variant <code>{_e(var.variant)}</code>: "
            f"<span class='{var.verdict.status}'>{var.verdict.status}</span> · power {_e(var.power.label)}"
            f"</summary><p class='note'>{_e(var.verdict.note)}</p>"
            f"{_value_html(dict(var.verdict.numbers), 1)}</details>"
        )
    parts.append("</section>")
    return parts


def _md(s: Any) -> str:
    """Stored text as Markdown text: HTML escaped (a Markdown renderer passes raw HTML through, so a
    stored ``<script>`` would run), link brackets and table bars escaped, on one line."""
    text = html.escape(" ".join(str(s).split()), quote=False)
    return text.replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")


def _md_code(s: Any) -> str:
    """Stored text inside a code span (shown literally): no backtick that would end it, one line."""
    return " ".join(str(s).split()).replace("`", "'").replace("|", "\\|")


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text`` (which cannot close it early)."""
    import re

    longest = max((len(m) for m in re.findall("`+", text)), default=0)
    return "`" * max(3, longest + 1)


def render_markdown(outcomes, variants, per_claim, errors, stamp, out: Path, not_testable=None) -> str:
    lines = [
        "# attnlab — claims report",
        "",
        f"attnlab {__version__}, written {stamp} from the results store alone.",
        "",
        f"**{_md(headline_html(outcomes))}**",
        "",
        "| claim | grade | verdict | power | stability | decisive, or what it lacks | runtime (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in list(outcomes) + list(variants):
        lines.append(
            f"| `{_md_code(o.title)}` | {o.grade or '-'} | **{o.verdict.status}** | {_md(o.power.label)} | "
            f"{_md(_stability(o))} | {_md(_decisive(o))} | {o.runtime_s:.1f} |"
        )
    lines.append("")
    for o in outcomes:
        v = o.verdict
        lines += [
            f"## `{_md_code(o.id)}` — {v.status}",
            "",
            f"Paper {PAPERS.get(o.paper, o.paper)}; kind {o.kind}; profile {o.profile}; claim version "
            f"{o.version}; {plural(o.points, 'point')}; grade {o.grade or 'undeclared'}; power: "
            f"{o.power.label}; stability: {_stability(o)}"
            + (f"; deciding branch {o.power.branch}" if o.power.branch else "")
            + ".",
            "",
            (
                "Decisive."
                if o.assessment.decisive
                else "Not decisive: " + _md("; ".join(o.assessment.lacks)) + "."
            ),
            "",
            _md(o.statement),
            "",
        ]
        if v.regime:
            lines += [f"*Outside the regime / not resolved:* {_md(v.regime)}", ""]
        if v.note:
            lines += [f"*Why:* {_md(v.note)}", ""]
        numbers = json.dumps(v.to_dict()["numbers"], indent=1, ensure_ascii=False, default=str)
        fence = _fence(numbers)
        lines += [f"*Tolerance:* {_md(v.tolerance)}", "", "*Deciding numbers:*", "", fence + "json"]
        lines.append(numbers)
        lines += [fence, ""]
        for f in per_claim.get(o.id, []):
            lines += [f"![{_md(f.name)}]({f.png.relative_to(out).as_posix()})", ""]
        if o.id in errors:
            lines += [f"> {_md(errors[o.id])}", ""]
    if not_testable:
        lines += ["## Not testable from the statements", "", "| area | statement | why |", "|---|---|---|"]
        for area, items in not_testable.items():
            lines += [f"| {_md(area)} | {_md(what)} | {_md(why)} |" for what, why in items.items()]
        lines.append("")
    return "\n".join(lines) + "\n"
