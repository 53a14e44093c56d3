"""A declared reuse shape fitted to the prefix reuse measured in a class's logs.

``planner ingest`` measures, per (model, class), what an unbounded prefix cache would have
served (:mod:`planner.ingest.reuse`); a scenario uses it with ``reuse = { measured =
"<out>.reuse.json" }``. The simulator draws requests from a shape (:mod:`planner.sim.class_reuse`),
so the figures are turned into one, by moments. From the file: N requests, H of them with a
hit, and the ideal share r = C / P (C ideal cached tokens of P prompt tokens). From the
class's length laws: m_P the prompt law's mean (over every turn, as the log measured it) and
o the output law's. The fit keeps r on the class's own prompt law, m_C = r·m_P cached tokens
per request: the share carries over when the lengths come from another source than the
reuse (a histogram of another log, a declaration, or a class's file measured on another
model), where the log's absolute token counts would not.

**Sessions**, when the log has session ids and its sessions average at least
:data:`MIN_TURNS` turns. T = round(mean turns per session) turns per conversation; think
time = the logged mean gap between consecutive turns' arrivals (the simulator's think time
is arrival to arrival too). In the session shape turn t's prompt has mean
X + (t − 1)(o + U) (X: the first turn's, U: a later turn's new user tokens) and a later
turn finds its previous turn's prompt and answer cached, so

    m_P = X + (T − 1)/2 · (o + U)
    m_C = (T − 1)/T · (X + o) + (T − 1)(T − 2)/(2T) · (o + U)

whence o + U = 2(m_P + o) − 2T·m_C / (T − 1) and X = m_P − (T − 1)/2 · (o + U). The class's
prompt law (measured over every turn) is scaled by X over its mean to be the first turn's,
and U is a fixed count. Both moments hold exactly without the prompt cap; a conversation
that reaches the cap ends early. When the solution has X < 1 or U < 1 the log's turns do
not grow as conversations do, and the shared-prefix shape is fitted instead.

**Shared prefix** (block hashes, e.g. Mooncake's ``hash_ids``): every request starts with
one of K prefixes of S tokens, drawn uniformly. An unbounded cache misses a prefix once,
the first time it is used, so K = max(1, N − H); S solves E[cached(S, prompt)] = m_C·N / H,
the mean cached prefix of a request with a hit, on the class's prompt law, where a cache
serves whole blocks and never a prompt's last token (:func:`shared_prefix_tokens`, on a fixed
grid of :data:`GRID` quantiles, so the fit is deterministic). The prompt law is unchanged.

Either way the fit keeps the measured share, not the measured cache footprint: every
request of the shape reuses a prefix of the same length. ``planner validate`` prints the
fitted shape's ideal share beside the measured one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.scenario.lengths import MeasuredReuse
from planner.sim.class_reuse import ClassReuse
from planner.sim.workload import ClassWorkload, EmpiricalLength, LengthLaw, LognormalLength

MIN_TURNS = 1.5
"""Sessions averaging fewer turns than this are fitted as a shared prefix: most of them are one request."""
GRID = 4096
"""Quantiles of the prompt law on which the shared prefix's length is solved."""
BLOCK_TOKENS = 16
"""The block size the shared prefix is solved in: vLLM's and SGLang's (TensorRT-LLM's 32 moves a prefix by at most
one block)."""


@dataclass(frozen=True)
class FittedReuse:
    """The fitted shape (None: the log found no reuse), the class's lengths under it, and what was done."""

    reuse: ClassReuse | None
    lengths: ClassWorkload
    note: str


def fit_measured_reuse(measured: MeasuredReuse, lengths: ClassWorkload, max_prompt_tokens: int) -> FittedReuse:
    """The shape of the module docstring for one (model, class)."""
    figures = measured.describe()
    if measured.requests_with_hit == 0 or measured.ideal_cached_tokens == 0:
        return FittedReuse(None, lengths, f"no reuse: {figures}")
    if measured.sessions is not None and (measured.turns_per_session_mean or 0.0) >= MIN_TURNS:
        fitted = _sessions(measured, lengths, max_prompt_tokens, figures)
        if fitted is not None:
            return fitted
    return _shared_prefix(measured, lengths, max_prompt_tokens, figures)


