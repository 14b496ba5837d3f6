"""Running a ``transformers`` model and recording what enters and leaves each attention layer.

Forward hooks record, in call order (so that ALBERT's shared modules give one record per
application): the hidden states entering attention (after the pre-attention norm where the
architecture has one), and the attention block's output before the residual (the output
projection's result). The attention weights come from the model itself (eager attention,
``output_attentions=True``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

from attnlab.models.checkpoint import offline

__all__ = ["Trace", "load_transformers", "trace", "tokenize"]


@dataclass(frozen=True)
class Trace:
    """One forward pass, per attention layer (in the order the layers ran).

    Attributes
    ----------
    inputs : list of Tensor ``(B, n, d_model)``
        hidden states entering each attention layer.
    attentions : list of Tensor ``(B, H, n, n)``
        the model's own attention weights.
    outputs : list of Tensor ``(B, n, d_model)``
        each attention block's output (output projection included, residual and norm excluded).
    """

    inputs: list[torch.Tensor]
    attentions: list[torch.Tensor]
    outputs: list[torch.Tensor]


def _family_patterns(model: Any) -> tuple[str, str]:
    from attnlab.models import FAMILIES, family_of

    mod = FAMILIES[family_of(model.config.to_dict())]
    return mod.ATTENTION_INPUT, mod.ATTENTION_OUTPUT


@torch.no_grad()
def trace(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> Trace:
    """Run ``model`` (eager attention, eval mode) on ``input_ids`` ``(B, n)``; record each attention layer."""
    if input_ids.ndim != 2:
        raise ValueError(f"input_ids: expected a (batch, tokens) tensor, got shape {tuple(input_ids.shape)}")
    pat_in, pat_out = _family_patterns(model)
    inputs: list[torch.Tensor] = []
    outputs: list[torch.Tensor] = []

    def pre_hook(_mod: Any, args: tuple, kwargs: dict) -> None:
        x = args[0] if args else kwargs["hidden_states"]
        inputs.append(x.detach().clone())

    def post_hook(_mod: Any, _args: tuple, out: torch.Tensor) -> None:
        outputs.append(out.detach().clone())

    handles = []
    for name, module in model.named_modules():
        if re.search(pat_in, name):
            handles.append(module.register_forward_pre_hook(pre_hook, with_kwargs=True))
        if re.search(pat_out, name):
            handles.append(module.register_forward_hook(post_hook))
    if not handles:
        raise ValueError(f"model: expected attention modules matching {pat_in!r}, got none")
    was_training = model.training
    model.eval()
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    try:
        with offline():
            res = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    attentions = [a.detach() for a in res.attentions]
    if not (len(inputs) == len(outputs) == len(attentions)):
        raise ValueError(
            f"model: expected one record per attention layer, got {len(inputs)} inputs, "
            f"{len(outputs)} outputs, {len(attentions)} attention maps"
        )
    return Trace(inputs=inputs, attentions=attentions, outputs=outputs)


def load_transformers(folder: Any) -> Any:
    """A ``transformers`` model from a local folder with eager attention, offline, in eval mode."""
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no progress bar on stderr; restored below
    try:
        with offline():
            model = AutoModel.from_pretrained(str(folder), attn_implementation="eager", local_files_only=True)
    finally:
        if bar:
            hf_logging.enable_progress_bar()
    return model.eval()


def tokenize(folder: Any, sentences: list[str]) -> list[torch.Tensor]:
    """Token ids ``(1, n_s)`` of each sentence with the folder's own tokenizer, offline."""
    from transformers import AutoTokenizer

    with offline():
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    return [torch.tensor([tok(s)["input_ids"]]) for s in sentences]


def trace_text(source: Any, sentences: list[str] | tuple[str, ...]) -> list[Trace]:
    """One :class:`Trace` per sentence (batch 1, no padding) for ``"minilm"``, a folder, or a model.

    The folder must hold a tokenizer (``tokenizer.json`` or a vocabulary); an in-memory model needs
    its ``config.name_or_path`` to point at such a folder.
    """
    from pathlib import Path

    from attnlab.models import resolve_source

    if isinstance(source, (str, Path)):
        folder, _ = resolve_source(source)
        model = load_transformers(folder)
    elif hasattr(source, "config"):
        model = source
        folder = Path(getattr(source.config, "name_or_path", "") or ".")
    else:
        raise ValueError(
            f"source: expected 'minilm', a checkpoint folder or a transformers model, got {source!r}"
        )
    if not sentences:
        raise ValueError("sentences: expected at least one sentence, got none")
    try:
        ids = tokenize(folder, list(sentences))
    except (OSError, ValueError) as exc:
        raise ValueError(f"tokenizer: expected a tokenizer in {str(folder)!r}, got none ({exc})") from None
    return [trace(model, x) for x in ids]
