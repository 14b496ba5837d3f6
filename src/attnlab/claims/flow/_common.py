"""Small pieces shared by the paper-B claims (no science: that lives in ``attnlab.dynamics``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab.engine.protocol import Row

__all__ = ["device_name", "ok_rows"]


def device_name(device: str | torch.device) -> str:
    """The device a computation ran on, as torch names it (``cpu``, ``cuda:0``)."""
    return str(torch.empty(0, device=device).device)


def ok_rows(rows: Sequence[Row]) -> tuple[list[Row], str]:
    """The rows that computed, and a note on the failed ones ('' when none failed)."""
    good = [r for r in rows if r.ok]
    bad = len(rows) - len(good)
    return good, (f" {bad} failed point(s) ignored." if bad else "")