def _sessions(measured: MeasuredReuse, lengths: ClassWorkload, cap: int, figures: str) -> FittedReuse | None:
    turns = max(2, round(measured.turns_per_session_mean or 2.0))
    mean_prompt = lengths.prompt.mean()
    mean_cached = measured.ideal_share * mean_prompt
    output = lengths.output.mean()
    growth = 2.0 * (mean_prompt + output) - 2.0 * turns * mean_cached / (turns - 1)
    first = mean_prompt - (turns - 1) / 2.0 * growth
    user = growth - output
    if first < 1.0 or user < 1.0:
        return None
    prompt = scaled_law(lengths.prompt, first / mean_prompt, cap)
    user_law = EmpiricalLength.points(np.array([round(user)]), np.array([1.0]), "fitted user tokens")
    think = measured.think_time_mean_s or 0.0
    reuse = ClassReuse(cap, turns=turns, think_s=think, user_tokens=user_law)
    note = (f"fitted to {figures}: sessions of {turns} turns, {think:,.0f} s apart, first prompt "
            f"{first:,.0f} tokens on average (the prompt law scaled by {first / mean_prompt:.3f}), "
            f"{round(user):,} new user tokens a turn")
    return FittedReuse(reuse, ClassWorkload(prompt, lengths.output, lengths.source + "; first turn fitted to "
                                            "measured sessions"), note)


def _shared_prefix(measured: MeasuredReuse, lengths: ClassWorkload, cap: int, figures: str) -> FittedReuse:
    variants = max(1, measured.requests - measured.requests_with_hit)
    target = measured.ideal_share * lengths.prompt.mean() * measured.requests / measured.requests_with_hit
    prefix = shared_prefix_tokens(lengths.prompt, target, cap)
    reuse = ClassReuse(cap, system_tokens=prefix, variants=variants)
    return FittedReuse(reuse, lengths, f"fitted to {figures}: a shared prefix of {prefix:,} tokens in "
                                       f"{variants:,} variant(s)")


def shared_prefix_tokens(prompt: LengthLaw, mean_cached: float, cap: int, block_tokens: int = BLOCK_TOKENS) -> int:
    """The S, in whole blocks, whose mean cached prefix E[B·min(⌊S/B⌋, ⌊(prompt − 1)/B⌋)] on the law's quantile
    grid comes nearest ``mean_cached`` (ties: the longer): a cache serves whole blocks and leaves a prompt's last
    token to compute (as the simulator's ideal count, :func:`planner.sim.prefix_workload.ideal_cached_tokens`).
    The longest prompt's whole blocks when no S reaches it."""
    tokens = prompt.sample_from_uniform((np.arange(GRID) + 0.5) / GRID).astype(np.int64)
    servable = np.sort((np.minimum(tokens, cap) - 1) // block_tokens).astype(np.float64)  # blocks per prompt
    below = np.concatenate([[0.0], np.cumsum(servable)])

    def mean_min(blocks: int) -> float:
        k = int(np.searchsorted(servable, blocks, side="left"))  # prompts with fewer blocks keep their own
        return float(block_tokens * (below[k] + blocks * (GRID - k)) / GRID)

    lo, hi = 0, int(servable[-1])
    if mean_min(hi) < mean_cached:
        return hi * block_tokens
    while lo < hi:
        mid = (lo + hi) // 2
        if mean_min(mid) >= mean_cached:
            hi = mid
        else:
            lo = mid + 1
    if lo > 0 and mean_cached - mean_min(lo - 1) < mean_min(lo) - mean_cached:
        lo -= 1  # the block below comes nearer: on short prompts one block is several percent of the share
    return lo * block_tokens


def scaled_law(law: LengthLaw, factor: float, cap: int) -> LengthLaw:
    """``law`` with every length multiplied by ``factor`` (a lognormal's μ moves by ln factor; a histogram's bins
    scale), still cut at ``cap`` tokens."""
    if isinstance(law, LognormalLength):
        return LognormalLength(law.mu + float(np.log(factor)), law.sigma, cap)
    if isinstance(law, EmpiricalLength):
        lo = np.clip(np.rint(law.lo * factor), 1, cap).astype(np.int64)
        hi = np.clip(np.maximum(np.rint(law.hi * factor).astype(np.int64), lo + 1), 2, cap + 1)
        lo = np.minimum(lo, hi - 1)
        return EmpiricalLength(lo, hi, law.counts, f"{law.kind}, scaled by {factor:.3f}")
    raise TypeError(f"cannot scale a {type(law).__name__}")
