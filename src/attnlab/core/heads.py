"""The canonical form of a model's attention: :class:`HeadWeights`, layer by layer.

A :class:`HeadWeights` holds the metadata of a model's attention and its layers, either in memory
(a tuple of :class:`~attnlab.core.layer.LayerHeads`) or as a :class:`LayerSource` that reads each
layer from its checkpoint when asked (streaming: one layer resident at a time, in the
checkpoint's dtype). The per-layer form, its score stages (q/k norm, RoPE, ALiBi, relative bias,
soft-capping, sliding windows) and the row convention are documented in :mod:`attnlab.core.layer`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from attnlab.core.layer import AttentionOutput, LayerHeads, QKNorm, default_scale
from attnlab.core.positions import RelativeBias, Rope, apply_rope

__all__ = [
    "AttentionOutput",
    "HeadWeights",
    "LayerHeads",
    "LayerSource",
    "QKNorm",
    "RelativeBias",
    "Rope",
    "apply_rope",
    "default_scale",
]

_TENSORS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")


class LayerSource(Sequence[LayerHeads]):
    """Layers read on demand: ``source[i]`` calls ``read(i)`` each time (nothing is cached).

    Parameters
    ----------
    read : callable ``int -> LayerHeads``
    n_layers, n_heads, n_kv_heads, d_model, d_head : int
        the shapes every layer has (checked on each read).
    key : callable ``int -> Hashable``, optional
        layers with equal keys are the same weights (ALBERT's shared layers).
    """

    def __init__(
        self,
        read: Callable[[int], LayerHeads],
        *,
        n_layers: int,
        n_heads: int,
        n_kv_heads: int,
        d_model: int,
        d_head: int,
        key: Callable[[int], Any] | None = None,
    ):
        self._read = read
        self._key = key or (lambda i: i)
        self.n_layers, self.n_heads, self.n_kv_heads = n_layers, n_heads, n_kv_heads
        self.d_model, self.d_head = d_model, d_head

    def __len__(self) -> int:
        return self.n_layers

    def __getitem__(self, i: int) -> LayerHeads:  # type: ignore[override]
        if not isinstance(i, int):
            raise ValueError(f"layer: expected an integer index, got {type(i).__name__}")
        if not -self.n_layers <= i < self.n_layers:
            raise ValueError(f"layer: expected an integer in [0, {self.n_layers - 1}], got {i}")
        layer = self._read(i % self.n_layers)
        got = (layer.n_heads, layer.n_kv_heads, layer.d_model, layer.d_head)
        want = (self.n_heads, self.n_kv_heads, self.d_model, self.d_head)
        if got != want:
            raise ValueError(f"layers[{i}]: expected (heads, kv heads, d_model, d_head) = {want}, got {got}")
        return layer

    def __iter__(self) -> Iterator[LayerHeads]:
        for i in range(self.n_layers):
            yield self[i]

    def key(self, i: int) -> Any:
        return self._key(i)

    def mapped(self, fn: Callable[[LayerHeads], LayerHeads]) -> LayerSource:
        """The same source with ``fn`` applied to each layer as it is read."""
        return LayerSource(
            lambda i: fn(self._read(i)),
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads,
            d_model=self.d_model,
            d_head=self.d_head,
            key=self._key,
        )


@dataclass(frozen=True)
class HeadWeights:
    """A model's attention heads, layer by layer, plus what the architecture does around them.

    Attributes
    ----------
    layers : tuple of LayerHeads, or LayerSource
        one per layer (ALBERT repeats the same object when layers share weights); a
        :class:`LayerSource` reads them from the checkpoint on access.
    architecture : str
        the converter family (``"bert"``, ``"llama"``, ``"gpt2"``, ...).
    model_type : str
        the checkpoint's own ``model_type`` (``"bert"``, ``"mistral"``, ``"qwen3"``, ...).
    name : str
        a label for tables.
    shared_layers : bool
        whether layers share their attention weights (ALBERT).
    grouped_kv : bool
        whether K/V heads are shared by groups of query heads (GQA/MQA).
    n_kv_heads : int
        number of distinct K/V heads (equal to ``n_heads`` without GQA).
    causal : bool
        decoder-style causal masking.
    pre_norm : bool
        a norm precedes attention (GPT-2, Llama) rather than following it (BERT).
    rope : Rope or None
        the model's default rotary embedding (a layer's own ``rope`` overrides it).
    extra : mapping
        further metadata (config values kept for reference).
    """

    layers: Sequence[LayerHeads]
    architecture: str
    model_type: str = ""
    name: str = ""
    shared_layers: bool = False
    grouped_kv: bool = False
    n_kv_heads: int = 0
    causal: bool = False
    pre_norm: bool = False
    rope: Rope | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.layers, LayerSource):
            if self.n_kv_heads == 0:
                object.__setattr__(self, "n_kv_heads", self.layers.n_kv_heads)
            return
        if not isinstance(self.layers, tuple):
            object.__setattr__(self, "layers", tuple(self.layers))
        if not self.layers:
            raise ValueError("layers: expected at least one layer, got none")
        first = self.layers[0]
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, LayerHeads):
                raise ValueError(f"layers[{i}]: expected LayerHeads, got {type(layer).__name__}")
            shape = (layer.n_heads, layer.n_kv_heads, layer.d_model, layer.d_head)
            want = (first.n_heads, first.n_kv_heads, first.d_model, first.d_head)
            if shape != want:
                raise ValueError(
                    f"layers[{i}]: expected (heads, kv heads, d_model, d_head) = {want}, got {shape}"
                )
        if self.n_kv_heads == 0:
            object.__setattr__(self, "n_kv_heads", first.n_kv_heads)
        if self.n_kv_heads != first.n_kv_heads:
            raise ValueError(
                f"n_kv_heads: expected {first.n_kv_heads} (the layers' W_K), got {self.n_kv_heads}"
            )

    @property
    def streamed(self) -> bool:
        """Whether layers are read from the checkpoint on access."""
        return isinstance(self.layers, LayerSource)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def _shape(self) -> tuple[int, int, int]:
        if isinstance(self.layers, LayerSource):
            return self.layers.n_heads, self.layers.d_model, self.layers.d_head
        first = self.layers[0]
        return first.n_heads, first.d_model, first.d_head

    @property
    def n_heads(self) -> int:
        return self._shape()[0]

    @property
    def d_model(self) -> int:
        return self._shape()[1]

    @property
    def d_head(self) -> int:
        return self._shape()[2]

    @property
    def dtype(self) -> torch.dtype:
        return self.layers[0].W_Q.dtype

    def layer_key(self, i: int) -> Any:
        """Equal keys: the same weights (shared layers are diagnosed once)."""
        if isinstance(self.layers, LayerSource):
            return self.layers.key(i)
        return id(self.layers[i])

    def materialize(self) -> HeadWeights:
        """All layers in memory (a no-op unless streamed; shared layers stay shared)."""
        if not self.streamed:
            return self
        seen: dict[Any, LayerHeads] = {}
        layers = []
        for i in range(self.n_layers):
            k = self.layer_key(i)
            if k not in seen:
                seen[k] = self.layers[i]
            layers.append(seen[k])
        return self._with(tuple(layers))

    def _with(self, layers: Sequence[LayerHeads]) -> HeadWeights:
        return HeadWeights(
            layers=layers,
            architecture=self.architecture,
            model_type=self.model_type,
            name=self.name,
            shared_layers=self.shared_layers,
            grouped_kv=self.grouped_kv,
            n_kv_heads=self.n_kv_heads,
            causal=self.causal,
            pre_norm=self.pre_norm,
            rope=self.rope,
            extra=dict(self.extra),
        )

    def stacked(self, name: str) -> torch.Tensor:
        """One weight for all layers: e.g. ``stacked("W_Q")`` has shape ``(L, H, d_model, d_head)``."""
        if name not in _TENSORS:
            raise ValueError(f"name: expected one of {', '.join(_TENSORS)}, got {name!r}")
        return torch.stack([getattr(layer, name) for layer in self.layers])

    def scales(self) -> torch.Tensor:
        """Score scale per layer, shape ``(L,)`` (float64)."""
        return torch.tensor([layer.scale for layer in self.layers], dtype=torch.float64)

    def to(self, dtype: torch.dtype | None = None, device: str | torch.device | None = None) -> HeadWeights:
        """A copy with every layer moved to ``dtype`` / ``device`` (shared layers stay shared; a
        streamed model moves each layer as it is read)."""
        if isinstance(self.layers, LayerSource):
            return self._with(self.layers.mapped(lambda la: la.to(dtype=dtype, device=device)))
        moved: dict[int, LayerHeads] = {}
        layers = []
        for layer in self.layers:
            if id(layer) not in moved:
                moved[id(layer)] = layer.to(dtype=dtype, device=device)
            layers.append(moved[id(layer)])
        return self._with(tuple(layers))

    def forward(self, layer: int, x: torch.Tensor, key_mask: torch.Tensor | None = None) -> AttentionOutput:
        """Run layer ``layer``'s heads on its attention input ``x`` with this model's masking and stages."""
        if not isinstance(layer, int) or not 0 <= layer < self.n_layers:
            raise ValueError(f"layer: expected an integer in [0, {self.n_layers - 1}], got {layer!r}")
        return self.layers[layer].forward(x, causal=self.causal, key_mask=key_mask, rope=self.rope)

    def stages(self) -> dict[str, Any]:
        """The score stages of the model, as recorded by its converter (``extra["stages"]``)."""
        return dict(self.extra.get("stages", {}))

    def summary(self) -> dict[str, Any]:
        """The metadata as a plain dict (for tables and JSON)."""
        rope = self.rope
        out = {
            "model": self.name,
            "architecture": self.architecture,
            "model_type": self.model_type,
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "d_model": self.d_model,
            "d_head": self.d_head,
            "shared_layers": self.shared_layers,
            "grouped_kv": self.grouped_kv,
            "causal": self.causal,
            "pre_norm": self.pre_norm,
            "rope_theta": None if rope is None else rope.theta,
            "rope_type": None if rope is None else rope.rope_type,
            "rope_dim": None if rope is None else rope.dim,
        }
        out.update(self.stages())
        return out

    def __repr__(self) -> str:
        return (
            f"HeadWeights({self.name or self.architecture}: {self.n_layers} layers x {self.n_heads} heads, "
            f"d_model={self.d_model}, d_head={self.d_head}"
            + (f", kv_heads={self.n_kv_heads}" if self.grouped_kv else "")
            + (", shared layers" if self.shared_layers else "")
            + (", streamed" if self.streamed else "")
            + ")"
        )
