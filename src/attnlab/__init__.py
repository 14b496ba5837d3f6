"""attnlab: an executable laboratory for the theory of attention heads.

Subpackages (imported on first use, so ``import attnlab`` stays light):

- ``attnlab.core``      shared math: seeding, validation, ``HeadWeights``, subspace geometry
- ``attnlab.ensemble``  paper A: heads as an ensemble of Nadaraya–Watson estimators
- ``attnlab.dynamics``  paper B: multi-head self-attention dynamics on the sphere
- ``attnlab.highdim``   paper C: single-head tied attention in high dimensions
- ``attnlab.models``    checkpoints -> ``HeadWeights``
- ``attnlab.diagnose``  a real model's heads through the three theories
- ``attnlab.claims``, ``attnlab.engine``, ``attnlab.report``, ``attnlab.cli``
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SUBPACKAGES = {
    "core",
    "ensemble",
    "dynamics",
    "highdim",
    "models",
    "diagnose",
    "claims",
    "engine",
    "report",
    "cli",
}


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"attnlab.{name}")
    raise AttributeError(f"module 'attnlab' has no attribute {name!r}")


__all__ = ["__version__", *sorted(_SUBPACKAGES)]
