"""Each engine's launch command carries the deployment's TP degree and engine settings under that engine's flags."""

from __future__ import annotations

import pytest

from planner.profiles.deploy import Deployment


@pytest.mark.parametrize(("engine", "expected"), [
    ("vllm", "vllm serve meta-llama/Meta-Llama-3.1-70B --tensor-parallel-size 4 --max-num-seqs 256 "
             "--max-num-batched-tokens 8192 --gpu-memory-utilization 0.9"),
    ("sglang", "python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3.1-70B --tp-size 4 "
               "--max-running-requests 256 --chunked-prefill-size 8192 --mem-fraction-static 0.9"),
    ("trtllm", "trtllm-serve meta-llama/Meta-Llama-3.1-70B --tp_size 4 --max_batch_size 256 --max_num_tokens 8192 "
               "--kv_cache_free_gpu_memory_fraction 0.9"),
])
def test_each_engine_spells_the_settings_its_own_way(engine, expected):
    deployment = Deployment("llama-3.1-70b", "H100", 4, engine, 256, 8192)
    assert deployment.launch_command("meta-llama/Meta-Llama-3.1-70B", 0.9) == expected


def test_a_long_prefill_threshold_is_on_the_vllm_command_only_when_set():
    on = Deployment("llama-3.1-8b", "H100", 1, "vllm", 512, 8192, 2048).launch_command("m", 0.9)
    off = Deployment("llama-3.1-8b", "H100", 1, "vllm", 512, 8192, 0).launch_command("m", 0.9)
    assert on.endswith("--long-prefill-token-threshold 2048") and "long-prefill" not in off
