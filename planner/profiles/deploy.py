"""Engine settings as an operator deploys them: the command line of each serving engine.

A deployment is a model on ``tp`` GPUs under one engine with a batch cap (vLLM's
``--max-num-seqs``) and a token budget per step (``--max-num-batched-tokens``, the
chunked-prefill size). Each engine spells those four settings and the KV memory fraction
its own way; :func:`launch_command` writes them as that engine's server command.
"""

from __future__ import annotations

from dataclasses import dataclass

FLAGS: dict[str, tuple[str, str, str, str, str]] = {
    "vllm": ("vllm serve {model}", "--tensor-parallel-size", "--max-num-seqs", "--max-num-batched-tokens",
             "--gpu-memory-utilization"),
    "sglang": ("python -m sglang.launch_server --model-path {model}", "--tp-size", "--max-running-requests",
               "--chunked-prefill-size", "--mem-fraction-static"),
    "trtllm": ("trtllm-serve {model}", "--tp_size", "--max_batch_size", "--max_num_tokens",
               "--kv_cache_free_gpu_memory_fraction"),
}
"""(command, TP flag, batch-cap flag, token-budget flag, memory-fraction flag) per engine."""


@dataclass(frozen=True)
class Deployment:
    """What runs on one replica: model, SKU, GPUs, engine and its two scheduling settings."""

    model: str
    sku: str
    tp_degree: int
    engine: str
    max_num_seqs: int
    max_num_batched_tokens: int

    def launch_command(self, hf_name: str, gpu_memory_utilization: float) -> str:
        """The engine's server command with these settings (TensorRT-LLM's fraction is of free memory)."""
        command, tp, seqs, tokens, memory = FLAGS[self.engine]
        return (f"{command.format(model=hf_name)} {tp} {self.tp_degree} {seqs} {self.max_num_seqs} "
                f"{tokens} {self.max_num_batched_tokens} {memory} {gpu_memory_utilization:g}")
