"""The claim registry: one package per area (``claims/<area>/<name>.py``, one claim per file),
each package exporting ``CLAIMS``. The protocol a claim implements lives in ``attnlab.engine.protocol``.

Extra claim modules (a user's own, or test claims) are added with the environment variable
``ATTNLAB_EXTRA_CLAIMS`` (comma-separated importable module names).
"""

from __future__ import annotations

import importlib
import os

from attnlab.engine.protocol import (
    KINDS,
    PROFILES,
    VERDICTS,
    Claim,
    Control,
    Grid,
    Point,
    Predict,
    Result,
    Row,
    Verdict,
    parse_override,
)

__all__ = [
    "AREA_MODULES",
    "KINDS",
    "PROFILES",
    "VERDICTS",
    "Claim",
    "Control",
    "Predict",
    "Grid",
    "Point",
    "Result",
    "Row",
    "Verdict",
    "all_claims",
    "get_claim",
    "parse_override",
]

#: The paper areas, in report order.
AREA_MODULES = (
    "attnlab.claims.ensemble",
    "attnlab.claims.flow",
    "attnlab.claims.highdim",
    "attnlab.claims.models",
)


def _modules() -> list[str]:
    extra = [m.strip() for m in os.environ.get("ATTNLAB_EXTRA_CLAIMS", "").split(",") if m.strip()]
    return list(AREA_MODULES) + extra


def all_claims() -> list[Claim]:
    """Every registered claim, in report order (ids are unique)."""
    out: list[Claim] = []
    seen: set[str] = set()
    for name in _modules():
        mod = importlib.import_module(name)
        for c in mod.CLAIMS:
            if c.id in seen:
                raise RuntimeError(f"claim id {c.id!r} registered twice")
            seen.add(c.id)
            out.append(c)
    return out


def get_claim(claim_id: str) -> Claim:
    """The claim with this id; ``ValueError`` naming the known ids otherwise."""
    claims = all_claims()
    for c in claims:
        if c.id == claim_id:
            return c
    raise ValueError(f"ID: expected a claim id (see 'attnlab claims list'), got {claim_id!r}")
