"""Points, results and rows: a unit of work, what it computes, and a stored point as a verdict sees it."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnlab.core.seeding import canonical_json, derive_seed, generator
from attnlab.engine.grid import CELL_KEY, CONTROL_KEY, jsonable

__all__ = ["Point", "Result", "Row"]


# ------------------------------------------------------------------------------------- points
@dataclass(frozen=True)
class Point:
    """One unit of work: a claim's parameters, its derived seed and where to run it."""

    claim_id: str
    profile: str
    params: Mapping[str, Any]
    seed: int
    version: int
    device: str = "cpu"
    params_cls: type | None = None

    @property
    def point_id(self) -> str:
        """sha256 of (claim id, canonical params, seed, version): the store's key."""
        payload = canonical_json([self.claim_id, jsonable(dict(self.params)), self.seed, self.version])
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def p(self) -> Any:
        """The parameters as the claim's ``Params`` instance (without ``rep`` and ``control``)."""
        if self.params_cls is None:
            raise AttributeError(f"{self.claim_id} declares no Params dataclass")
        names = {f.name for f in dataclasses.fields(self.params_cls)}
        return self.params_cls(**{k: v for k, v in self.params.items() if k in names})

    @property
    def control(self) -> str:
        """The control this point belongs to ('' for the test setting)."""
        return str(self.params.get(CONTROL_KEY, ""))

    @property
    def cell(self) -> str:
        """The cell of an open knob's map this point belongs to ('' for the test setting)."""
        return str(self.params.get(CELL_KEY, ""))

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

    @property
    def control(self) -> str:
        return str(self.params.get(CONTROL_KEY, ""))

    @property
    def cell(self) -> str:
        """The knob cell (``"c=1"``) this row belongs to; '' for the test setting and controls."""
        return str(self.params.get(CELL_KEY, ""))
