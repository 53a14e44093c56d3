"""Prefix reuse in a request log: how much of each prompt an ideal prefix cache would serve.

vLLM's automatic prefix caching keeps the KV blocks of earlier prompts and serves the
leading part of a new prompt that matches them without recomputing it. This module
measures, per (model, traffic class), the most any such cache could serve: an
unbounded cache that never evicts. It takes values and returns values (the log is read
by :mod:`planner.ingest.reuse_read`).

**Requests** of one (model, class) are taken in arrival order, ties kept in file order
(a stable sort). Request ``i`` has a prompt of ``P_i`` tokens, an output of ``O_i``
tokens and, depending on the log, a list of block hashes ``h_i1, h_i2, ...`` (block
``j`` covers prompt tokens ``(j-1)B`` to ``jB - 1``, ``B`` = ``block_tokens``; the last
block may be partial) and a session id.

**Block rule** (``prefix_hashes``, Mooncake's ``hash_ids``). The cached run ``r_i`` is
the largest ``k`` such that some earlier request ``j < i`` starts with the same ``k``
hashes, ``h_j1..h_jk = h_i1..h_ik``: a block's KV depends on every token before it, so
only a leading run of shared blocks can be reused. Then

    cached_i = min(r_i * B, P_i)    (the last block may be partial)

It is computed in one pass over the blocks, O(total blocks): every prefix chain seen is
a node of a trie held as a dict ``(parent node, hash) -> node``; request ``i`` walks its
hashes down the trie while the nodes exist (those are the earlier requests' prefixes)
and adds the rest.

**Session rule** (``session_id``). Requests with the same session id are the turns of one
conversation: a turn's prompt is the previous turn's prompt and output plus the new
message, so for turn ``t > 1``

    cached_t = min(P_{t-1} + O_{t-1}, P_t),    cached_1 = 0.

With both columns a request's cached length is the larger of the two rules.

**Figures** per (model, class): requests, prompt tokens ``sum P_i``, ideal cached tokens
``C = sum cached_i``, the ideal share ``C / sum P_i``, the cached prefix length's mean and
quantiles (numpy's linear interpolation, as ingest's), its power-of-two histogram (bin
``k`` is ``[2^k, 2^(k+1))``, ``[0, 1)`` for 0, as the token-length histogram), the
requests with ``cached_i > 0``, and, for sessions, their number, the turns per session
(mean, p50, p99) and the think time: the gap from one turn's arrival to the next turn's
(seconds; it includes serving the earlier turn), mean and p50.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SOURCE_MOONCAKE = "mooncake hash_ids"
SOURCE_HASHES = "generic prefix_hashes"
SOURCE_SESSIONS = "generic session_id"
METHOD = (
    "an unbounded prefix cache that never evicts, per (model, traffic_class), requests in arrival order "
    "(ties in file order); blocks: a request's cached prefix is its longest leading run of block hashes that "
    "an earlier request also starts with, min(run x block_tokens, prompt_tokens) tokens; sessions: a turn's "
    "cached prefix is min(previous turn's prompt + output, its prompt) tokens; with both, the larger"
)
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
US_PER_S = 1_000_000
UNITS = {
    "requests": "requests", "prompt_tokens": "tokens", "ideal_cached_tokens": "tokens", "ideal_share": "fraction",
    "requests_with_hit": "requests", "cached_prefix_tokens": "tokens per request", "block_tokens": "tokens",
    "turns_per_session": "requests", "think_time_s": "seconds",
}
"""The unit of each figure of the reuse JSON."""


@dataclass(frozen=True)
class ReuseRequest:
    """One request as the reuse rules see it: arrival (microseconds since the epoch), prompt and
    output tokens, its prompt-block hashes (``None`` when the log has none) and its session id
    (``None`` when the log has none or the cell is empty)."""

    arrival_us: int
    prompt_tokens: int
    output_tokens: int
    blocks: tuple[Hashable, ...] | None = None
    session: str | None = None


def in_arrival_order(requests: Iterable[ReuseRequest]) -> list[ReuseRequest]:
    """Requests sorted by arrival; ties keep their given (file) order."""
    return sorted(requests, key=lambda r: r.arrival_us)


def block_hits(requests: Sequence[ReuseRequest], block_tokens: int) -> list[int]:
    """Cached tokens of each request (in the given order) under the block rule: ``min(r_i B, P_i)``."""
    trie: dict[tuple[int, Hashable], int] = {}
    hits = []
    for request in requests:
        node, run, matching = 0, 0, True
        for block in request.blocks or ():
            child = trie.get((node, block)) if matching else None
            if child is None:
                matching = False
                child = len(trie) + 1
                trie[(node, block)] = child
            else:
                run += 1
            node = child
        hits.append(min(run * block_tokens, request.prompt_tokens))
    return hits


def session_hits(requests: Sequence[ReuseRequest]) -> list[int]:
    """Cached tokens of each request (in the given order) under the session rule: ``min(P_prev + O_prev, P)``."""
    previous: dict[str, tuple[int, int]] = {}
    hits = []
    for request in requests:
        if request.session is None:
            hits.append(0)
            continue
        before = previous.get(request.session)
        hits.append(0 if before is None else min(before[0] + before[1], request.prompt_tokens))
        previous[request.session] = (request.prompt_tokens, request.output_tokens)
    return hits


def cached_tokens(requests: Sequence[ReuseRequest], block_tokens: int | None, sessions: bool) -> list[int]:
    """Each request's ideal cached prefix (requests in arrival order): the block rule when ``block_tokens``
    is given, the session rule when ``sessions``, the larger of the two with both."""
    hits = [0] * len(requests)
    if block_tokens is not None:
        hits = block_hits(requests, block_tokens)
    if sessions:
        hits = [max(a, b) for a, b in zip(hits, session_hits(requests), strict=True)]
    return hits


def _quantiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, **{name: None for name, _ in QUANTILES}}
    array = np.asarray(values, dtype=np.float64)
    return {"mean": float(array.mean()), **{name: float(np.quantile(array, q)) for name, q in QUANTILES}}


def power_of_two_histogram(values: Sequence[int]) -> list[dict[str, int]]:
    """Counts in the bins [0, 1), [1, 2), [2, 4), ... up to the largest value's bin, empty bins included."""
    counts: dict[int, int] = {}
    for value in values:
        k = int(value).bit_length() - 1  # floor(log2 v), -1 for 0
        counts[k] = counts.get(k, 0) + 1
    if not counts:
        return []
    return [{"bin_lo_tokens": 0 if k < 0 else 1 << k, "bin_hi_tokens": 1 << (k + 1), "count": counts.get(k, 0)}
            for k in range(-1, max(counts) + 1)]


