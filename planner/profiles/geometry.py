"""Model architectures as data: the numbers that set a replica's memory footprint and KV cache.

Each served model is read from its Hugging Face ``config.json``, the copy that ships with
``aiconfigurator-core`` (``aiconfigurator_core/model_configs/<org>--<name>_config.json``), and
written to ``data/profiles/models.csv`` by the profile build. Parameters are counted from the
config (embeddings, attention, MLP or experts, norms, an untied LM head), so a model's weights
follow from its architecture rather than from a marketing round number; bf16 weights and KV.

KV cache stored per token, all layers, for a replica of TP GPUs::

    kv_bytes_per_token_per_gpu = 2 (K and V) · layers · ⌈kv_heads / TP⌉ · head_dim · bytes

Grouped-query attention stores only the KV heads; when TP exceeds the KV heads, each GPU keeps
one replicated head (vLLM's rule), so KV per token per GPU stops shrinking.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BF16_BYTES = 2


@dataclass(frozen=True)
class ModelGeometry:
    """Architecture of one model; parameters counted in units of one."""

    model: str
    hf_name: str
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    experts: int
    experts_per_token: int
    params_total: float
    params_active: float
    bytes_per_value: int = BF16_BYTES

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def weights_bytes(self) -> float:
        """Every parameter is resident, every expert included."""
        return self.params_total * self.bytes_per_value

    @property
    def kv_bytes_per_token(self) -> int:
        """KV stored per token by the whole model (one copy of every KV head)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_value

    def kv_bytes_per_token_per_gpu(self, tp: int) -> int:
        return 2 * self.layers * math.ceil(self.kv_heads / tp) * self.head_dim * self.bytes_per_value

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ModelGeometry:
        """From a row of ``models.csv`` (every field a column)."""
        return cls(
            model=str(row["model"]), hf_name=str(row["hf_name"]), layers=int(row["layers"]),
            hidden_size=int(row["hidden_size"]), attention_heads=int(row["attention_heads"]),
            kv_heads=int(row["kv_heads"]), head_dim=int(row["head_dim"]), vocab_size=int(row["vocab_size"]),
            experts=int(row["experts"]), experts_per_token=int(row["experts_per_token"]),
            params_total=float(row["params_total"]), params_active=float(row["params_active"]),
            bytes_per_value=int(row["bytes_per_value"]),
        )


def from_hf_config(model: str, hf_name: str, config: dict[str, Any]) -> ModelGeometry:
    """Geometry and parameter counts of a decoder-only model (dense or mixture-of-experts)."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    layers = int(config["num_hidden_layers"])
    vocab = int(config["vocab_size"])
    experts = int(config.get("num_experts") or config.get("num_local_experts") or 0)
    top_k = int(config.get("num_experts_per_tok") or 0) if experts else 0
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q, o and k, v projections
    norms = 2 * hidden + (2 * head_dim if config.get("model_type", "").startswith("qwen3") else 0)
    if experts:
        expert = 3 * hidden * int(config["moe_intermediate_size"])  # gate, up, down
        router = hidden * experts
        layer_total = attention + norms + router + experts * expert
        layer_active = attention + norms + router + top_k * expert
    else:
        layer_total = layer_active = attention + norms + 3 * hidden * int(config["intermediate_size"])
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2) + hidden
    return ModelGeometry(
        model=model, hf_name=hf_name, layers=layers, hidden_size=hidden, attention_heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, vocab_size=vocab, experts=experts, experts_per_token=top_k,
        params_total=float(embeddings + layers * layer_total), params_active=float(embeddings + layers * layer_active),
    )


def read_hf_config(path: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(path.read_text())
    return config
