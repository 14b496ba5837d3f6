"""Small pieces shared by the paper-A claim files (row bookkeeping and labels; no science)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from attnlab.engine.protocol import Row
from attnlab.ensemble.data import RegressionTask

__all__ = ["device_name", "failed_note", "setting_label", "split", "task_of"]


def device_name(device: str | torch.device) -> str:
    """The device the heavy part of a point ran on, as torch names it (``cpu``, ``cuda:0``)."""
    return str(torch.empty(0, device=device).device)


def split(rows: Sequence[Row]) -> tuple[list[Row], int]:
    """The rows that finished, and how many failed."""
    ok = [r for r in rows if r.ok]
    return ok, len(rows) - len(ok)


def failed_note(failed: int) -> str:
    return f"; {failed} failed point(s) ignored" if failed else ""


def task_of(setting: Sequence[Any]) -> tuple[RegressionTask, int, int, int, float]:
    """``(task, H, d_k, n, c)`` from a setting ``[d, H, d_k, target, noise, n, c]``."""
    d, H, d_k, target, noise, n, c = setting
    return (
        RegressionTask(d=int(d), target=str(target), noise=float(noise)),
        int(H),
        int(d_k),
        int(n),
        float(c),
    )


def setting_label(setting: Sequence[Any]) -> str:
    d, H, d_k, target, noise, n, c = setting
    return f"{target}, d={d}, H={H}, d_k={d_k}, σ={noise}, N={n}, c={c}"