def session_figures(requests: Sequence[ReuseRequest]) -> dict[str, Any]:
    """Sessions (distinct non-empty ids), turns per session and think time between consecutive turns."""
    arrivals: dict[str, list[int]] = {}
    for request in requests:
        if request.session is not None:
            arrivals.setdefault(request.session, []).append(request.arrival_us)
    turns = [len(times) for times in arrivals.values()]
    gaps = [(b - a) / US_PER_S for times in arrivals.values() for a, b in zip(times, times[1:], strict=False)]
    turn_figures = _quantiles(turns)
    gap_figures = _quantiles(gaps)
    return {
        "sessions": len(arrivals),
        "turns_per_session": {"mean": turn_figures["mean"], "p50": turn_figures["p50"], "p99": turn_figures["p99"]},
        "think_time_s": {"mean": gap_figures["mean"], "p50": gap_figures["p50"], "gaps": len(gaps)},
    }


def source_of(block_source: str | None, sessions: bool) -> str:
    """The source label: the block source, ``generic session_id``, or both joined by `` + ``."""
    parts = [part for part in (block_source, SOURCE_SESSIONS if sessions else None) if part]
    return " + ".join(parts)


def series_reuse(requests: Sequence[ReuseRequest], block_tokens: int | None, sessions: bool) -> dict[str, Any]:
    """The reuse figures of one (model, class) (see the module's docstring); ``requests`` in any order."""
    ordered = in_arrival_order(requests)
    hits = cached_tokens(ordered, block_tokens, sessions)
    prompt = sum(r.prompt_tokens for r in ordered)
    cached = sum(hits)
    return {
        "requests": len(ordered),
        "prompt_tokens": prompt,
        "ideal_cached_tokens": cached,
        "ideal_share": cached / prompt if prompt else None,
        "requests_with_hit": sum(1 for hit in hits if hit > 0),
        "cached_prefix_tokens": {**_quantiles(hits), "histogram": power_of_two_histogram(hits)},
        "sessions": session_figures(ordered) if sessions else None,
    }


def reuse_report(by_series: Mapping[tuple[str, str], Sequence[ReuseRequest]], *, block_tokens: int | None,
                 block_source: str | None, sessions: bool) -> dict[str, Any]:
    """The reuse JSON: the method, then one entry per (model, traffic_class), sorted, with its figures,
    block size (``None`` without hashes) and source."""
    source = source_of(block_source, sessions)
    series = [{"model": model, "traffic_class": traffic_class, "source": source, "block_tokens": block_tokens,
               **series_reuse(requests, block_tokens, sessions)}
              for (model, traffic_class), requests in sorted(by_series.items())]
    return {"method": METHOD, "units": UNITS, "series": series}
