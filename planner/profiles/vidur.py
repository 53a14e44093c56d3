r"""Vidur's measured Llama-2-70B operator times, as a cross-check of the dense time D(n).

Vidur (Agrawal et al., MLSys 2024; microsoft/vidur, MIT) profiles every linear and
element-wise operator of one transformer layer with PyTorch kernels, by token count and TP
degree, and the all-reduces of a DGX node by message size. A small slice is vendored in
``data/sources/vidur_profiling/`` (its ``NOTE.md`` says which rows). Llama-2-70B has the same
layer widths as Llama-3.1-70B (hidden 8192, intermediate 28672, 64 query and 8 KV heads, 80
layers); only the vocabulary differs (32,000 against 128,256).

What is compared. Vidur's model time of a step of ``n`` tokens without the attention kernels
is, per layer, the sum of the median times of ``input_layernorm``, ``attn_pre_proj`` (QKV),
``attn_rope``, ``attn_post_proj`` (O), ``post_attention_layernorm``, ``mlp_up_proj``,
``mlp_act``, ``mlp_down_proj`` and ``add``, plus two all-reduces of ``n × 8192 × 2`` bytes
(after attention and after the MLP) at TP > 1, times 80 layers:

    V(n) = 80 · (Σ_ops median(op, n, TP) + 2 · AR(n · 16384 bytes, TP))

as ``vidur/entities/execution_time.py`` composes it (its embedding, LM head, sampling and
CPU overheads are left out, as here; its fixed 0.02 ms NCCL launch allowance per all-reduce
is a setting, not a measurement, and is left out too). The planner's D(n) holds the same
work plus the embedding, the final norm, the LM head and sampling, which at one logit row
per sequence are about 1-2 % of D on these SKUs. Vidur's kernels are a 2023-24 PyTorch
stack; the planner's D(n) is read from aiconfigurator-core's vLLM tables, so D / V below 1
means today's engine runs the same layers faster.

Rows measured twice upstream (2,048 and 4,096 tokens; one all-reduce size) are averaged. The
all-reduce time at a size between two measured sizes is interpolated linearly in the size.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from planner.paths import data_dir

LAYERS = 80
HIDDEN = 8192
BYTES_PER_VALUE = 2
LAYER_OPS: tuple[str, ...] = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
                              "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")
GPUS: dict[str, str] = {"A100-80GB": "a100", "H100": "h100"}
"""Catalog SKU → Vidur's GPU name (its A100 is the 80 GB SXM part of a DGX A100)."""
TOKENS: tuple[int, ...] = (1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096)
TP_DEGREES: tuple[int, ...] = (1, 2, 4, 8)
"""The token counts and TP degrees of the vendored slice."""


def vidur_dir() -> Path:
    return data_dir() / "sources" / "vidur_profiling"


@dataclass(frozen=True)
class VidurDense:
    """V(n) of the module docstring, in ms for the whole model, split in its two parts."""

    tokens: int
    linear_ms: float
    all_reduce_ms: float

    @property
    def total_ms(self) -> float:
        return self.linear_ms + self.all_reduce_ms


@lru_cache(maxsize=8)
def layer_table(sku: str, folder: Path | None = None) -> pd.DataFrame:
    """Per (num_tokens, TP): the median time of each layer operator in ms (duplicates averaged)."""
    path = Path(folder or vidur_dir()) / f"{GPUS[sku]}_llama-2-70b_mlp.csv"
    frame = pd.read_csv(path)
    columns = [f"time_stats.{op}.median" for op in LAYER_OPS]
    table = frame.groupby(["num_tokens", "num_tensor_parallel_workers"])[columns].mean()
    table.columns = list(LAYER_OPS)
    return table


@lru_cache(maxsize=8)
def all_reduce_table(sku: str, folder: Path | None = None) -> pd.DataFrame:
    """All-reduce medians (ms) of one DGX node by (num_workers, size in bytes), duplicates averaged."""
    path = Path(folder or vidur_dir()) / f"{GPUS[sku]}_dgx_all_reduce.csv"
    frame = pd.read_csv(path)
    frame = frame[frame["num_workers"] == frame["devices_per_node"]]
    return frame.groupby(["num_workers", "size"])["time_stats.all_reduce.median"].mean().rename("ms").reset_index()


def all_reduce_ms(sku: str, tp: int, size_bytes: float, folder: Path | None = None) -> float:
    """One all-reduce of ``size_bytes`` over ``tp`` GPUs of one node; 0 at TP 1."""
    if tp == 1:
        return 0.0
    rows = all_reduce_table(sku, folder)
    rows = rows[rows["num_workers"] == tp].sort_values("size")
    sizes, times = rows["size"].to_numpy(dtype=float), rows["ms"].to_numpy(dtype=float)
    if not sizes.size or not sizes[0] <= size_bytes <= sizes[-1]:
        raise KeyError(f"no measured all-reduce around {size_bytes:g} bytes at {tp} GPUs on {sku}")
    return float(np.interp(size_bytes, sizes, times))


def vidur_dense(sku: str, tp: int, tokens: int, folder: Path | None = None) -> VidurDense:
    """V(n) at one of the vendored token counts (:data:`TOKENS`) and TP degrees."""
    ops = layer_table(sku, folder).loc[(tokens, tp)]
    reduce = all_reduce_ms(sku, tp, tokens * HIDDEN * BYTES_PER_VALUE, folder)
    return VidurDense(tokens, LAYERS * float(ops.sum()), LAYERS * 2.0 * reduce)
