"""Shared command-line plumbing: JSON output, logs on stderr, one-line errors.

Every command takes ``--json``: it then prints exactly one strict-JSON object on stdout
(non-finite numbers become ``null`` and a ``note`` says which), and all logs go to stderr.
Bad input raises :class:`UsageError` (or a ``ValueError`` from a science function); ``main``
turns both into one line on stderr and exit status 2.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

from rich.console import Console

__all__ = [
    "UsageError",
    "err_console",
    "out_console",
    "emit_json",
    "strict_json",
    "JsonOpt",
    "check_device",
]

import typer

#: Logs, progress bars and human tables that must not pollute --json output go here.
err_console = Console(stderr=True)
#: Human output (tables) when --json is not given. Piped to a file or a CI log (no terminal to
#: ask), tables get 140 columns rather than rich's default 80, which would fold every cell.
out_console = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 140)

JsonOpt = typer.Option(False, "--json", help="Print exactly one strict-JSON object on stdout.")


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""

    def __init__(self, argument: str, expected: str, given: Any):
        super().__init__(f"{argument}: expected {expected}, got {given!r}")


def strict_json(obj: Any, _notes: list[str] | None = None, _path: str = "") -> Any:
    """Replace nan/inf by None (recording the path in ``_notes``) and numpy/torch scalars by floats."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if isinstance(obj, dict):
        return {str(k): strict_json(v, _notes, f"{_path}.{k}" if _path else str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v, _notes, f"{_path}[{i}]") for i, v in enumerate(obj)]
    if np is not None and isinstance(obj, np.ndarray):
        return strict_json(obj.tolist(), _notes, _path)
    if np is not None and isinstance(obj, np.generic):
        obj = obj.item()
    if hasattr(obj, "item") and hasattr(obj, "numel") and obj.numel() == 1:
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        if _notes is not None:
            _notes.append(f"{_path} is {obj} (written as null)")
        return None
    return obj


def emit_json(obj: dict[str, Any]) -> None:
    """Print one strict-JSON object on stdout; non-finite values become null plus a ``note``."""
    notes: list[str] = []
    clean = strict_json(obj, notes)
    if notes:
        prev = clean.get("note")
        clean["note"] = "; ".join(([prev] if prev else []) + notes)
    sys.stdout.write(json.dumps(clean, allow_nan=False) + "\n")
    sys.stdout.flush()


def check_device(device: str) -> str:
    """``cpu``, or a CUDA device (``cuda``, ``cuda:N``) available here; :class:`UsageError` otherwise."""
    if device == "cpu":
        return device
    if device == "cuda" or device.startswith("cuda:"):
        import torch

        idx = device.partition(":")[2]
        if torch.cuda.is_available() and (
            not idx or (idx.isdigit() and int(idx) < torch.cuda.device_count())
        ):
            return device
        raise UsageError("--device", "cpu or an available cuda device", device)
    raise UsageError("--device", "cpu, cuda or cuda:N", device)
