"""Blocks of heads promoted to float64 one at a time.

A layer of a large checkpoint is kept in its own dtype (bf16: 2 bytes a weight); the per-head products
of the diagnostics contract over ``d`` head by head, so they can be formed from a few heads promoted to
float64 at a time instead of a float64 copy of the whole ``(H, d, k)`` stack (128 MB per matrix at
d = 4096, H·k = 4096; the block here is at most 16 MB). Each head's product is the same batched
operation on the same float64 values whatever the block, so the results are those of the whole stack.
"""

from __future__ import annotations

import torch

_DT = torch.float64

#: Bytes of one float64 block of heads (each ``d × k``): four heads at d = 4096, k = 128; every head of a
#: small model in one block.
BLOCK_BYTES = 16 << 20


def head_blocks(n: int, d: int, k: int, blocks: int = 1) -> list[slice]:
    """Consecutive slices of ``n`` heads of ``d × k`` float64 values each, at most ``blocks`` times
    :data:`BLOCK_BYTES` a slice (at least one head)."""
    step = max(1, blocks * BLOCK_BYTES // (8 * d * k))
    return [slice(s, min(s + step, n)) for s in range(0, n, step)]


def r_factors(W: torch.Tensor) -> torch.Tensor:
    """Thin-QR ``R`` factors ``(n, k, k)`` in float64 of the heads ``W`` ``(n, d, k)`` (any dtype),
    promoted block by block; the ``Q`` factor is never formed."""
    n, d, k = W.shape
    buf = scratch(n, d, k, device=W.device)
    return torch.cat([torch.linalg.qr(promote(W[b], buf), mode="r")[1] for b in head_blocks(n, d, k)])


def scratch(n: int, d: int, k: int, blocks: int = 1, device: torch.device | None = None) -> torch.Tensor:
    """A flat float64 buffer for the largest block of :func:`head_blocks` ``(n, d, k, blocks)``, reused by
    :func:`promote` for every block (one allocation per product instead of one per block)."""
    b = head_blocks(n, d, k, blocks)[0]
    return torch.empty((b.stop - b.start) * d * k, dtype=_DT, device=device)


def promote(src: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
    """``src`` (any dtype) converted to float64 into the front of the flat buffer ``buf``: a contiguous
    tensor of ``src``'s shape (exact, as ``src.to(float64)``)."""
    return buf[: src.numel()].view(src.shape).copy_(src)
