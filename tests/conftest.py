"""Shared fixtures: the engine's test claims, a helper to run the CLI in a subprocess, and a recorder of the
node sets a state-evolution solve asks for."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTCLAIMS_DIR = Path(__file__).resolve().parent / "engine"


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:  # pragma: no cover
        has_gpu = False
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


@pytest.fixture(autouse=True)
def _one_thread():
    """One BLAS/torch thread per test: the tensors are small, and thread synchronisation costs more
    than it saves on a 2-core machine (the engine's workers also run one thread each)."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)


@pytest.fixture
def build_model():
    """Factory of tiny random transformers models with non-zero biases (see tinymodels.py)."""
    from tinymodels import build

    return build


@pytest.fixture
def testclaims(monkeypatch):
    """Register the engine's test claims in this process (and in spawned workers)."""
    monkeypatch.syspath_prepend(str(TESTCLAIMS_DIR))
    monkeypatch.setenv("ATTNLAB_EXTRA_CLAIMS", "attnlab_testclaims")
    monkeypatch.setenv("ATTNLAB_EXTRA_FIGURES", "attnlab_testclaims")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTCLAIMS_DIR), os.environ.get("PYTHONPATH", "")]))
    import attnlab_testclaims

    return attnlab_testclaims


@pytest.fixture
def asked_channels(monkeypatch):
    """Record the ``(nodes, grid, fold)`` every state-evolution solve asks of ``scrambles.channels`` and hand
    it 512 Sobol nodes per scramble instead (folded when asked), so that a test of which node sets a solve
    draws stays small."""
    import importlib

    from attnlab.highdim import OutputChannel

    se = importlib.import_module("attnlab.highdim.state_evolution")
    asked: list[tuple] = []

    def small(setting, nodes=None, seed=0, scrambles=4, grid=None, fold=False):
        asked.append((nodes, grid, fold))
        return [OutputChannel(setting, 512, seed + i, fold=fold) for i in range(scrambles)]

    monkeypatch.setattr(se, "channels", small)
    return asked
