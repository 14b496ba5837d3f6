"""Seed stability and the decisive count: is a verdict the same under other root seeds, and does it decide?

Seed stability. ``attnlab claims stability`` runs a claim's profile again under further root seeds
(``base + 1 … base + K``); each run is stored as a variant named ``seed=N``. A verdict is *stable* when
the profile's own run and every seed variant of the same claim version and profile agree (a ``depends``
verdict agrees when its map agrees cell by cell), and *unstable* otherwise: an unstable verdict is shown
as inconclusive, with the per-seed outcomes, until its rule accounts for the spread between seeds.

Decisive. A verdict counts as evidence about a paper when

* its grade is ``evidence`` (not ``identity``, not ``numerics``, not undeclared);
* it holds or fails (not inconclusive, not ``depends`` on an open knob);
* it is stable over the stored seeds (stability measured, every seed agreeing);
* and it could have come out the other way at its own resolution: the smallest perturbation of a
  prediction that flips it is at most :data:`MAX_FLIP` (10%) and wider than the verdict's band, or its
  controls all came out as designed with at least one of the opposite outcome decided through the
  branch of the rule that decides the test.

Everything else is listed under what it lacks (:func:`assess`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_FLIP",
    "Assessment",
    "Stability",
    "assess",
    "headline",
    "headline_text",
    "is_seed_variant",
    "seed_of_variant",
    "seed_variant",
    "stability_of",
]

#: The largest relative perturbation of a prediction whose flip counts as resolving power.
MAX_FLIP = 0.10

_SEED_RE = re.compile(r"^seed=(\d+)$")


def seed_variant(root_seed: int) -> str:
    """The variant name of a stability run at ``root_seed``."""
    return f"seed={int(root_seed)}"


def is_seed_variant(variant: str) -> bool:
    return bool(_SEED_RE.match(variant or ""))


def seed_of_variant(variant: str) -> int | None:
    m = _SEED_RE.match(variant or "")
    return int(m.group(1)) if m else None


def _signature(status: str, cells: Iterable[Mapping[str, Any]] | None) -> str:
    """What must agree between seeds: the status, and for a map the status of every cell."""
    if status != "depends":
        return status
    return (
        "depends["
        + ", ".join(f"{c.get('knob')}={c.get('value')}:{c.get('status')}" for c in cells or ())
        + "]"
    )


@dataclass(frozen=True)
class Stability:
    """The verdict of one claim under its stored root seeds.

    ``outcomes`` maps each root seed (the profile's own run first) to its status; ``stable`` is None
    when no seed variant is stored (not measured).
    """

    outcomes: dict[int, str] = field(default_factory=dict)
    stable: bool | None = None
    base_seed: int = 0

    @property
    def measured(self) -> bool:
        return self.stable is not None

    @property
    def label(self) -> str:
        if not self.measured:
            return "not measured"
        n = len(self.outcomes)
        if self.stable:
            return f"stable {n}/{n}"
        counts: dict[str, int] = {}
        for s in self.outcomes.values():
            key = s.split("[", 1)[0]
            counts[key] = counts.get(key, 0) + 1
        return "unstable (" + " · ".join(f"{k} {v}" for k, v in counts.items()) + ")"

    @property
    def per_seed(self) -> str:
        return ", ".join(f"seed {s}: {o.split('[', 1)[0]}" for s, o in self.outcomes.items())

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "stable": self.stable,
            "base_seed": self.base_seed,
            "outcomes": {str(k): v for k, v in self.outcomes.items()},
        }


def stability_of(base: Any, seed_runs: Sequence[Any]) -> Stability:
    """Stability of ``base`` (a stored verdict of the profile's own setting) given its seed variants.

    Both are :class:`~attnlab.engine.records.StoredVerdict`-like (``status``, ``power``, ``version``,
    ``profile``, ``variant``, ``root_seed``); seed variants of another claim version or profile are
    ignored (they are stale), as are those at the base's own seed.
    """
    base_seed = int(getattr(base, "root_seed", 0) or 0)
    mine = [
        v
        for v in seed_runs
        if v.claim_id == base.claim_id
        and v.version == base.version
        and v.profile == base.profile
        and seed_of_variant(v.variant) is not None
        and seed_of_variant(v.variant) != base_seed
    ]
    outcomes = {base_seed: _signature(base.status, (base.power or {}).get("cells"))}
    for v in sorted(mine, key=lambda v: seed_of_variant(v.variant)):
        outcomes[int(seed_of_variant(v.variant))] = _signature(v.status, (v.power or {}).get("cells"))
    if len(outcomes) < 2:
        return Stability(outcomes, None, base_seed)
    return Stability(outcomes, len(set(outcomes.values())) == 1, base_seed)


@dataclass(frozen=True)
class Assessment:
    """Whether a verdict is decisive, and if not, what it lacks (one short phrase each)."""

    decisive: bool
    lacks: list[str]
    category: str  # decisive | depends | numerics | identity | inconclusive | not decisive

    def to_dict(self) -> dict[str, Any]:
        return {"decisive": self.decisive, "lacks": list(self.lacks), "category": self.category}


def _pct(e: float) -> str:
    return f"{100 * e:.3g}%"


def power_lacks(power: Mapping[str, Any], status: str) -> list[str]:
    """What a power record lacks: a flip ≤ 10% wider than the band, or controls through the branch."""
    flips = power.get("flips") or {}
    eps = [e for f in flips.values() for e in f.values() if e is not None]
    smallest = min(eps) if eps else None
    band = power.get("band")
    if smallest is not None and smallest <= MAX_FLIP and band is not None and smallest > band:
        return []
    controls = power.get("controls") or {}
    other = "fails" if status == "holds" else "holds"
    if controls and all(c.get("as_designed") for c in controls.values()):
        if any(c.get("expect") == other and c.get("same_branch") for c in controls.values()):
            return []
    why = []
    if flips:
        if smallest is None:
            why.append("no flip up to 50%")
        elif smallest > MAX_FLIP:
            why.append(f"smallest flip {_pct(smallest)} (> {_pct(MAX_FLIP)})")
        elif band is None:
            why.append(f"flip at {_pct(smallest)} but no band stated")
        else:
            why.append(f"flip at {_pct(smallest)} within its band {_pct(band)}")
    else:
        why.append("no prediction to perturb")
    if controls:
        ok = sum(bool(c.get("as_designed")) for c in controls.values())
        br = sum(bool(c.get("as_designed") and c.get("same_branch")) for c in controls.values())
        opp = sum(c.get("expect") == other for c in controls.values())
        branch = power.get("branch") or ""
        if ok < len(controls):
            why.append(f"controls {ok}/{len(controls)} as designed")
        elif not opp:
            why.append(f"no control that must come out '{other}'")
        elif not branch:
            why.append("the rule reports no branch")
        else:
            why.append(f"no control of the opposite outcome through '{branch}' ({br} through it)")
    else:
        why.append("no control")
    return ["power: " + "; ".join(why)]


def assess(grade: str, status: str, power: Mapping[str, Any], stability: Stability | None) -> Assessment:
    """Decisive or not, and what it lacks (see the module docstring)."""
    if grade == "identity":
        return Assessment(False, ["grade identity: holds by construction, checks the code"], "identity")
    lacks = []
    if grade == "numerics":
        lacks.append("grade numerics: two computations of one theory, not evidence about the paper")
    elif grade != "evidence":
        lacks.append("no grade declared")
    if stability is not None and stability.measured and not stability.stable:
        lacks.append(f"unstable over root seeds ({stability.per_seed})")
    elif status == "inconclusive":
        lacks.append("inconclusive: " + (power.get("reason") or "see its note"))
    elif status == "depends":
        lacks.append("depends on an open knob (see its map)")
    if stability is None or not stability.measured:
        lacks.append("seed stability not measured (attnlab claims stability)")
    if status in ("holds", "fails"):
        lacks += power_lacks(power, status)
    if not lacks:
        return Assessment(True, [], "decisive")
    if grade == "numerics":
        cat = "numerics"
    elif status == "depends":
        cat = "depends"
    elif status == "inconclusive" or (stability is not None and stability.measured and not stability.stable):
        cat = "inconclusive"
    else:
        cat = "not decisive"
    return Assessment(False, lacks, cat)


def headline(items: Iterable[tuple[str, Assessment]]) -> dict[str, dict[str, int]]:
    """Per paper: how many verdicts are decisive, of how many, and the other categories."""
    out: dict[str, dict[str, int]] = {}
    for paper, a in items:
        d = out.setdefault(paper, {"claims": 0, "decisive": 0})
        d["claims"] += 1
        d[a.category] = d.get(a.category, 0) + 1
    return dict(sorted(out.items()))


def headline_text(counts: Mapping[str, Mapping[str, int]]) -> str:
    """'decisive: A 4/11 · B 3/14 · C 5/14' with the rest per category."""
    parts = []
    for paper, d in counts.items():
        rest = ", ".join(f"{v} {k}" for k, v in d.items() if k not in ("claims", "decisive") and v)
        parts.append(f"{paper} {d['decisive']}/{d['claims']}" + (f" ({rest})" if rest else ""))
    return "decisive verdicts per paper: " + " · ".join(parts)
