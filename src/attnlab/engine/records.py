"""The records the store holds: points as workers return them, runs, and stored verdicts."""

from __future__ import annotations

import io
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["StoredPoint", "RunRecord", "StoredVerdict", "pack_arrays", "unpack_array", "now_utc"]


@dataclass(frozen=True)
class StoredPoint:
    """What a worker sends back for one point, ready to be written."""

    point_id: str
    claim_id: str
    profile: str
    params: Mapping[str, Any]
    seed: int
    version: int
    status: str
    metrics: Mapping[str, Any]
    error: str | None
    provenance: Mapping[str, Any]
    runtime_s: float
    host: str
    started: str
    ended: str
    arrays: Mapping[str, np.ndarray]
    #: CPU seconds of the worker process for this point (every thread; None: not measured). With torch
    #: threads > 1 it can exceed ``runtime_s`` (wall); under load from other processes wall exceeds it.
    cpu_s: float | None = None


@dataclass(frozen=True)
class RunRecord:
    run_id: int
    claim_id: str
    profile: str
    root_seed: int
    overrides: dict[str, Any]
    point_ids: list[str]
    backend: str
    started: str
    ended: str | None


@dataclass(frozen=True)
class StoredVerdict:
    """A claim's verdict as stored at the end of a run: everything the report shows.

    ``claim`` holds the claim's metadata at the time of the run (id, kind, paper, statement,
    description, regime, predictions, controls), so the report needs no claim code.
    """

    run_id: int
    claim_id: str
    variant: str
    profile: str
    version: int
    claim: dict[str, Any]
    status: str
    numbers: dict[str, Any]
    tolerance: str
    note: str
    regime: str
    power: dict[str, Any]
    points: int
    failed: int
    missing: int
    runtime_s: float
    created: str
    point_ids: list[str]
    overrides: dict[str, Any]
    root_seed: int = 0


def now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def pack_arrays(arrays: Mapping[str, np.ndarray]) -> dict[str, bytes]:
    out = {}
    for name, arr in arrays.items():
        buf = io.BytesIO()
        np.savez_compressed(buf, a=np.asarray(arr))
        out[name] = buf.getvalue()
    return out


def unpack_array(blob: bytes) -> np.ndarray:
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        return z["a"]
