"""Deterministic seeds: every random draw in attnlab derives from one root seed.

A per-point seed is a hash of the root seed and a tuple of keys (the claim id and the
canonical parameters), so it does not depend on the order in which points are run or on
the backend that runs them.
"""

from __future__ import annotations

import hashlib
import json

import torch

__all__ = ["derive_seed", "generator", "canonical_json", "draw_device"]


def canonical_json(obj: object) -> str:
    """JSON with sorted keys and no whitespace: the canonical form that is hashed into ids."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def derive_seed(root: int, *keys: object) -> int:
    """A 63-bit seed derived from ``root`` and ``keys`` by SHA-256 (stable across processes).

    Examples
    --------
    >>> derive_seed(0, "a", 1) == derive_seed(0, "a", 1)
    True
    """
    if not isinstance(root, int) or isinstance(root, bool) or root < 0:
        raise ValueError(f"root: expected a non-negative integer seed, got {root!r}")
    payload = canonical_json([root, list(keys)]).encode()
    return int.from_bytes(hashlib.sha256(payload).digest()[:8], "big") >> 1


def generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with ``seed``."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def draw_device(gen: torch.Generator | None, device: str | torch.device) -> str | torch.device:
    """Where random numbers are drawn: on the generator's device when there is one, else ``device``.

    Drawing with a CPU generator and then moving the tensor gives the same numbers whatever device
    the computation runs on.
    """
    return gen.device if gen is not None else device
