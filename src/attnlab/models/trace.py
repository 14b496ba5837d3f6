"""Running a ``transformers`` model and recording what enters and leaves each attention layer.

Forward hooks record, in call order (so that ALBERT's shared modules give one record per
application): the hidden states entering attention (after the pre-attention norm where the
architecture has one), and the attention block's output before the residual (the output
projection's result). The attention weights come from the model itself (eager attention,
``output_attentions=True``).
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from attnlab.models.checkpoint import offline

__all__ = [
    "TOKENIZER_FILES",
    "Trace",
    "has_tokenizer",
    "load_transformers",
    "quiet_transformers",
    "trace",
    "tokenize",
]


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

    cfg = model.config.to_dict()
    mod = FAMILIES[family_of(cfg)]
    if hasattr(mod, "patterns"):
        return mod.patterns(cfg["model_type"])
    return mod.ATTENTION_INPUT, mod.ATTENTION_OUTPUT


@torch.no_grad()
def trace(
    model: Any,
    input_ids: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    **feed: Any,
) -> Trace:
    """Run ``model`` (eager attention, eval mode) on ``input_ids`` ``(B, n)`` (or other inputs such as
    ``pixel_values``, ``input_features``, ``decoder_input_ids``); record each attention layer."""
    if input_ids is not None and input_ids.ndim != 2:
        raise ValueError(f"input_ids: expected a (batch, tokens) tensor, got shape {tuple(input_ids.shape)}")
    if input_ids is not None:
        feed["input_ids"] = input_ids
    if attention_mask is not None:
        feed["attention_mask"] = attention_mask
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
            res = model(**feed, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    att = getattr(res, "attentions", None) or getattr(res, "encoder_attentions", None)  # encoder-decoders
    attentions = [a.detach() for a in att]
    if not (len(inputs) == len(outputs) == len(attentions)):
        raise ValueError(
            f"model: expected one record per attention layer, got {len(inputs)} inputs, "
            f"{len(outputs)} outputs, {len(attentions)} attention maps"
        )
    return Trace(inputs=inputs, attentions=attentions, outputs=outputs)


#: files that hold a tokenizer of its own in a Hugging Face folder
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "vocab.txt",
    "vocab.json",
)


def has_tokenizer(folder: Any) -> bool:
    """Whether ``folder`` holds the model's own tokenizer (one of :data:`TOKENIZER_FILES`)."""
    from pathlib import Path

    p = Path(folder)
    return p.is_dir() and any((p / f).is_file() for f in TOKENIZER_FILES)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """No progress bars, load reports or warnings from ``transformers`` on stderr (restored after)."""
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        with offline(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(level)
        if bar:
            hf_logging.enable_progress_bar()


def load_transformers(folder: Any, gguf_file: str | None = None) -> Any:
    """A ``transformers`` model from a local folder (or the GGUF file ``gguf_file`` in it, dequantised by
    transformers' own GGUF loader) with eager attention, offline, in eval mode."""
    from transformers import AutoModel

    kw = {} if gguf_file is None else {"gguf_file": gguf_file}
    with quiet_transformers():
        model = AutoModel.from_pretrained(
            str(folder), attn_implementation="eager", local_files_only=True, **kw
        )
    return model.eval()


def gguf_has_tokenizer(path: Any) -> bool:
    """Whether the GGUF file at ``path`` stores a tokenizer (``tokenizer.ggml.tokens``)."""
    import gguf

    return "tokenizer.ggml.tokens" in gguf.GGUFReader(str(path)).fields


def tokenize(folder: Any, sentences: list[str], gguf_file: str | None = None) -> list[torch.Tensor]:
    """Token ids ``(1, n_s)`` of each sentence with the folder's own tokenizer (or the one stored in
    its GGUF file ``gguf_file``), offline.

    A folder without a tokenizer of its own, a GGUF file without ``tokenizer.ggml.tokens``, or a
    tokenizer that maps the sentences to unknown tokens only, is an error (never ids made up by a
    fallback tokenizer).
    """
    from pathlib import Path

    from transformers import AutoTokenizer

    if gguf_file is not None:
        if not gguf_has_tokenizer(Path(folder) / gguf_file):
            raise ValueError(
                f"tokenizer: expected the GGUF file's own tokenizer (tokenizer.ggml.tokens) in "
                f"{gguf_file!r}, got a file without one"
            )
    elif not has_tokenizer(folder):
        raise ValueError(
            f"tokenizer: expected the model's own tokenizer ({', '.join(TOKENIZER_FILES)}) in "
            f"{str(folder)!r}, got none"
        )
    kw = {} if gguf_file is None else {"gguf_file": gguf_file}
    with quiet_transformers():
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, **kw)
    ids = [torch.tensor([tok(s)["input_ids"]]) for s in sentences]
    unk = getattr(tok, "unk_token_id", None)
    special = set(getattr(tok, "all_special_ids", []) or []) - {unk}
    words = torch.cat([x[0] for x in ids])
    words = words[~torch.isin(words, torch.tensor(sorted(special), dtype=words.dtype))] if special else words
    if unk is not None and words.numel() and bool((words == unk).all()):
        raise ValueError(f"tokenizer: expected known tokens, got only the unknown token from {str(folder)!r}")
    return ids


def trace_text(source: Any, sentences: list[str] | tuple[str, ...]) -> list[Trace]:
    """One :class:`Trace` per sentence (batch 1, no padding) for ``"minilm"``, a folder, or a model.

    The folder must hold a tokenizer (``tokenizer.json`` or a vocabulary); an in-memory model needs
    its ``config.name_or_path`` to point at such a folder.
    """
    from pathlib import Path

    from attnlab.models import resolve_source
    from attnlab.models.gguf_file import is_gguf

    gguf_file = None
    if isinstance(source, (str, Path)) and is_gguf(source):  # the file's own tokenizer and weights
        folder, gguf_file = Path(source).parent, Path(source).name
        if not gguf_has_tokenizer(source):  # checked before the model is loaded
            tokenize(folder, list(sentences), gguf_file=gguf_file)
        model = load_transformers(folder, gguf_file=gguf_file)
    elif isinstance(source, (str, Path)):
        folder, _ = resolve_source(source)
        if not has_tokenizer(folder):  # checked before the model is loaded
            tokenize(folder, list(sentences))
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
        ids = tokenize(folder, list(sentences), gguf_file=gguf_file)
    except (OSError, ValueError) as exc:
        raise ValueError(f"tokenizer: expected a tokenizer in {str(folder)!r}, got none ({exc})") from None
    return [trace(model, x) for x in ids]
