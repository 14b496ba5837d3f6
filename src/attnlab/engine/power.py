"""Resolving power: could a verdict have come out the other way?

Two kinds of evidence, as a claim declares them:

* **predictions** — each theory-side number the verdict holds the data against is scaled by
  ``1 ± ε`` for ε in :data:`EPSILONS`, and the stored rows are decided again (nothing recomputed).
  The smallest ε that changes the verdict, in each direction, is the claim's resolving power:
  a verdict that flips at ±5% tells a right prediction from one 5% off.
* **controls** — planted variants of the setting (one named knob changed) on which the claim's own
  verdict must come out "fails" (negative control) or "holds" (positive control).

A theorem claim that holds, that no perturbation up to 50% flips and that has no negative control
coming out "fails" *cannot fail*: its verdict carries no evidence, and the table and report say so.
Symmetrically, a failing verdict with no flip and no positive control coming out "holds" *cannot
hold* (``cannot_fail`` is set for both: the verdict could not have come out the other way). An identity
holds by construction (it checks the code, not a paper). An inconclusive verdict has no power to
measure ("n/a" with its reason).

A flip is read against the verdict's own resolution: beside it the label shows the verdict's band (its
tolerance as a fraction of the prediction, ``Verdict.band``): "±5% (band 3%)". And a control counts
as exercising the rule only when the branch of the rule that decides the test decides the control too
(``Verdict.branch``): a negative control that fails because it has no data, while the test holds on an
exponent, says nothing about the exponent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from attnlab.engine.protocol import Claim, Predict, Row, Verdict

__all__ = ["EPSILONS", "Power", "resolving_power"]

#: Relative perturbations tried, smallest first.
EPSILONS = (0.01, 0.02, 0.05, 0.10, 0.25, 0.50)


@dataclass(frozen=True)
class Power:
    """The resolving power of one verdict.

    ``flips[name] = {"+": ε or None, "-": ε or None}``: the smallest relative perturbation of the
    prediction ``name`` that changes the verdict (None: none up to 50%). ``controls[name]`` gives
    the control's expected and obtained verdicts.
    """

    label: str
    cannot_fail: bool
    flips: dict[str, dict[str, float | None]] = field(default_factory=dict)
    controls: dict[str, dict[str, Any]] = field(default_factory=dict)
    base: str = ""
    reason: str = ""
    band: float | None = None
    branch: str = ""
    cells: list[dict[str, Any]] = field(default_factory=list)
    parts: dict[str, str] = field(default_factory=dict)

    @property
    def smallest_flip(self) -> float | None:
        """The smallest ε that flips the verdict, over predictions and directions (None: none)."""
        eps = [e for f in self.flips.values() for e in f.values() if e is not None]
        return min(eps) if eps else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "cannot_fail": self.cannot_fail,
            "flips": self.flips,
            "controls": self.controls,
            "base": self.base,
            "reason": self.reason,
            "band": self.band,
            "branch": self.branch,
            "cells": self.cells,
            "parts": self.parts,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Power:
        d = d or {}
        return cls(
            d.get("label", "-"),
            bool(d.get("cannot_fail", False)),
            d.get("flips", {}),
            d.get("controls", {}),
            d.get("base", ""),
            d.get("reason", ""),
            d.get("band"),
            d.get("branch", "") or "",
            list(d.get("cells", []) or []),
            dict(d.get("parts", {}) or {}),
        )


def same_branch(test: str, control: str) -> bool:
    """Whether a control's deciding branch is the test's: the same name, or, where the test holds through
    a conjunction of checks (``"atom+law+split"``: every check decided it), one of those checks, since a
    failing conjunction is named by the check that failed. No branch recorded: never the same."""
    if not test or not control:
        return False
    return control == test or control in test.split("+")


def _pct(e: float | None) -> str:
    return "none" if e is None else f"{100 * e:g}%"


def _smallest_flip(claim: Claim, rows: Sequence[Row], name: str, sign: int, base: str) -> float | None:
    for eps in EPSILONS:
        v = claim.decide(rows, Predict({name: 1.0 + sign * eps}))
        if v.status != base:
            return eps
    return None


def resolving_power(claim: Claim, rows: Sequence[Row], verdict: Verdict | None = None) -> Power:
    """Re-decide ``rows`` (test and control rows of one run) with each prediction perturbed."""
    verdict = verdict or claim.decide(rows)
    base = verdict.status
    controls: dict[str, dict[str, Any]] = {}
    for name, c in claim.controls.items():
        got = claim.decide_control(name, rows)
        if not any(r.control == name for r in rows):
            status = "missing"
        else:
            status = got.status
        same = same_branch(verdict.branch, got.branch)
        controls[name] = {
            "kind": c.kind,
            "knob": c.knob,
            "expect": c.expect,
            "got": status,
            "as_designed": status == c.expect,
            "branch": got.branch,
            "same_branch": same,
            "why": c.why,
            "numbers": dict(got.numbers),
        }
    n_ok = sum(v["as_designed"] for v in controls.values())
    ctrl_label = f"controls {n_ok}/{len(controls)}" if controls else ""
    if controls and verdict.branch:
        n_br = sum(v["as_designed"] and v["same_branch"] for v in controls.values())
        if n_br != n_ok:
            ctrl_label += f" ({n_br} through '{verdict.branch}')"
    band, branch = verdict.band, verdict.branch
    if claim.kind == "identity":
        return Power(
            "identity (holds by construction)", False, {}, controls, base, "an identity checks the code",
            band, branch,
        )  # fmt: skip
    if base in ("inconclusive", "depends"):
        reason = verdict.regime or verdict.note or base
        label = ("n/a" if base == "inconclusive" else "map") + (f" · {ctrl_label}" if ctrl_label else "")
        return Power(label, False, {}, controls, base, reason, band, branch)
    flips: dict[str, dict[str, float | None]] = {}
    for name in claim.predictions:
        flips[name] = {
            "+": _smallest_flip(claim, rows, name, +1, base),
            "-": _smallest_flip(claim, rows, name, -1, base),
        }
    up = [f["+"] for f in flips.values() if f["+"] is not None]
    down = [f["-"] for f in flips.values() if f["-"] is not None]
    e_up, e_down = (min(up) if up else None), (min(down) if down else None)
    parts = []
    if flips:
        band_txt = "" if band is None else f" (band {100 * band:.3g}%)"
        if e_up is None and e_down is None:
            parts.append("no flip ≤50%" + band_txt)
        elif e_up == e_down:
            parts.append(f"±{_pct(e_up)}" + band_txt)
        else:
            parts.append(f"+{_pct(e_up)}/−{_pct(e_down)}" + band_txt)
    if ctrl_label:
        parts.append(ctrl_label)
    # the verdict could have come out the other way if a perturbation flips it, or if a control
    # of the opposite outcome comes out as designed (a failing negative control for "holds", a
    # holding positive one for "fails")
    other = "fails" if base == "holds" else "holds"
    opposite_ok = any(v["expect"] == other and v["got"] == other for v in controls.values())
    cannot = claim.kind == "theorem" and e_up is None and e_down is None and not opposite_ok
    if cannot:
        word = "cannot fail" if base == "holds" else "cannot hold"
        label = word + (f" ({' · '.join(parts)})" if parts else "")
    elif parts:
        label = " · ".join(parts)
    else:
        label = "n/a (finding: rule stated)" if claim.kind == "finding" else "-"
    return Power(label, cannot, flips, controls, base, "", band, branch)
