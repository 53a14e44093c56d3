"""Engine settings as an operator deploys them: the command line of each serving engine.

A deployment is a model on ``tp`` GPUs under one engine with a batch cap (vLLM's
``--max-num-seqs``), a token budget per step (``--max-num-batched-tokens``, the
chunked-prefill size) and, for vLLM, a long-prefill threshold (``--long-prefill-token-threshold``:
the most prompt tokens one request prefills in a step). Each engine spells those settings
and the KV memory fraction its own way; :meth:`Deployment.launch_command` writes them as that
engine's server command.
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
    long_prefill_token_threshold: int = 0

    def launch_command(self, hf_name: str, gpu_memory_utilization: float) -> str:
        """The engine's server command with these settings (TensorRT-LLM's fraction is of free memory)."""
        command, tp, seqs, tokens, memory = FLAGS[self.engine]
        text = (f"{command.format(model=hf_name)} {tp} {self.tp_degree} {seqs} {self.max_num_seqs} "
                f"{tokens} {self.max_num_batched_tokens} {memory} {gpu_memory_utilization:g}")
        if self.long_prefill_token_threshold > 0:  # vLLM only: the calibration grid offers it to no other engine
            text += f" --long-prefill-token-threshold {self.long_prefill_token_threshold}"
        return text
