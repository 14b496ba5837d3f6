"""The option checks of ``attnlab highdim``: the setting, the quadrature nodes and a training run, each
value checked and the memory the work needs estimated before any of it starts."""

from __future__ import annotations

from attnlab.cli.common import UsageError, check_memory, check_seed

__all__ = ["check_setting", "check_nodes", "check_training"]


def check_setting(
    kappa0: float, noise: float, tokens: int, lam: float, beta: float = 1.0, beta0: float = 1.0
):
    from attnlab.core.validation import check_int, check_real

    check_real("--kappa0", kappa0, min=0.0, min_open=True)
    check_real("--noise", noise, min=0.0)
    check_int("--tokens", tokens, min=2)
    check_real("--lam", lam, min=0.0)
    check_real("--beta", beta, min=0.0, min_open=True)
    check_real("--beta0", beta0, min=0.0)


def check_nodes(nodes: int, tokens: int) -> None:
    from attnlab.core.validation import check_int

    check_int("--nodes", nodes, min=16)
    # per node: the K = T(T+1)/2 flat coordinates of (z*, z, ξ, h), a T × T softmax and Newton's
    # K × K systems, in float64 with working copies (~40 values per T² entry)
    check_memory(
        "--nodes",
        nodes,
        8 * 40 * nodes * tokens**2 * max(1, tokens // 2),
        f"the quadrature nodes at T = {tokens} tokens",
    )


def check_training(d: int, alpha: float, tokens: int, task: str, kappa: float, max_steps: int, seed: int):
    """Options of an Adam run, and its memory: X (n, T, d), labels, logits and their autograd copies."""
    from attnlab.core.validation import check_choice, check_int, check_real

    d = check_int("--d", d, min=2)
    alpha = check_real("--alpha", alpha, min=0.0, min_open=True)
    check_choice("--task", task, ("seq2lab", "seq2seq"))
    check_real("--kappa", kappa, min=0.0, min_open=True)
    check_int("--max-steps", max_steps, min=1)
    check_seed(seed)
    n = round(alpha * d * d)
    if n < 1:
        raise UsageError(
            "--alpha", f"at least one training sequence (α d² >= 0.5, here {alpha * d * d:.3g})", alpha
        )
    label = tokens * (d if task == "seq2seq" else tokens)
    per_seq = 8 * (4 * tokens * d + 6 * tokens * tokens + 2 * label)
    check_memory(
        "--alpha",
        alpha,
        (n + 2000) * per_seq + 8 * 8 * d * d,
        f"n = α d² = {n:.3g} sequences of T = {tokens} tokens",
    )
