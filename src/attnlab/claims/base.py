"""What a claim is: data plus two functions.

A :class:`Claim` names a statement of a paper, says which grid of parameter points checks it
(one grid per profile, ``quick`` and ``full``), what one point computes (``run``) and how the
collected rows decide it (``verdict``). ``figures`` draws the claim's figures from stored rows.
The engine (``attnlab.engine``) expands grids into points and runs them; it knows nothing about
attention. Claims know nothing about the engine.

Writing a claim::

    def _run(point: Point) -> Result:
        g = point.generator()                    # seeded from the root seed and the params
        err = ...                                # compute with point.params, point.device
        return Result(metrics={"rel_err": err}, arrays={"curve": np.array(...)})

    def _verdict(rows: list[Row]) -> Verdict:
        worst = max(r.metrics["rel_err"] for r in rows)
        return Verdict("holds" if worst < 1e-12 else "fails", {"max_rel_err": worst}, "1e-12")

    CLAIM = Claim(id="paper.name", kind="theorem", paper="A", statement="...", version=1,
                  grids={"quick": Grid({"n": [10, 100]}), "full": Grid({"n": [10, 100, 1000]}, seeds=8)},
                  run=_run, verdict=_verdict, figures=_figures)

``run`` must be a module-level function (it is sent to worker processes by reference).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from attnlab.core.seeding import canonical_json, derive_seed, generator

__all__ = [
    "KINDS",
    "PROFILES",
    "VERDICTS",
    "Claim",
    "Grid",
    "Point",
    "Result",
    "Row",
    "Verdict",
    "parse_override",
]

KINDS = ("identity", "theorem", "finding")
PROFILES = ("quick", "full")
VERDICTS = ("holds", "fails", "inconclusive")

Kind = Literal["identity", "theorem", "finding"]
Status = Literal["holds", "fails", "inconclusive"]


@dataclass(frozen=True)
class Grid:
    """A cartesian product of parameter axes, plus fixed parameters and seed replicates.

    ``axes`` maps a parameter name to the list of its values; ``fixed`` holds parameters that
    take one value; ``seeds`` replicates every point ``seeds`` times (parameter ``rep`` =
    0..seeds-1, each with its own derived seed). ``extra`` is a list of further grids whose
    points are added (a union of products, for grids that are not rectangular).
    """

    axes: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    seeds: int = 1
    extra: Sequence[Grid] = ()

    def names(self) -> set[str]:
        """All parameter names this grid (and its extras) can set."""
        out = set(self.axes) | set(self.fixed)
        for g in self.extra:
            out |= g.names()
        return out

    def expand(self, overrides: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The list of parameter dicts, in a stable order, after applying ``overrides``.

        An override replaces an axis or a fixed value; a list value becomes an axis, except for a
        fixed parameter whose value is itself a list, which the list replaces.
        ``rep`` may be overridden to an int (number of seed replicates).
        """
        overrides = dict(overrides or {})
        seeds = self.seeds
        if "rep" in overrides:
            seeds = int(overrides.pop("rep"))
        axes = {k: list(v) for k, v in self.axes.items()}
        fixed = dict(self.fixed)
        for k, v in overrides.items():
            if k not in axes and k not in fixed:
                continue  # belongs to an extra grid, or checked by the caller
            list_valued = k in fixed and isinstance(fixed[k], (list, tuple))
            axes.pop(k, None)
            fixed.pop(k, None)
            if list_valued:  # a parameter whose one value is a list: the list replaces it
                fixed[k] = v if isinstance(v, list) else [v]
            elif isinstance(v, list):
                axes[k] = v
            else:
                fixed[k] = v
        names = list(axes)
        points = []
        for combo in itertools.product(*(axes[k] for k in names)):
            base = dict(fixed)
            base.update(zip(names, combo, strict=True))
            for rep in range(seeds):
                p = dict(base)
                p["rep"] = rep
                points.append(p)
        for g in self.extra:
            points.extend(g.expand(overrides | ({"rep": seeds} if "rep" not in g.fixed else {})))
        # drop duplicates while keeping order
        seen, unique = set(), []
        for p in points:
            key = canonical_json(_jsonable(p))
            if key not in seen:
                seen.add(key)
                unique.append(p)
        return unique


