"""Model architectures as data: the few numbers that set memory footprint and step cost.

Every figure comes from the model's Hugging Face ``config.json`` and model card:

==============  ==========================================  ==================================================
model           source (``config.json`` fields)             values
==============  ==========================================  ==================================================
llama3-8b       meta-llama/Meta-Llama-3-8B                   num_hidden_layers 32, num_attention_heads 32,
                                                             num_key_value_heads 8, hidden_size 4096
                                                             (head_dim 128); 8.03e9 parameters (model card)
llama2-70b      meta-llama/Llama-2-70b-hf                    num_hidden_layers 80, num_attention_heads 64,
                                                             num_key_value_heads 8, hidden_size 8192
                                                             (head_dim 128); 68.98e9 parameters
mixtral-8x22b   mistralai/Mixtral-8x22B-v0.1                 num_hidden_layers 56, num_attention_heads 48,
                                                             num_key_value_heads 8, hidden_size 6144
                                                             (head_dim 128), num_local_experts 8,
                                                             num_experts_per_tok 2; 140.6e9 total and
                                                             39.1e9 active parameters per token
bloom-176b      bigscience/bloom                             n_layer 70, n_head 112 (multi-head attention, so
                                                             112 KV heads), hidden_size 14336 (head_dim 128);
                                                             176.25e9 parameters. Validation only: it is in
                                                             the measured data but is not a served model.
==============  ==========================================  ==================================================

Weights and KV cache are bf16 (2 bytes per value).

KV cache stored per token (what limits how many tokens a replica can hold):

    kv_bytes_per_token = 2 (K and V) * layers * kv_heads * head_dim * bytes

Attention bytes streamed per cached token in one decode step, per query head
(what the measured decode step time tracks, see ``roofline.py``):

    attention_bytes_per_token = 2 * layers * attention_heads * head_dim * bytes
"""

from __future__ import annotations

from dataclasses import dataclass

BF16_BYTES = 2


@dataclass(frozen=True)
class ModelGeometry:
    """Architecture of one model; parameters in units of one (not billions)."""

    name: str
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    total_params: float
    active_params: float
    bytes_per_value: int
    hf_config: str

    @property
    def is_moe(self) -> bool:
        return self.active_params < self.total_params

    @property
    def weights_bytes(self) -> float:
        """Every parameter is resident, MoE experts included."""
        return self.total_params * self.bytes_per_value

    @property
    def weights_gb(self) -> float:
        return self.weights_bytes / 1e9

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_value

    @property
    def attention_bytes_per_token(self) -> int:
        return 2 * self.layers * self.attention_heads * self.head_dim * self.bytes_per_value


MODELS: dict[str, ModelGeometry] = {
    geometry.name: geometry
    for geometry in (
        ModelGeometry(
            name="llama3-8b",
            layers=32,
            attention_heads=32,
            kv_heads=8,
            head_dim=128,
            total_params=8.03e9,
            active_params=8.03e9,
            bytes_per_value=BF16_BYTES,
            hf_config="meta-llama/Meta-Llama-3-8B",
        ),
        ModelGeometry(
            name="llama2-70b",
            layers=80,
            attention_heads=64,
            kv_heads=8,
            head_dim=128,
            total_params=68.98e9,
            active_params=68.98e9,
            bytes_per_value=BF16_BYTES,
            hf_config="meta-llama/Llama-2-70b-hf",
        ),
        ModelGeometry(
            name="mixtral-8x22b",
            layers=56,
            attention_heads=48,
            kv_heads=8,
            head_dim=128,
            total_params=140.6e9,
            active_params=39.1e9,
            bytes_per_value=BF16_BYTES,
            hf_config="mistralai/Mixtral-8x22B-v0.1",
        ),
    )
}
"""The models the planner serves."""

VALIDATION_MODELS: dict[str, ModelGeometry] = {
    "bloom-176b": ModelGeometry(
        name="bloom-176b",
        layers=70,
        attention_heads=112,
        kv_heads=112,
        head_dim=128,
        total_params=176.25e9,
        active_params=176.25e9,
        bytes_per_value=BF16_BYTES,
        hf_config="bigscience/bloom",
    ),
}
"""Models present in the measured data, used only to check the roofline out of sample."""


def geometry_for(model: str) -> ModelGeometry:
    """The geometry of a served or validation model; ``KeyError`` names the known ones."""
    if model in MODELS:
        return MODELS[model]
    if model in VALIDATION_MODELS:
        return VALIDATION_MODELS[model]
    known = ", ".join(sorted([*MODELS, *VALIDATION_MODELS]))
    raise KeyError(f"unknown model {model!r}; known: {known}")
