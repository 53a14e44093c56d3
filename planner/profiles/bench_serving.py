r"""Step observations from the results of vLLM's serving benchmark (``benchmarks/benchmark_serving.py``,
or ``vllm bench serve``), saved with its save-result and save-detailed options.

One result is one run at one load (``max_concurrency`` requests at most in flight, requests sent
at ``request_rate`` per second, or all at once for ``"inf"``). The keys read, as the benchmark
writes them:

* ``duration``: the run's wall time, s;
* per request, lists of equal length: ``input_lens`` (prompt tokens), ``output_lens``
  (generated tokens), ``ttfts`` (time to first token, s), ``itls`` (the inter-token latencies
  between its streamed chunks, s), and ``errors`` (empty for a request that succeeded; a failed
  one also has a TTFT of 0 and no output): failed requests are skipped;
* ``max_concurrency`` (a number, or null when only the rate limited the load).

A benchmark does not log engine steps, so the steps are inferred, and this is approximate:

* **Decode steps.** A request's median inter-token latency is one decode step: the typical step
  it was decoded in. The median, not the mean, because the steps that also carried another
  request's prompt (chunked prefill) are slower, and they are a minority of a request's steps
  when outputs are longer than the batch, which holds for the usual benchmark settings (with
  outputs shorter than the batch most steps carry a prompt, and the median overstates a pure
  decode step). The batch of that step is the run's mean number of requests decoding, by
  Little's law: the summed decode time of every request (its inter-token latencies) over the
  run's duration, at most ``max_concurrency``. Its KV read is the request's own context at mid
  output, input + output/2, plus the mean of that over the run's requests for each of the
  other sequences in the batch. The spread of the batch around its mean is averaged away, and
  so are the run's ramp-up and ramp-down, when fewer requests decode: in a run of a few
  requests they are most of it, and the batch comes out below the one most steps ran at; a
  run of many times ``max_concurrency`` requests is mostly steady state.
* **Prefill steps**, from runs at low load only: one request in flight at a time
  (``max_concurrency`` 1), or under :data:`LOW_LOAD_IN_SYSTEM` requests in flight on average
  (Little's law again, on the whole latency). Then a request's TTFT is the prefill of its prompt
  as one fresh chunk, plus the server's own overhead (HTTP, tokenisation), which the fit folds
  into the step. Under load a TTFT also holds queueing and the steps of other requests, so it
  says little about one step and is not used. A prompt longer than the engine's token budget
  (``max_num_batched_tokens``) is prefilled in several steps; its TTFT is still read as one
  step, which overstates the per-step cost of such long prompts by the repeated fixed costs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from planner.errors import InputError

REQUEST_KEYS = ("input_lens", "output_lens", "ttfts", "itls")
REQUIRED_KEYS = ("duration", *REQUEST_KEYS)
LOW_LOAD_IN_SYSTEM = 0.25
"""Mean requests in flight under which a run's TTFTs are read as prefill steps: three arrivals in four
then find the engine idle (a Poisson stream into a system holding 0.25 on average)."""
FIX = ("save the benchmark's result with its save-result and save-detailed options (the per-request lists "
       f"{', '.join(REQUEST_KEYS)} are written only with save-detailed), or give a step log CSV instead")


@dataclass(frozen=True)
class BenchmarkSteps:
    """The steps inferred from one benchmark run, and what was inferred about the run."""

    steps: pd.DataFrame
    requests: int
    failed: int
    decoding_batch: float
    low_load: bool


def is_benchmark_result(payload: object) -> bool:
    """Whether a parsed JSON value looks like a benchmark_serving result (a dict with its per-request lists)."""
    return isinstance(payload, Mapping) and any(key in payload for key in REQUEST_KEYS)


def _number(value: Any, where: str, *, positive: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        kind = "a positive" if positive else "a non-negative"
        raise InputError(f"expected {kind} number, got {value!r}", where=where, fix=FIX)
    return float(value)


def _request_lists(run: Mapping[str, Any], where: str) -> dict[str, list[Any]]:
    missing = [key for key in REQUIRED_KEYS if key not in run]
    if missing:
        raise InputError(f"not a complete benchmark_serving result: missing key(s) {', '.join(missing)}",
                         where=where, fix=FIX)
    lists = {key: run[key] for key in REQUEST_KEYS}
    lists["errors"] = run.get("errors") or [""] * len(run["ttfts"])
    for key, values in lists.items():
        if not isinstance(values, list):
            raise InputError(f"key '{key}' must be a list with one entry per request", where=where, fix=FIX)
        if len(values) != len(lists["ttfts"]):
            raise InputError(f"key '{key}' has {len(values)} entries but 'ttfts' has {len(lists['ttfts'])}",
                             where=where, fix="every per-request list needs one entry per request")
    return lists


def _requests(run: Mapping[str, Any], where: str) -> pd.DataFrame:
    """One row per successful request: prompt and output tokens, TTFT and decode time (s), median ITL (s)."""
    lists = _request_lists(run, where)
    rows = []
    for i, error in enumerate(lists["errors"]):
        here = f"{where}, request {i + 1}"
        if error:
            continue
        itls = lists["itls"][i]
        if not isinstance(itls, list):
            raise InputError(f"expected a list of inter-token latencies, got {itls!r}", where=f"{here}, key 'itls'",
                             fix=FIX)
        gaps = [_number(v, f"{here}, key 'itls'") for v in itls]
        rows.append({
            "input": _number(lists["input_lens"][i], f"{here}, key 'input_lens'"),
            "output": _number(lists["output_lens"][i], f"{here}, key 'output_lens'"),
            "ttft_s": _number(lists["ttfts"][i], f"{here}, key 'ttfts'"),
            "decode_s": float(sum(gaps)),
            "median_itl_s": float(np.median(gaps)) if gaps else np.nan,
        })
    frame = pd.DataFrame(rows, columns=["input", "output", "ttft_s", "decode_s", "median_itl_s"])
    # a request that failed without saying so: no first token, or no output
    return frame[(frame["ttft_s"] > 0) & (frame["output"] > 0)].reset_index(drop=True)


def _max_concurrency(run: Mapping[str, Any], where: str) -> float | None:
    value = run.get("max_concurrency")
    return None if value is None else _number(value, f"{where}, key 'max_concurrency'", positive=True)


def benchmark_steps(run: Mapping[str, Any], where: str) -> BenchmarkSteps:
    """The decode and prefill steps of one run (module docstring), as a frame of ``user_fit.STEP_COLUMNS``."""
    duration = _number(run.get("duration"), f"{where}, key 'duration'", positive=True)
    concurrency = _max_concurrency(run, where)
    requests = _requests(run, where)
    total = len(run["ttfts"])
    decoding = requests["decode_s"].sum() / duration
    batch = max(1.0, min(decoding, concurrency) if concurrency is not None else decoding)
    in_system = (requests["ttft_s"] + requests["decode_s"]).sum() / duration
    low_load = concurrency == 1 or in_system <= LOW_LOAD_IN_SYSTEM
    context = requests["input"] + requests["output"] / 2.0
    mean_context = float(context.mean()) if len(requests) else 0.0
    decodes = requests[requests["median_itl_s"] > 0]  # NaN (no gaps: one streamed chunk) is not > 0
    decode_steps = pd.DataFrame({
        "batch_size": batch,
        "kv_tokens": context[decodes.index] + (batch - 1.0) * mean_context,
        "prefill_tokens": 0.0,
        "prefill_pairs": 0.0,
        "step_ms": 1000.0 * decodes["median_itl_s"],
    })
    prompts = requests if low_load else requests.iloc[:0]
    prefill_steps = pd.DataFrame({
        "batch_size": 0.0,
        "kv_tokens": 0.0,
        "prefill_tokens": prompts["input"],
        "prefill_pairs": prompts["input"] * (prompts["input"] + 1.0) / 2.0,
        "step_ms": 1000.0 * prompts["ttft_s"],
    })
    steps = pd.concat([decode_steps, prefill_steps[prefill_steps["prefill_tokens"] > 0]], ignore_index=True)
    return BenchmarkSteps(steps.astype(float), total, total - len(requests), float(batch), bool(low_load))


def runs_of(payload: object) -> Sequence[Mapping[str, Any]] | None:
    """The runs in a parsed JSON value: one result, or a list of them; None when it is something else."""
    if is_benchmark_result(payload):
        return [payload]  # type: ignore[list-item]
    if isinstance(payload, list) and payload and all(is_benchmark_result(item) for item in payload):
        return payload
    return None
