"""Parameter grids, ``--set`` parsing and the JSON form of parameters (part of the claim protocol)."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnlab.core.seeding import canonical_json

__all__ = ["REP_KEY", "CONTROL_KEY", "CELL_KEY", "Grid", "jsonable", "parse_override", "variant_name"]

#: Reserved parameter names the engine adds: the seed replicate, the control a point belongs to and
#: the cell of an open knob's map (``"c=1"``) it belongs to.
REP_KEY = "rep"
CONTROL_KEY = "control"
CELL_KEY = "cell"


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

    def expand(
        self, overrides: Mapping[str, Any] | None = None, list_valued: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """The list of parameter dicts, in a stable order, after applying ``overrides``.

        An override replaces an axis or a fixed value, or adds a fixed value; a list value becomes
        an axis, except for a parameter whose one value is itself a list (``list_valued``), which the
        list replaces. ``list_valued`` names further parameters whose value is one list (a typed
        list field): a flat list given for them is one value, not an axis.
        ``rep`` may be overridden to an int (number of seed replicates).
        """
        return self._expand(dict(overrides or {}), frozenset(list_valued))

    def _expand(self, overrides: dict[str, Any], list_valued: frozenset[str]) -> list[dict[str, Any]]:
        seeds = self.seeds
        if REP_KEY in overrides:
            seeds = int(overrides.pop(REP_KEY))
        axes = {k: list(v) for k, v in self.axes.items()}
        fixed = dict(self.fixed)
        lv = set(list_valued) | {k for k, v in fixed.items() if isinstance(v, (list, tuple))}
        for k, v in overrides.items():
            axes.pop(k, None)
            fixed.pop(k, None)
            if k in lv:  # a parameter whose one value is a list: the list replaces it
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
                p[REP_KEY] = rep
                points.append(p)
        for g in self.extra:
            sub = dict(overrides)
            if REP_KEY not in g.fixed:
                sub[REP_KEY] = seeds
            points.extend(g._expand(sub, frozenset(lv)))
        seen, unique = set(), []
        for p in points:
            key = canonical_json(jsonable(p))
            if key not in seen:
                seen.add(key)
                unique.append(p)
        return unique


def variant_name(overrides: Mapping[str, Any] | None) -> str:
    """The name of a run with ``--set`` overrides ('' for the profile's own setting)."""
    if not overrides:
        return ""
    return ", ".join(
        f"{k}={json.dumps(jsonable(v), separators=(',', ':'))}" for k, v in sorted(overrides.items())
    )


def parse_override(text: str) -> tuple[str, Any]:
    """Parse ``key=value`` (value as JSON when it parses, else a string; ``a,b`` is a list)."""
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


def jsonable(obj: Any) -> Any:
    """Convert numpy/torch scalars and tuples to plain JSON types; non-finite floats to None."""
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.generic,)):
        obj = obj.item()
    if isinstance(obj, torch.Tensor) and obj.numel() == 1:
        obj = obj.item()
    if isinstance(obj, np.ndarray):
        return [jsonable(v) for v in obj.tolist()]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