@dataclass(frozen=True)
class Point:
    """One unit of work: a claim's parameters, its derived seed and where to run it."""

    claim_id: str
    profile: str
    params: Mapping[str, Any]
    seed: int
    version: int
    device: str = "cpu"

    @property
    def point_id(self) -> str:
        """sha256 of (claim id, canonical params, seed, version): the store's key."""
        import hashlib

        payload = canonical_json([self.claim_id, _jsonable(dict(self.params)), self.seed, self.version])
        return hashlib.sha256(payload.encode()).hexdigest()

    def generator(self, offset: int = 0) -> torch.Generator:
        """A torch generator seeded from this point's seed (``offset`` gives independent streams)."""
        return generator(derive_seed(self.seed, offset) if offset else self.seed, "cpu")

    def generator_on(self, device: str | None = None, offset: int = 0) -> torch.Generator:
        """As :meth:`generator`, on ``device`` (default: the point's device)."""
        seed = derive_seed(self.seed, offset) if offset else self.seed
        return generator(seed, device or self.device)

    def __getitem__(self, key: str) -> Any:
        return self.params[key]


@dataclass
class Result:
    """What ``run(point)`` returns: numbers (JSON-able scalars, lists, strings) and named arrays."""

    metrics: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    """A stored point as a verdict or a figure sees it."""

    point_id: str
    params: Mapping[str, Any]
    status: str  # "ok" or "failed"
    metrics: Mapping[str, Any]
    error: str | None = None
    runtime_s: float = 0.0
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Verdict:
    """holds / fails / inconclusive, with the numbers that decided it and the tolerance used."""

    status: Status
    numbers: Mapping[str, Any]
    tolerance: str
    note: str = ""

    def __post_init__(self) -> None:
        if self.status not in VERDICTS:
            raise ValueError(f"status: expected one of {', '.join(VERDICTS)}, got {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.status,
            "numbers": _jsonable(dict(self.numbers)),
            "tolerance": self.tolerance,
            "note": self.note,
        }


FigureFn = Callable[[Sequence[Row]], "dict[str, Any]"]


@dataclass(frozen=True)
class Claim:
    """A statement of a paper and how it is checked (see the module docstring)."""

    id: str
    kind: Kind
    paper: str
    statement: str
    version: int
    grids: Mapping[str, Grid]
    run: Callable[[Point], Result]
    verdict: Callable[[Sequence[Row]], Verdict]
    figures: FigureFn | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind: expected one of {', '.join(KINDS)}, got {self.kind!r}")
        missing = [p for p in PROFILES if p not in self.grids]
        if missing:
            raise ValueError(f"grids: expected the profiles {', '.join(PROFILES)}, missing {missing}")

    @property
    def module(self) -> str:
        return self.run.__module__

    def points(
        self,
        profile: str,
        root_seed: int = 0,
        overrides: Mapping[str, Any] | None = None,
        device: str = "cpu",
    ) -> list[Point]:
        """Expand the profile's grid into points with derived seeds."""
        if profile not in self.grids:
            raise ValueError(f"profile: expected one of {', '.join(self.grids)}, got {profile!r}")
        grid = self.grids[profile]
        overrides = dict(overrides or {})
        unknown = sorted(set(overrides) - grid.names() - {"rep"})
        if unknown:
            known = ", ".join(sorted(grid.names() | {"rep"}))
            raise ValueError(f"--set: expected a parameter of {self.id} ({known}), got {unknown[0]!r}")
        out = []
        for params in grid.expand(overrides):
            params = _jsonable(params)
            seed = derive_seed(root_seed, self.id, canonical_json(params))
            out.append(Point(self.id, profile, params, seed, self.version, device))
        return out


def parse_override(text: str) -> tuple[str, Any]:
    """Parse ``key=value`` (value as JSON when it parses, else a string; ``a,b`` is a list)."""
    import json

    if "=" not in text or not text.split("=", 1)[0].strip():
        raise ValueError(f"--set: expected key=value, got {text!r}")
    key, raw = (s.strip() for s in text.split("=", 1))

    def one(s: str) -> Any:
        try:
            return json.loads(s)
        except json.JSONDecodeError:
            return s

    if raw.startswith("["):
        value = one(raw)
    elif "," in raw:
        value = [one(s.strip()) for s in raw.split(",")]
    else:
        value = one(raw)
    return key, value


def _jsonable(obj: Any) -> Any:
    """Convert numpy/torch scalars and tuples to plain JSON types; non-finite floats to None."""
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.generic,)):
        obj = obj.item()
    if isinstance(obj, torch.Tensor) and obj.numel() == 1:
        obj = obj.item()
    if isinstance(obj, np.ndarray):
        return [_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
